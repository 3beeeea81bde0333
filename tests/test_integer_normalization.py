"""Softmax (spec 18), LayerNorm and GroupNorm (spec 19), L2 normalization (spec 19.1) in integers: exact integer helpers, the
error against float that the spec states, and Python and C++ agreeing value for value."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import qtk
from qtk import _C, arithmetic
from qtk.modules import L2Normalize, QuantizedL2Normalize, QuantizedNorm, QuantizedSoftmax
from qtk.modules.base import QParams

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


def _quantize(x, qparams):
    return arithmetic.quantize(x, qparams.scale, qparams.zero_point).to(torch.int8)


def _qparams(values):
    """Asymmetric int8 qparams of a tensor's range (spec 1)."""
    scale, zero_point = arithmetic.qparams_from_range(values.min(), values.max(), -128, 127, False)
    return QParams(float(scale), int(zero_point))


def test_isqrt_and_bit_length_are_exact():
    values = [0, 1, 2, 3, 4, 15, 16, 17, 2**31 - 1, 2**31, 2**52 + 1, 2**53 - 1, 2**53 + 1,
              2**61 - 1, 2**61, 2**62 - 1] + [k * k + d for k in (3, 2**20 + 7, 2**30 + 3)
                                              for d in (-1, 0, 1)]
    v = torch.tensor(values, dtype=torch.int64)
    assert arithmetic.isqrt(v).tolist() == [math.isqrt(x) for x in values]
    assert arithmetic._bit_length(v).tolist() == [x.bit_length() for x in values]
    np.testing.assert_array_equal(_C.arith.isqrt(v.numpy()), [math.isqrt(x) for x in values])


def _softmax_module(input_qparams, output_qparams, dim=-1):
    layer = QuantizedSoftmax([input_qparams], output_qparams)
    layer.dim, layer.where = dim, "softmax"
    layer.register_buffer("table", arithmetic.softmax_table(input_qparams.scale))
    layer.multiplier = arithmetic.softmax_output_multiplier(output_qparams.scale, "softmax")
    return layer


@pytest.mark.parametrize("spread", [0.5, 4.0, 20.0])
def test_softmax_is_float_softmax_quantized_within_a_step(spread):
    torch.manual_seed(0)
    x = torch.randn(64, 37) * spread
    x_qparams = _qparams(x)
    x_q = _quantize(x, x_qparams)
    expected = torch.softmax(arithmetic.dequantize(x_q, *x_qparams[:2]), -1)
    y_qparams = QParams(1 / 255, -128)
    y_q = _softmax_module(x_qparams, y_qparams)(x_q)
    reference = _quantize(expected, y_qparams)
    difference = (y_q.long() - reference.long()).abs()
    assert difference.max() <= 1 and difference.float().mean() < 0.01
    assert torch.unique(y_q).numel() > 20


def _norm_module(norm, input_qparams, output_qparams):
    layer = QuantizedNorm([input_qparams], output_qparams)
    layer.where, layer.eps = "norm", norm.eps
    if isinstance(norm, nn.GroupNorm):
        layer.groups, layer.axes, channels = norm.num_groups, None, norm.num_channels
    else:
        layer.groups, layer.axes = None, len(norm.normalized_shape)
        channels = int(torch.Size(norm.normalized_shape).numel())
    layer.gamma, layer.beta = norm.weight.detach().reshape(-1), norm.bias.detach().reshape(-1)
    assert channels == layer.gamma.numel()
    return layer


@pytest.mark.parametrize("norm, shape", [
    (nn.LayerNorm(48), (6, 9, 48)),
    (nn.LayerNorm([5, 7]), (4, 3, 5, 7)),
    (nn.GroupNorm(4, 12), (3, 12, 5, 6)),
    (nn.GroupNorm(1, 6), (2, 6, 4, 4)),
], ids=["layer_norm", "layer_norm_2d", "group_norm", "group_norm_one_group"])
def test_norm_is_float_norm_quantized_within_a_step(norm, shape):
    torch.manual_seed(0)
    with torch.no_grad():
        norm.weight.uniform_(-2, 2)
        norm.weight.view(-1)[1] = 0  # spec 4's zero-channel rule
        norm.bias.uniform_(-1, 1)
    x = torch.randn(shape) * 3 + 0.7
    x_qparams = _qparams(x)
    x_q = _quantize(x, x_qparams)
    with torch.no_grad():
        expected = norm(arithmetic.dequantize(x_q, *x_qparams[:2]))
    y_qparams = _qparams(expected)
    y_q = _norm_module(norm, x_qparams, y_qparams)(x_q)
    difference = (y_q.long() - _quantize(expected, y_qparams).long()).abs()
    assert difference.max() <= 1 and difference.float().mean() < 0.01
    assert torch.unique(y_q).numel() > 50


@SETTINGS
@given(st.integers(1, 40), st.integers(1, 300), st.integers(-128, 127),
       st.floats(2**-10, 2.0), st.integers(0, 2**31 - 1))
def test_softmax_python_and_cpp_agree(rows, length, zero_point, scale, seed):
    q = torch.randint(-128, 128, (rows, length), generator=torch.Generator().manual_seed(seed),
                      dtype=torch.int8)
    table = arithmetic.softmax_table(scale)
    multiplier = arithmetic.softmax_output_multiplier(1 / 255, "softmax")
    expected = arithmetic.integer_softmax(q, 1, table, multiplier, -128)
    actual = _C.arith.softmax_rows(q.numpy(), table.numpy(), multiplier, -128, -128, 127)
    np.testing.assert_array_equal(actual, expected.numpy().astype(np.int8))


@SETTINGS
@given(st.integers(1, 30), st.integers(1, 600), st.integers(-128, 127),
       st.integers(1, 2**40), st.integers(0, 2**31 - 1), st.booleans())
def test_normalized_q16_python_and_cpp_agree(rows, count, zero_point, eps_term, seed, constant):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randint(-128, 128, (rows, count), generator=generator, dtype=torch.int8)
    if constant:  # V = E alone: the eps term is all of the variance
        q[:] = q[:, :1]
    expected = arithmetic.normalized_q16(q, zero_point, (1,), eps_term)
    actual = _C.arith.normalized_q16(q.numpy(), zero_point, eps_term)
    np.testing.assert_array_equal(actual, expected.numpy())


def _l2_module(dim, eps, input_qparams, output_qparams):
    layer = QuantizedL2Normalize([input_qparams], output_qparams)
    layer.where, layer.dim, layer.eps = "l2", dim, eps
    return layer


@pytest.mark.parametrize("dim, shape, spread", [(1, (4, 32, 5, 6), 3.0), (-1, (6, 9, 17), 0.5),
                                                (2, (3, 4, 300), 10.0)])
def test_l2_normalize_is_float_normalize_quantized_within_a_step(dim, shape, spread):
    torch.manual_seed(0)
    x = torch.randn(shape) * spread + 0.3
    x_qparams = _qparams(x)
    x_q = _quantize(x, x_qparams)
    x_q.select(dim, 0)[0] = x_qparams.zero_point  # a row with one zero value
    x_q.select(-2 if dim == -1 else -1, 1).fill_(x_qparams.zero_point)  # all-zero rows
    expected = torch.nn.functional.normalize(arithmetic.dequantize(x_q, *x_qparams[:2]), dim=dim)
    y_qparams = QParams(1 / 127, 0)
    y_q = _l2_module(dim, 1e-12, x_qparams, y_qparams)(x_q)
    difference = (y_q.long() - _quantize(expected, y_qparams).long()).abs()
    assert difference.max() <= 1 and difference.float().mean() < 0.02
    assert torch.unique(y_q).numel() > 30


@pytest.mark.parametrize("eps, scale", [(1e-12, 0.05), (0.3, 0.05), (1.0, 0.1), (0.5, 1 / 3)])
def test_l2_eps_term_is_where_torch_divides_by_eps(eps, scale):
    """S >= E exactly where s sqrt(S) >= eps (float64), so V = S wherever torch divides by the
    norm; below it the rows scale by eps / (s sqrt E), within sqrt(1 - 1/E) of torch."""
    e = arithmetic.l2_eps_term(eps, scale, "l2")
    for s_sum in range(max(0, e - 3), e + 3):
        assert (s_sum >= e) == (scale * math.sqrt(s_sum) >= eps or e == 1 and s_sum >= 1)
    with pytest.raises(ValueError, match="section 19.1"):
        arithmetic.l2_eps_term(1.0, 2.0**-40, "l2")
    x_q = torch.tensor([[1, 0, 0, 0], [3, -2, 1, 0], [0, 0, 0, 0], [100, 1, -3, 7]], dtype=torch.int8)
    y_q = _l2_module(1, eps, QParams(scale, 0), QParams(1 / 127, 0))(x_q)
    x = x_q.double() * scale
    norm = x.norm(dim=1, keepdim=True)
    above = (norm >= eps).squeeze(1)
    expected = _quantize((x / norm.clamp(min=eps)).float(), QParams(1 / 127, 0))
    assert (y_q[above].long() - expected[above].long()).abs().max() <= 1
    scaled = x / torch.maximum(norm, torch.full_like(norm, math.sqrt(e) * scale))
    assert (y_q.long() - _quantize(scaled.float(), QParams(1 / 127, 0)).long()).abs().max() <= 1
    assert not bool(above.all()) or eps < 1e-6


@SETTINGS
@given(st.integers(1, 30), st.integers(1, 600), st.integers(-128, 127),
       st.one_of(st.just(1), st.integers(1, 2**61)), st.integers(0, 2**31 - 1),
       st.sampled_from(["random", "constant", "zero"]))
def test_l2_normalized_q16_python_and_cpp_agree(rows, length, zero_point, eps_term, seed, kind):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randint(-128, 128, (rows, length), generator=generator, dtype=torch.int8)
    if kind == "constant":  # all-equal rows
        q[:] = q[:, :1]
    elif kind == "zero":  # S = 0: V = E, t = 0
        q[::2] = zero_point
    expected = arithmetic.l2_normalized_q16(q, zero_point, (1,), eps_term)
    actual = _C.arith.l2_normalized_q16(q.numpy(), zero_point, eps_term)
    np.testing.assert_array_equal(actual, expected.numpy())
    assert int(expected.abs().max()) <= 2**16


@pytest.mark.parametrize("example", ["layer_norm", "softmax", "group_norm", "l2_normalize"])
def test_int8_norms_deploy_byte_identical(example):
    """Through PTQ, convert, export and the runtime at batches 1 and 3 and 1 and 2 threads."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 12, 3, padding=1)
    tail = {"layer_norm": lambda: ChannelsLastNorm(nn.LayerNorm(12)),
            "softmax": lambda: nn.Softmax(1), "group_norm": lambda: nn.GroupNorm(3, 12),
            "l2_normalize": lambda: L2Normalize(1)}[example]
    model = nn.Sequential(conv, tail()).eval()
    prepared = qtk.prepare_ptq(model)
    with torch.no_grad():
        for _ in range(2):
            prepared(torch.randn(4, 3, 10, 10))
    quantized = qtk.convert(prepared)
    for threads in (1, 2):
        session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 10, 10)),
                                   threads=threads)
        for batch in (1, 3):
            x = torch.randn(batch, 3, 10, 10)
            with qtk.int8_outputs(quantized), torch.no_grad():
                reference = quantized(x)
            runtime = session.run(x, output="int8")
            assert torch.equal(reference, runtime)
            assert torch.unique(reference).numel() > 30


class ChannelsLastNorm(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.norm = norm

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1))
