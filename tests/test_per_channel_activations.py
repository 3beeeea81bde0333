"""Activations quantized per channel (docs/quantization_spec.md section 25): a scale per channel
and one zero point, on the outputs a depthwise convolution reads (directly or through a table
function). Which tensors qualify, the shared zero point rule, the accuracy it buys where channel
ranges are far apart, byte-identical deployment at every ISA level and thread count, and the
refusals where a reader cannot fold the scales. Their ONNX forms: tests/test_onnx.py."""
import itertools

import pytest
import torch
from torch import nn

import qtk
from qtk import arithmetic
from qtk.errors import UnsupportedOpError
from qtk.fake_quant import FakeQuantize
from qtk.observers import MinMaxObserver, PerChannelMinMaxObserver
from qtk.qconfig import per_channel_activations, with_args
from conftest import assert_not_degenerate


class DepthwiseBlock(nn.Module):
    """stem -> 1x1 conv + BN -> HardSwish -> depthwise + BN -> HardSwish -> 1x1 conv: a MobileNetV3
    / PP-LCNet block, its expansion channels' BatchNorm gains 200x apart and the projection's
    weights the inverse, so small channels matter as much as large ones."""

    def __init__(self, channels=24, stride=1):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.expand = nn.Sequential(nn.Conv2d(8, channels, 1, bias=False), nn.BatchNorm2d(channels),
                                    nn.Hardswish())
        self.depthwise = nn.Sequential(
            nn.Conv2d(channels, channels, 3, stride, 1, groups=channels, bias=False),
            nn.BatchNorm2d(channels), nn.Hardswish())
        self.project = nn.Conv2d(channels, 16, 1)
        gains = torch.logspace(-1.7, 0.6, channels)[torch.randperm(channels)]
        with torch.no_grad():
            self.expand[1].weight.copy_(gains)
            self.project.weight.div_(gains.reshape(1, -1, 1, 1))

    def forward(self, x):
        return self.project(self.depthwise(self.expand(self.stem(x))))


def _calibrated(model, qconfig, data):
    return qtk.calibrate(qtk.prepare_ptq(model, qconfig, example_inputs=(data[:1],)), [data])


def _sqnr(reference, output):
    return float(10 * torch.log10(reference.pow(2).sum() / (reference - output).pow(2).sum()))


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    model = DepthwiseBlock().eval()
    return model, torch.randn(8, 3, 12, 12), torch.randn(8, 3, 12, 12)


def test_the_outputs_a_depthwise_conv_reads_are_per_channel(block):
    model, calibration, _ = block
    prepared = _calibrated(model, per_channel_activations(qtk.default_ptq_qconfig), calibration)
    per_channel = sorted(name for name, m in prepared.named_modules()
                         if isinstance(m, FakeQuantize) and m.ch_axis == 1)
    # the expansion conv's output and its HardSwish's (read by the depthwise conv); not the
    # depthwise conv's nor its HardSwish's (read by a pointwise conv), nor the stem's
    assert per_channel == ["expand.0.activation_post_process",
                           "expand.2.activation_post_process"], per_channel
    quantized = qtk.convert(prepared)
    table = quantized.get_submodule("expand.2").table
    assert table.shape == (24, 256)
    assert quantized.get_submodule("depthwise.2").table.shape == (256,)


def test_per_channel_scales_keep_small_channels(block):
    model, calibration, test = block
    with torch.no_grad():
        reference = model(test)
    outputs = {}
    for name, qconfig in (("per tensor", qtk.default_ptq_qconfig),
                          ("per channel", per_channel_activations(qtk.default_ptq_qconfig))):
        with torch.no_grad():
            outputs[name] = qtk.convert(_calibrated(model, qconfig, calibration))(test)
    assert _sqnr(reference, outputs["per channel"]) > _sqnr(reference, outputs["per tensor"]) + 2


# (channels, stride, size): odd channel counts on small planes, and 96 channels of 56x56, where
# one table per lut would run channels-last at the native level (the per-channel luts keep their
# region NCHW: test_graph_passes.cpp).
@pytest.mark.parametrize("channels, stride, size", [(33, 1, 12), (33, 2, 13), (96, 1, 56)])
def test_deploys_byte_identical_at_every_isa_level(channels, stride, size, monkeypatch):
    torch.manual_seed(1)
    model = DepthwiseBlock(channels, stride).eval()
    calibration, test = torch.randn(4, 3, size, size), torch.randn(2, 3, size, size)
    quantized = qtk.convert(_calibrated(model, per_channel_activations(qtk.default_ptq_qconfig),
                                        calibration))
    with qtk.int8_outputs(quantized), torch.no_grad():
        expected = quantized(test)
    assert_not_degenerate(expected, min_distinct=32)
    path = qtk.export(quantized, test[:1])
    for isa, threads in itertools.product(("scalar", "avx2", ""), (1, 2)):
        monkeypatch.setenv("QTK_ISA", isa)
        session = qtk.runtime.load(path, threads=threads)
        assert torch.equal(torch.as_tensor(session.run(test, output="int8")), expected), (isa,
                                                                                      threads)


def test_qat_trains_and_deploys_per_channel():
    torch.manual_seed(2)
    model = DepthwiseBlock(17)
    qat = qtk.quantize_qat(model, per_channel_activations(qtk.default_qat_qconfig))
    for module in qat.modules():  # BatchNorm statistics: the average over the steps
        if isinstance(module, nn.BatchNorm2d):
            module.momentum = None
    optimizer = torch.optim.SGD(qat.parameters(), lr=0.01)
    for _ in range(3):  # toward the float model's outputs
        x = torch.randn(4, 3, 10, 10)
        loss = torch.nn.functional.mse_loss(qat(x), model(x).detach())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert sum(isinstance(m, FakeQuantize) and m.ch_axis == 1 for m in qat.modules()) == 2
    quantized = qtk.convert(qat.eval())
    test = torch.randn(2, 3, 10, 10)
    with qtk.int8_outputs(quantized), torch.no_grad():
        expected = quantized(test)
    got = qtk.runtime.load(qtk.export(quantized, test[:1])).run(test, output="int8")
    assert torch.equal(torch.as_tensor(got), expected)
    assert_not_degenerate(expected, min_distinct=32)


def test_quantize_ptq_quantizes_per_channel_by_default(block):
    model, calibration, _ = block
    prepared = qtk.quantize_ptq(model, [calibration])
    assert any(isinstance(m, FakeQuantize) and m.ch_axis == 1 for m in prepared.modules())


def test_shared_zero_point_holds_every_channel_with_least_noise():
    lo = torch.tensor([-0.375, -0.375, -3.0, 0.0, -1e-3])
    hi = torch.tensor([12.0, 0.5, 3.0, 2.0, 0.0])
    scale, zero_point = arithmetic.shared_zero_point_qparams(lo, hi, -128, 127)
    z = int(zero_point[0])
    assert torch.equal(zero_point, torch.full((5,), z))
    # every channel's range is representable: s (qmin - z) <= lo and s (qmax - z) >= hi
    assert bool((scale * (-128 - z) <= lo + lo.abs() * 1e-6).all())
    assert bool((scale * (127 - z) >= hi - hi.abs() * 1e-6).all())
    # no other zero point has less rounding noise (sum of squared scales)
    def noise(candidate):
        s = torch.maximum(hi.double() / max(127 - candidate, 1e-30),
                          -lo.double() / max(candidate + 128, 1e-30))
        return float(s.square().sum())
    assert all(noise(z) <= noise(c) * (1 + 1e-9) for c in range(-127, 127))


def test_observer_refuses_a_shared_zero_point_without_channels():
    with pytest.raises(ValueError, match="shared_zero_point is for asymmetric per-channel"):
        MinMaxObserver(shared_zero_point=True)


def test_a_reader_that_cannot_fold_channel_scales_is_refused():
    """A per-channel quantizer put by hand on an add's output: convert names the layer."""
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)

        def forward(self, x):
            return self.conv(x) + x

    prepared = _calibrated(Residual().eval(), qtk.default_ptq_qconfig, torch.randn(2, 3, 4, 4))
    (add,) = [m for m in prepared.modules() if type(m).__name__ == "QATAdd"]
    add.activation_post_process = FakeQuantize(
        with_args(PerChannelMinMaxObserver, ch_axis=1, shared_zero_point=True),
        fake_quant_enabled=False)
    prepared(torch.randn(2, 3, 4, 4))
    with pytest.raises(UnsupportedOpError, match="cannot read or write a tensor quantized per"):
        qtk.convert(prepared)
