"""Every op qtk registers, in each of its forms (the family files' Float / QAT / Quantized trios
and float32 runtime ops): one small model per registered float module type.

A new op adds one line to EXAMPLES; the first test fails until it does. Each example runs PTQ,
convert, export and the runtime byte-identical to the Quantized reference, and its float export
runs in the runtime within the float tolerance of test_float_export.py.
"""
import pytest
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime
from qtk import modules
from test_float_export import assert_runtime_matches_torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SIZE = 12


def _conv(c_in=3, c_out=6, **kwargs):
    return nn.Conv2d(c_in, c_out, 3, padding=1, **kwargs)


def _bn(channels):
    bn = nn.BatchNorm2d(channels)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


def _then_mix(*layers, channels=6):
    """``layers`` after a conv stem, then a conv that mixes pixels and channels, so outputs vary
    (nearest resizing repeats them)."""
    return nn.Sequential(_conv(c_out=channels), *layers, nn.Conv2d(channels, 5, 3))


class Binary(nn.Module):
    """Two conv branches joined by a functional call: ``a + b``, ``relu(a + b)``, ``a * b``,
    ``cat``, or a spatial ``mean``."""

    def __init__(self, join):
        super().__init__()
        self.a, self.b, self.join = _conv(), _conv(), join

    def forward(self, x):
        return self.join(self.a(x), torch.sigmoid(self.b(x)))


class UserStubs(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = modules.QuantStub(), modules.DequantStub()
        self.conv = _conv()

    def forward(self, x):
        return self.dequant(self.conv(self.quant(x)))


EXAMPLES = {
    nn.Conv2d: lambda: nn.Sequential(_conv(groups=3)),
    modules.ConvReLU2d: lambda: _then_mix(nn.ReLU()),
    modules.ConvBn2d: lambda: nn.Sequential(_conv(), _bn(6)),
    modules.ConvBnReLU2d: lambda: nn.Sequential(_conv(), _bn(6), nn.ReLU6(), nn.Conv2d(6, 5, 1)),
    nn.Linear: lambda: nn.Sequential(nn.Flatten(), nn.Linear(3 * SIZE * SIZE, 7)),
    modules.LinearReLU: lambda: nn.Sequential(nn.Flatten(), nn.Linear(3 * SIZE * SIZE, 9),
                                              nn.ReLU(), nn.Linear(9, 7)),
    modules.Add: lambda: Binary(lambda a, b: a + b),
    modules.AddReLU: lambda: nn.Sequential(Binary(lambda a, b: torch.relu(a + b)),
                                           nn.Conv2d(6, 5, 1)),
    modules.Mul: lambda: Binary(lambda a, b: a * b),
    modules.Concat: lambda: Binary(lambda a, b: torch.cat([a, b], 1)),
    modules.SpatialMean: lambda: Binary(lambda a, b: (a + b).mean((2, 3))),
    nn.ReLU: lambda: _then_mix(nn.MaxPool2d(2), nn.ReLU()),
    nn.ReLU6: lambda: _then_mix(nn.MaxPool2d(2), nn.ReLU6()),
    nn.Hardtanh: lambda: _then_mix(nn.MaxPool2d(2), nn.Hardtanh(-0.5, 0.75)),
    nn.Hardswish: lambda: _then_mix(nn.Hardswish()),
    nn.Hardsigmoid: lambda: _then_mix(nn.Hardsigmoid()),
    nn.Sigmoid: lambda: _then_mix(nn.Sigmoid()),
    nn.MaxPool2d: lambda: _then_mix(nn.MaxPool2d(3, 2, 1)),
    nn.AvgPool2d: lambda: _then_mix(nn.AvgPool2d(3, 2, 1, count_include_pad=False)),
    nn.AdaptiveAvgPool2d: lambda: nn.Sequential(_conv(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                                nn.Linear(6, 7)),
    nn.Upsample: lambda: _then_mix(nn.Upsample(scale_factor=2, mode="nearest")),
    modules.QATResizeBilinear: lambda: _then_mix(nn.Upsample(size=(7, 17), mode="bilinear")),
    nn.ConstantPad2d: lambda: _then_mix(nn.ConstantPad2d((1, 0, 2, 1), 0.25)),
    nn.Flatten: lambda: nn.Sequential(_conv(), nn.Flatten(), nn.Linear(6 * SIZE * SIZE, 7)),
    nn.Identity: lambda: _then_mix(nn.Identity()),
    nn.Dropout: lambda: _then_mix(nn.Dropout(0.5)),
    modules.QuantStub: UserStubs,
    modules.DequantStub: UserStubs,
}
NO_FLOAT_KERNEL = {modules.QATResizeBilinear}  # bilinear resizing runs in int8 only


def _registered_types():
    """Every float module type some family file gives a form, and the QAT classes that stand for
    a mode of one (bilinear resizing)."""
    types = set(modules.FLOAT_TO_QAT) | set(modules.PASS_THROUGH) | set(modules.FLOAT_EXPORTS)
    return types | {m for m in modules.QAT_MODULES if nn.Upsample in m.FLOAT_TYPES}


def test_every_registered_op_has_an_example():
    missing = sorted(t.__name__ for t in _registered_types() - set(EXAMPLES))
    assert not missing, f"add an example to EXAMPLES for {missing}"


def _ids():
    return [t.__name__ for t in EXAMPLES]


@pytest.mark.parametrize("op", EXAMPLES, ids=_ids())
def test_int8_is_byte_identical(op):
    model = EXAMPLES[op]().eval()
    x = torch.randn(3, 3, SIZE, SIZE)
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE) for _ in range(2)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)


@pytest.mark.parametrize("op", sorted(set(EXAMPLES) - NO_FLOAT_KERNEL, key=lambda t: t.__name__),
                         ids=lambda t: t.__name__)
def test_float_export_matches_torch(op):
    assert_runtime_matches_torch(EXAMPLES[op]().eval(), SIZE, batch=2)
