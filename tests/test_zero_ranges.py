"""Zero ranges (docs/quantization_spec.md sections 1 and 4): all-zero tensors and weight channels
quantize, train and deploy byte-identical, at every observer and fake quantizer.

A zero range comes from ordinary models: torchvision's ``zero_init_residual=True`` starts every
residual block's last BatchNorm at gamma = 0 (its conv folds to zero weights, its output is 0), a
ReLU layer can be dead, a channel pruned.
"""
import math

import pytest
import torch
import torchvision
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime
from model_zoo.training import reestimate_batchnorm
from test_torchvision_models import check_byte_identical

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

QAT_QUANTIZERS = sorted(qtk.qconfig.QAT_QUANTIZERS)
PTQ_METHODS = qtk.quantize.CALIBRATION_METHODS


def zero_init_resnet(name):
    model = getattr(torchvision.models, name)(zero_init_residual=True)
    return reestimate_batchnorm(model, (4, 3, 64, 64))  # gamma stays 0: only statistics move


def assert_finite_step(model, optimizer, x):
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, torch.randint(0, logits.shape[1], (x.shape[0],)))
    assert math.isfinite(float(loss)), "QAT loss is not finite"
    optimizer.zero_grad()
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is None or bool(torch.isfinite(p.grad).all()), f"{name}: gradient not finite"
    optimizer.step()


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_zero_init_residual_qat_is_finite_and_byte_identical(name):
    qat = qtk.quantize_qat(zero_init_resnet(name)).train()
    optimizer = torch.optim.SGD(qat.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(3):
        assert_finite_step(qat, optimizer, torch.randn(2, 3, 64, 64))
    check_byte_identical(qtk.convert(qat.eval()), 64, batches=[1, 3])


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_zero_init_residual_ptq_is_byte_identical(name):
    quantized = calibrated(zero_init_resnet(name), [torch.randn(4, 3, 64, 64) for _ in range(2)])
    check_byte_identical(quantized, 64, batches=[1, 3])


@pytest.mark.parametrize("quantizer", QAT_QUANTIZERS)
def test_quantizer_that_saw_zeros_first_follows_its_data(quantizer):
    """A block's residual branch is exactly zero at the first step and moves once gamma has: its
    output quantizer (learned ones included) ends up with a scale fitted to the values it sees
    then, not stuck at the zero range's scale."""
    qat = qtk.quantize_qat(zero_init_resnet("resnet18"),
                           qtk.qconfig.QAT_QUANTIZERS[quantizer]).train()
    branch = qat.get_submodule("layer1.0.conv2").activation_post_process
    seen = []
    branch.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].detach()))
    optimizer = torch.optim.SGD(qat.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(3):
        assert_finite_step(qat, optimizer, torch.randn(2, 3, 64, 64))
    assert float(seen[0].abs().max()) == 0.0 and float(seen[-1].abs().max()) > 0.0
    scale = float(branch.calculate_qparams()[0])
    fitted = float(seen[-1].max() - seen[-1].min().clamp(max=0)) / (branch.qmax - branch.qmin)
    # Stuck at the zero range's scale (1.0) would be a ratio in the thousands. Below 1 is expected:
    # the STE observer's moving average moves 1% a step from the zero range it saw first (as
    # torch.ao's), and a learned scale starts from the first nonzero batch's smaller values.
    assert 1e-3 < scale / fitted < 3, (scale, fitted)


class ZeroParts(nn.Module):
    """A dead ReLU layer (a constant-zero activation) read by a conv with a bias, a conv with
    pruned (all-zero) output channels whose BatchNorm shift is not zero, around live layers."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.dead = nn.Sequential(nn.Conv2d(16, 16, 1), nn.ReLU())
        self.after_dead = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.pruned = nn.Sequential(nn.Conv2d(16, 24, 3, stride=2, padding=1), nn.BatchNorm2d(24),
                                    nn.ReLU())
        self.head = nn.Linear(24, 10)
        with torch.no_grad():
            self.dead[0].weight.zero_()
            self.dead[0].bias.fill_(-1.0)
            self.after_dead[0].bias.uniform_(0.5, 3.0)
            self.pruned[1].bias.uniform_(0.5, 3.0)
        self.prune()

    @torch.no_grad()
    def prune(self, model=None):
        """Zero the first 5 output channels of ``pruned``'s conv (in ``model``, a QAT copy, too)."""
        weight = (model or self).get_submodule("pruned.0").weight
        weight[:5] = 0

    def forward(self, x):
        x = self.stem(x)
        x = x + self.after_dead(self.dead(x))
        x = self.pruned(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def check_zero_parts(quantized):
    example = torch.randn(1, 3, 16, 16)
    x = torch.randn(6, 3, 16, 16)
    reference, runtime = reference_and_runtime(quantized, example, x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=16)
    dead = [m for name, m in quantized.named_modules() if name == "dead.0"][0]
    assert dead.multiplier.tolist() == [2**30] * 16 and dead.shift.tolist() == [30] * 16
    pruned = [m for name, m in quantized.named_modules() if name == "pruned.0"][0]
    assert pruned.multiplier[:5].tolist() == [2**30] * 5 and pruned.bias_q[:5].min() > 0
    live = (pruned.multiplier[5:] == 2**30) & (pruned.shift[5:] == 30)
    assert not live.any()  # the zero-channel rule is for zero channels only


@pytest.mark.parametrize("method", PTQ_METHODS)
def test_zero_parts_ptq_every_observer(method):
    model = ZeroParts()
    reestimate_batchnorm(model, (8, 3, 16, 16))
    prepared = qtk.calibrate(qtk.prepare_ptq(model), [torch.randn(8, 3, 16, 16) for _ in range(3)],
                             method=method)
    check_zero_parts(qtk.convert(prepared))


@pytest.mark.parametrize("quantizer", QAT_QUANTIZERS)
def test_zero_parts_qat_every_quantizer(quantizer):
    model = ZeroParts()
    reestimate_batchnorm(model, (8, 3, 16, 16))
    qat = qtk.quantize_qat(model, qtk.qconfig.QAT_QUANTIZERS[quantizer]).train()
    optimizer = torch.optim.SGD(qat.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(3):
        assert_finite_step(qat, optimizer, torch.randn(8, 3, 16, 16))
        model.prune(qat)  # pruning holds the channels at zero through training
    qat(torch.randn(8, 3, 16, 16))
    check_zero_parts(qtk.convert(qat.eval()))
