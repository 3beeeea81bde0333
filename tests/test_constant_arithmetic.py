"""Arithmetic with a constant or a learned tensor in int8 (docs/quantization_spec.md section 21):
the runtime equals the Quantized model byte for byte, and both are within one step of float."""
import pytest
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime
from qtk import arithmetic, modules

OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}

# constant shapes against an activation [N, 4, 5, 3]: every pattern of broadcast dims
CONSTANT_SHAPES = [(), (1,), (3,), (5, 1), (5, 3), (4, 1, 1), (4, 5, 1), (4, 1, 3), (1, 5, 3),
                   (4, 5, 3), (1, 4, 5, 3), (1, 1, 1, 1)]


class WithConstantAfterConv(nn.Module):
    """conv, then ``x <op> c`` (or ``c <op> x``): the int8 op between two int8 parts."""

    def __init__(self, op, constant, constant_first):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=(1, 0))
        self.op, self.constant_first = op, constant_first
        self.constant = nn.Parameter(constant)

    def forward(self, x):
        x = self.conv(x)
        operands = (self.constant, x) if self.constant_first else (x, self.constant)
        return OPS[self.op](*operands)


def _constant(shape, signs, op):
    torch.manual_seed(len(shape) * 7 + len(signs))
    c = torch.rand(shape) * 1.5 + 0.25 if op == "div" else torch.randn(shape)
    if signs == "positive":
        c = c.abs()
    elif signs == "negative":
        c = -c.abs()
    elif signs == "with zeros" and op != "div":
        c = c * (torch.arange(c.numel()).reshape(shape) % 3 != 1)  # a 0 where c has 2+
    return c


# c / x is a table, not this op (test_constant_over_x_is_a_table)
OP_ORDERS = [(op, first) for op in OPS for first in (False, True) if (op, first) != ("div", True)]


def _quantized_and_float(model, batches=2):
    quantized = calibrated(model, [torch.randn(4, 3, 5, 5) for _ in range(batches)])
    return quantized


@pytest.mark.parametrize("shape", CONSTANT_SHAPES, ids=str)
@pytest.mark.parametrize("op, constant_first", OP_ORDERS)
@pytest.mark.parametrize("signs", ["mixed", "positive", "negative", "with zeros"])
def test_runtime_is_byte_identical(shape, op, constant_first, signs):
    model = WithConstantAfterConv(op, _constant(shape, signs, op), constant_first).eval()
    quantized = _quantized_and_float(model)
    assert any(isinstance(m, modules.QuantizedWithConstant) for m in quantized.modules())
    x = torch.randn(3, 3, 5, 5)
    for threads in (1, 2):
        reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=threads)
        assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)


@pytest.mark.parametrize("op, constant_first", OP_ORDERS)
@pytest.mark.parametrize("shape", [(), (4, 1, 1), (4, 5, 3)], ids=str)
def test_within_one_step_of_float(op, constant_first, shape):
    """The int8 op's output against the float op on the same dequantized input, quantized with
    the same output parameters: equal, or one step away near a rounding boundary."""
    c = _constant(shape, "mixed", op) * 3
    float_module = modules.WithConstant(op, c, constant_first)
    qat = modules.QATWithConstant.from_float(float_module, qtk.qconfig.default_ptq_qconfig)
    in_qparams = modules.base.QParams(0.021, -5)
    x_q = torch.randint(-128, 128, (2, 4, 5, 3))
    x = arithmetic.dequantize(x_q, *in_qparams[:2])
    with torch.no_grad():
        qat.train()(x)
        qat.eval()
    layer = modules.QuantizedWithConstant.from_module(qat, [in_qparams], "test")
    s_y, z_y, lo, hi = layer.output_qparams
    with torch.no_grad():
        expected = arithmetic.quantize(float_module(x), s_y, z_y, lo, hi)
        actual = layer(x_q.to(torch.int8)).to(torch.int64)
    assert (actual - expected).abs().max() <= 1
    assert (actual != expected).float().mean() < 0.02


def test_sign_and_zero_of_a_product():
    """``c = 0`` gives the output's zero point; a negative ``c`` mirrors ``q - z``."""
    x_q = torch.arange(-128, 128).to(torch.int8).reshape(1, 256)
    multiplier, shift = arithmetic.constant_mul_requantization(torch.tensor([0.0, 0.5, -0.5]),
                                                               0.1, 0.1, "test")
    assert multiplier.tolist() == [0, 2**30, -(2**30)] and shift.tolist() == [1, 31, 31]
    y = [arithmetic.mul_constant(x_q, 3, m, n, -7) for m, n in zip(multiplier, shift)]
    assert bool((y[0] == -7).all())
    d = x_q.to(torch.int64) - 3
    assert torch.equal(y[1] - (-7), arithmetic.rounding_shift(d * 2**30, 31).clamp(-121, 134))
    assert torch.equal(y[2] - (-7), arithmetic.rounding_shift(-d * 2**30, 31).clamp(-121, 134))


def test_a_constant_beyond_the_int32_sum_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^layer: the constant .* beyond the 2\^30"):
        arithmetic.constant_add_requantization(torch.tensor([1e6]), 2.0**-23, 1.0, "layer")
    with pytest.raises(ValueError, match=r"^layer: division by a constant holding 0"):
        arithmetic.constant_mul_requantization(torch.tensor([1.0, 0.0]), 0.1, 0.1, "layer",
                                               divide=True)


def test_a_large_constant_lowers_k():
    bias, k, _, _ = arithmetic.constant_add_requantization(torch.tensor([1000.0, -3.0]), 0.01, 1.0,
                                                           "test")
    assert k == 13  # 1000 / 0.01 = 10^5 steps: 10^5 * 2^14 > 2^30 >= 10^5 * 2^13
    assert int(bias.abs().max()) <= arithmetic.CONSTANT_MAX_BIAS


def test_constant_over_x_is_a_table():
    """``c / x`` with one value of ``c`` is a function of x alone: spec 10's table, exact."""
    model = WithConstantAfterConv("div", torch.full((4, 1, 1), -1.5), True).eval()
    quantized = _quantized_and_float(model)
    x = torch.randn(3, 3, 5, 5)
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)


def test_constant_over_x_of_unequal_values_is_refused_by_name():
    model = WithConstantAfterConv("div", torch.rand(4, 1, 1) + 0.5, True).eval()
    with pytest.raises(ValueError, match=r"c / x with a c of unequal values has no int8 form"):
        _quantized_and_float(model)


class PositionEmbedding(nn.Module):
    """ViT's input: patches as tokens plus a learned [1, T, C] position embedding."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 4, stride=4)
        self.position = nn.Parameter(torch.randn(1, 9, 16) * 0.5)
        self.linear = nn.Linear(16, 8)

    def forward(self, x):
        tokens = self.conv(x).flatten(2).transpose(1, 2)
        return self.linear(tokens + self.position)


class LayerScale(nn.Module):
    """ConvNeXt's block tail: a learned per-channel scale of decades, ``gamma * block(x)``."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.layer_scale = nn.Parameter(torch.tensor([1e-6, -1e-4, 1e-2, 0.3, -2.0, 0.0])
                                        .reshape(6, 1, 1))
        self.skip, self.head = nn.Conv2d(3, 6, 1), nn.Conv2d(6, 4, 1)

    def forward(self, x):
        return self.head(self.layer_scale * self.conv(x) + self.skip(x))


@pytest.mark.parametrize("model_class", [PositionEmbedding, LayerScale])
def test_vit_and_convnext_patterns(model_class):
    model = model_class().eval()
    x = torch.randn(3, 3, 12, 12)
    quantized = calibrated(model, [torch.randn(4, 3, 12, 12) for _ in range(2)])
    assert any(isinstance(m, modules.QuantizedWithConstant) for m in quantized.modules())
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)
    with torch.no_grad():
        expected, actual = model(x), quantized(x)
    assert (expected - actual).abs().max() < 0.1 * expected.abs().max()
