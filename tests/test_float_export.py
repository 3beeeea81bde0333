"""Float models export too: every op a float32 runtime op, so float and int8 compare in the same
runtime (docs/qmodel_format.md, "Float32 ops").

Tolerance: the runtime sums in another order than torch and runs convolutions with BatchNorm
folded into the weights, so outputs differ by float32 rounding only, which grows with depth and
with the output's magnitude. We allow max |y_runtime - y_torch| <= 1e-4 * max |y_torch| + 1e-5.
Measured with the reference float kernels: 5e-7 (small CNN), 1.6e-6 (resnet18) and 5.4e-6
(mobilenet_v2) relative to max |y_torch|; the margin is for faster kernels summing in other
orders. Outputs must not be degenerate: many distinct values, not all near zero.
"""
import pytest
import torch
import torchvision
from torch import nn

import qtk
from model_zoo.training import reestimate_batchnorm

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RELATIVE_TOLERANCE, ABSOLUTE_TOLERANCE = 1e-4, 1e-5


class SmallCNN(nn.Module):
    """Every float32 op family: fused conv-bn-relu(6), depthwise, squeeze-excitation (mul,
    sigmoid), hardswish, residual add-relu, concat, pooling, flatten, linear-relu, and the user's
    own QuantStub/DequantStub, which a float export keeps as identities."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = qtk.modules.QuantStub(), qtk.modules.DequantStub()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.depthwise = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8),
                                       nn.ReLU6())
        self.excite = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 8, 1))
        self.branch = nn.Sequential(nn.Conv2d(8, 4, 1), nn.Hardswish())
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(12 * 5 * 5, 16), nn.ReLU(),
                                  nn.Linear(16, 10))

    def forward(self, x):
        y = self.stem(self.quant(x))
        z = self.depthwise(y)
        z = z * torch.sigmoid(self.excite(z))
        y = torch.relu(y + z)
        y = torch.cat([y, self.branch(y)], dim=1)
        y = nn.functional.avg_pool2d(self.pool(y), 2)
        return self.dequant(self.head(y))


def assert_runtime_matches_torch(model, size, batch=1):
    """Export ``model`` (eval mode) and compare the runtime's float32 output with torch's."""
    session = qtk.runtime.load(qtk.export(model, torch.randn(1, 3, size, size)), threads=2)
    assert "quantize" not in session.model.op_names and "dequantize" not in session.model.op_names
    assert session.inputs[0]["dtype"] == "float32" and session.outputs[0]["dtype"] == "float32"
    x = torch.randn(batch, 3, size, size)
    with torch.no_grad():
        expected = model(x)
    actual = session.run(x)
    assert actual.dtype == torch.float32 and actual.shape == expected.shape
    scale = expected.abs().max().item()
    assert scale > 1e-3 and torch.unique(expected).numel() >= expected.numel() // 2, \
        "degenerate output"
    difference = (actual - expected).abs().max().item()
    assert difference <= RELATIVE_TOLERANCE * scale + ABSOLUTE_TOLERANCE, \
        f"max difference {difference:.3g} for outputs up to {scale:.3g}"


def test_small_cnn_with_every_float_op_family():
    model = reestimate_batchnorm(SmallCNN(), (4, 3, 20, 20))
    assert_runtime_matches_torch(model, 20, batch=3)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_torchvision_model_at_224(name):
    model = reestimate_batchnorm(getattr(torchvision.models, name)(), (4, 3, 224, 224))
    assert_runtime_matches_torch(model, 224)


@pytest.mark.parametrize("algorithm", ["conv2d_float32_winograd_f4x3_8x32_avx512",
                                       "conv2d_float32_winograd_f4x3_6x16_avx2"])
def test_resnet18_with_float_winograd_on_its_3x3_stride_1_layers(algorithm, monkeypatch):
    monkeypatch.setenv("QTK_CONV_ALGO", algorithm)  # read at load: serves every layer it fits
    model = reestimate_batchnorm(torchvision.models.resnet18(), (4, 3, 224, 224))
    try:
        session = qtk.runtime.load(qtk.export(model, torch.randn(1, 3, 224, 224)))
    except qtk.QtkError as error:
        if "this CPU lacks" in str(error):
            pytest.skip(str(error))
        raise
    assert session.algorithms.count(algorithm) == 13  # resnet18's 3x3 stride-1 convs
    assert_runtime_matches_torch(model, 224)


def test_float_winograd_is_the_default_on_outputs_of_13x13_and_up():
    # resnet18: 10 of its 13 3x3 stride-1 convs have outputs of 56, 28 or 14 pixels a side; the
    # three at 7x7 (4 Winograd tiles) keep the GEMM, like every other conv (docs/winograd.md).
    model = reestimate_batchnorm(torchvision.models.resnet18(), (4, 3, 224, 224))
    session = qtk.runtime.load(qtk.export(model, torch.randn(1, 3, 224, 224)))
    convs = [a for a in session.algorithms if a.startswith("conv2d_float32")]
    winograd = [a for a in convs if "_winograd_" in a]
    if not any("avx" in a for a in convs):
        pytest.skip("no vector float kernels on this CPU")
    assert len(convs) == 20 and len(winograd) == 10


def test_float_export_leaves_the_model_unchanged():
    model = reestimate_batchnorm(SmallCNN(), (4, 3, 20, 20))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    qtk.export(model, torch.randn(1, 3, 20, 20))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert isinstance(model.stem[1], nn.BatchNorm2d)  # fused only in the exported copy


def test_op_without_float_kernel_names_module_type_and_way_out():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Softsign()).eval()
    with pytest.raises(qtk.UnsupportedOpError,
                       match=r"^1: Softsign .*no float kernel.*qconfig.*replace it"):
        qtk.export(model, torch.randn(1, 3, 8, 8))


def test_unconverted_qat_model_is_refused_with_the_way_out():
    qat = qtk.quantize_qat(SmallCNN())
    with pytest.raises(TypeError, match=r"qtk\.convert"):
        qtk.export(qat, torch.randn(1, 3, 20, 20))
