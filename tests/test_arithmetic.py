"""Contract 2 of docs/contracts.md (one arithmetic): qtk/arithmetic.py and deploy_runtime's arithmetic.h agree exactly.

Hypothesis drives both with the same integers, edge cases included: rounding ties, saturation,
shift 1 and 62, the smallest and largest multipliers, negative accumulators.
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from qtk import _C, arithmetic

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)
int32s = st.integers(arithmetic.INT32_MIN, arithmetic.INT32_MAX)
int8s = st.integers(-128, 127)
multipliers = st.one_of(st.integers(2**30, 2**31 - 1), st.sampled_from([2**30, 2**31 - 1, 0]))
shifts = st.integers(1, 62)


def _array(values, dtype):
    return np.asarray(values, dtype=dtype)


@SETTINGS
@given(st.lists(st.tuples(int32s, multipliers, shifts), min_size=1, max_size=64), int8s,
       st.tuples(int8s, int8s))
@example([(2**31 - 1, 2**31 - 1, 1), (-(2**31), 2**31 - 1, 1), (3, 2**30, 31), (-3, 2**30, 31),
          (1, 2**30, 31), (-1, 2**30, 31)], 0, (-128, 127))
def test_requantize_matches(cases, zero_point, bounds):
    lo, hi = min(bounds), max(bounds)
    acc, m, n = (_array(c, np.int32) for c in zip(*cases))
    expected = arithmetic.requantize(torch.from_numpy(acc).long(), torch.from_numpy(m).long(),
                                     torch.from_numpy(n).long(), zero_point, lo, hi)
    actual = _C.arith.requantize(acc, m, n, zero_point, lo, hi)
    np.testing.assert_array_equal(actual, expected.numpy().astype(np.int8))


def test_requantize_rounds_ties_toward_positive_infinity():
    # acc * 2^30 >> 31 is acc / 2: ties at odd acc
    acc = np.array([1, -1, 3, -3, 5, -5], dtype=np.int32)
    m = np.full(6, 2**30, dtype=np.int32)
    n = np.full(6, 31, dtype=np.int32)
    np.testing.assert_array_equal(_C.arith.requantize(acc, m, n, 0, -128, 127), [1, 0, 2, -1, 3, -2])


@SETTINGS
@given(hnp.arrays(np.int8, st.integers(1, 64)), int8s, multipliers, int8s, multipliers, shifts,
       int8s, st.tuples(int8s, int8s))
def test_rescale_add_matches(a, za, ma, zb, mb, shift, zero_point, bounds):
    lo, hi = min(bounds), max(bounds)
    b = np.flip(a).copy()
    expected = arithmetic.rescaled_sum([(torch.from_numpy(a), za, ma), (torch.from_numpy(b), zb, mb)],
                                       shift, zero_point, lo, hi)
    actual = _C.arith.rescale_add(a, za, ma, b, zb, mb, shift, zero_point, lo, hi)
    np.testing.assert_array_equal(actual, expected.numpy().astype(np.int8))


finite_or_special = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True),
    st.integers(-300, 300).map(lambda k: k * 0.5),  # exact ties once divided by a power-of-two scale
)


@SETTINGS
@given(st.lists(finite_or_special, min_size=1, max_size=64),
       st.one_of(st.floats(2.0**-20, 1e3, width=32), st.sampled_from([0.5, 1.0, 0.25, 0.1])), int8s)
def test_quantize_matches(values, scale, zero_point):
    x = _array(values, np.float32)
    expected = arithmetic.quantize(torch.from_numpy(x), scale, zero_point)
    np.testing.assert_array_equal(_C.arith.quantize(x, scale, zero_point),
                                  expected.numpy().astype(np.int8))


@SETTINGS
@given(st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=32),
       st.floats(2.0**-17, 10.0, width=32), int8s)
def test_quantize_is_torch_fake_quantize_rounding(values, scale, zero_point):
    """The QAT model's fake quantization and the deployed quantizer round identically."""
    x = torch.tensor(values, dtype=torch.float32)
    fake = torch.fake_quantize_per_tensor_affine(x, scale, zero_point, -128, 127)
    ours = arithmetic.dequantize(arithmetic.quantize(x, scale, zero_point), scale, zero_point)
    assert torch.equal(fake, ours)


@SETTINGS
@given(hnp.arrays(np.int8, st.integers(1, 64)), st.floats(2.0**-20, 1e3, width=32), int8s)
def test_dequantize_matches(q, scale, zero_point):
    expected = arithmetic.dequantize(torch.from_numpy(q), scale, zero_point)
    actual = _C.arith.dequantize(q, scale, zero_point)
    assert actual.tobytes() == expected.numpy().tobytes()


@pytest.mark.parametrize("zero_point", [-128, -1, 0, 5, 127])
def test_binary_sign_matches(zero_point):
    q = np.arange(-128, 128, dtype=np.int8)
    expected = arithmetic.binary_sign(torch.from_numpy(q), zero_point)
    np.testing.assert_array_equal(_C.arith.binary_sign(q, zero_point), expected.numpy())
    assert set(expected[q == zero_point].tolist()) == {1}  # sign(0) = +1


@SETTINGS
@given(st.lists(st.tuples(st.integers(-(2**40), 2**40), st.integers(1, 10**6)), min_size=1,
                max_size=64))
@example([(5, 2), (-5, 2), (3, 2), (-3, 2), (7, 14), (-7, 14), (0, 9), (4, 3), (-4, 3)])
def test_round_half_away_div_matches(cases):
    total, divisor = (_array(c, np.int64) for c in zip(*cases))
    expected = arithmetic.round_half_away_div(torch.from_numpy(total), torch.from_numpy(divisor))
    np.testing.assert_array_equal(_C.arith.round_half_away_div(total, divisor),
                                  expected.numpy().astype(np.int32))
    reals = [t / d for t, d in cases]
    assert all(abs(e - r) <= 0.5 for e, r in zip(expected.tolist(), reals))


@SETTINGS
@given(st.floats(2.0**-40, 2.0**29, allow_nan=False))
def test_quantize_multiplier_is_accurate(m):
    big_m, n = arithmetic.quantize_multiplier(m)
    if big_m == 0:
        assert m < 2.0**-31
        return
    assert 2**30 <= big_m < 2**31 and 1 <= n <= 62
    assert math.isclose(big_m * 2.0**-n, m, rel_tol=2.0**-30)


@SETTINGS
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=2, max_size=16),
       st.floats(2.0**-23, 10.0, width=32), st.floats(2.0**-23, 10.0, width=32),
       st.sampled_from([0.0, 2.0**-23, 0.01]), int8s)
@example([0.0, 2.5, -2.5, 1e6], 2.0**-23, 0.5, 2.0**-23, -128)
def test_zero_weight_channel_requantization(biases, input_scale, output_scale, zero_scale,
                                            zero_point):
    """Spec 4: a channel of all-zero int8 weights deploys as m = 1 (M = 2**30, n = 30) with its
    bias at the output scale, whatever its weight scale; Python's plan and C++'s requantize agree
    on it, and the output is the bias rounded once (half to even, in float64)."""
    channels = len(biases)
    weight_q = torch.zeros(channels, 3, 3, 3, dtype=torch.int8)
    weight_q[0, 1, 2, 0] = 5  # channel 0 is an ordinary one
    weight_scale = torch.full((channels,), zero_scale if zero_scale else 1.0, dtype=torch.float32)
    weight_scale[0] = 0.01
    bias = torch.tensor([0.0] + biases[1:], dtype=torch.float32)  # channel 0's bias fits int32
    bias_q, big_m, n = arithmetic.weight_layer_requantization(bias, weight_q, input_scale,
                                                              weight_scale, output_scale, "test")
    assert big_m[1:].tolist() == [2**30] * (channels - 1) and n[1:].tolist() == [30] * (channels - 1)
    ordinary = arithmetic.quantize_multiplier(float(input_scale) * float(weight_scale[0])
                                                 / float(output_scale))
    assert (int(big_m[0]), int(n[0])) == ordinary
    acc = bias_q.to(torch.int32).numpy()
    expected = arithmetic.requantize(bias_q, big_m, n, zero_point)
    actual = _C.arith.requantize(acc, big_m.to(torch.int32).numpy(), n.to(torch.int32).numpy(),
                                 zero_point, -128, 127)
    np.testing.assert_array_equal(actual, expected.numpy().astype(np.int8))
    once = [min(max(round(float(b) / float(output_scale)) + zero_point, -128), 127)
            for b in bias[1:].tolist()]
    assert expected[1:].tolist() == once


signed_multiplier_values = st.one_of(multipliers, multipliers.map(lambda m: -m))


@SETTINGS
@given(st.lists(st.tuples(int32s, multipliers, shifts, signed_multiplier_values, shifts),
                min_size=1, max_size=64), int8s, st.tuples(int8s, int8s))
@example([(0, 2**30, 31, -(2**30), 31), (-1, 2**30, 31, -(2**30), 31),
          (-(2**31), 2**30, 1, -(2**31 - 1), 1)], 0, (-128, 127))
def test_requantize_by_sign_matches(cases, zero_point, bounds):
    """Spec 22, a PReLU alone or fused into a conv: at or above zero by the positive pair, below
    by the slope's signed one."""
    lo, hi = min(bounds), max(bounds)
    acc, m, n, negative_m, negative_n = (_array(c, np.int32) for c in zip(*cases))
    expected = arithmetic.requantize_by_sign(
        torch.from_numpy(acc).long(), (torch.from_numpy(m).long(), torch.from_numpy(n).long()),
        (torch.from_numpy(negative_m).long(), torch.from_numpy(negative_n).long()), zero_point,
        lo, hi)
    actual = _C.arith.requantize_by_sign(acc, m, n, negative_m, negative_n, zero_point, lo, hi)
    np.testing.assert_array_equal(actual, expected.numpy().astype(np.int8))


def test_a_slope_without_an_int8_form_is_refused():
    with pytest.raises(ValueError, match="slope: a multiplier is NaN or infinite"):
        arithmetic.prelu_multipliers(torch.tensor([0.25, float("nan")]), 0.1, 0.05)


def test_prelu_multipliers_carry_the_slope_sign():
    positive, (m, n) = arithmetic.prelu_multipliers(torch.tensor([0.25, -0.25, 0.0]), 0.1, 0.05)
    assert positive == arithmetic.quantize_multiplier(2.0)
    assert m.tolist() == [2**30, -(2**30), 0] and n.tolist() == [31, 31, 1]
