"""The quantized arithmetic of docs/quantization_spec.md, written once for the Quantized modules.

The C++ twin is deploy_runtime/include/qtk/arithmetic.h; tests/test_arithmetic.py holds the two
against each other. Integer results are computed exactly: in int64, or in float64 where every value
is an integer below 2**53. Multipliers and shifts are derived here, once, at convert time.
"""
import math

import torch

INT8_MIN, INT8_MAX = -128, 127
WEIGHT_MIN, WEIGHT_MAX = -127, 127  # narrow range: keeps -128 * -128 out of every product
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_SHIFT = 62


# ---- spec 1: quantize / dequantize --------------------------------------------------------------

def quantize(x, scale, zero_point, qmin=INT8_MIN, qmax=INT8_MAX, axis=None):
    """Float tensor -> int64 tensor of quantized values; `scale`/`zero_point` are per tensor, or
    per channel along `axis`. This is torch.fake_quantize_per_*_affine's rounding rule."""
    scale = torch.as_tensor(scale, dtype=torch.float32)
    zero_point = torch.as_tensor(zero_point, dtype=torch.int64)
    if axis is not None:
        shape = [1] * x.dim()
        shape[axis] = -1
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    inv_scale = torch.ones((), dtype=torch.float32) / scale
    r = torch.round(x.to(torch.float32) * inv_scale)
    r = torch.nan_to_num(r, nan=0.0)
    r = torch.minimum(torch.maximum(r, (qmin - zero_point).to(torch.float32)),
                      (qmax - zero_point).to(torch.float32))
    return r.to(torch.int64) + zero_point


def quantize_scalar(x, scale, zero_point, qmin=INT8_MIN, qmax=INT8_MAX):
    return int(quantize(torch.tensor([x], dtype=torch.float32), scale, zero_point, qmin, qmax)[0])


def dequantize(q, scale, zero_point):
    scale = torch.as_tensor(scale, dtype=torch.float32)
    return (q.to(torch.int64) - zero_point).to(torch.float32) * scale


# ---- spec 2 and 3: multipliers and requantization -----------------------------------------------

def quantize_multiplier(m):
    """Real multiplier m > 0 -> (M, n) with m ~= M * 2**-n, 2**30 <= M < 2**31, 1 <= n <= 62."""
    m = float(m)
    if not (m > 0.0 and math.isfinite(m)):
        raise ValueError(f"requantization multiplier must be positive and finite, got {m}")
    f, e = math.frexp(m)
    big_m = round(f * 2**31)
    if big_m == 2**31:
        big_m, e = 2**30, e + 1
    n = 31 - e
    if n > MAX_SHIFT:
        return 0, 1
    if n < 1:
        raise ValueError(f"requantization multiplier {m} is too large (>= 2**30)")
    return big_m, n


def quantize_multipliers(ms):
    """Per-channel multipliers -> (int64 tensor M, int64 tensor n)."""
    pairs = [quantize_multiplier(m) for m in ms]
    return (torch.tensor([p[0] for p in pairs], dtype=torch.int64),
            torch.tensor([p[1] for p in pairs], dtype=torch.int64))


def shared_shift_multipliers(ms):
    """Multipliers with one shared shift (spec 3): the largest sets n, the others follow it."""
    big_m, n = quantize_multiplier(max(ms))
    if big_m == 0:
        return [0] * len(ms), n
    return [round(m * 2.0**n) for m in ms], n


def rounding_shift(v, n):
    """(v + 2**(n-1)) >> n on int64 tensors; `n` is an int or an int64 tensor."""
    n = torch.as_tensor(n, dtype=torch.int64)
    return (v + torch.bitwise_left_shift(torch.ones_like(n), n - 1)) >> n


def clamp(v, lo, hi):
    return torch.clamp(v, lo, hi)


def requantize(acc, multiplier, shift, zero_point, lo=INT8_MIN, hi=INT8_MAX):
    """int64 accumulator (exact int32 values) -> int64 tensor of int8 values."""
    return clamp(rounding_shift(acc * multiplier, shift) + zero_point, lo, hi)


def rescaled_sum(terms, shift, zero_point, lo=INT8_MIN, hi=INT8_MAX):
    """terms: list of (q, z, M); returns clamp(((sum (q - z) * M) + 2**(n-1)) >> n) + z_y)."""
    total = sum((q.to(torch.int64) - z) * m for q, z, m in terms)
    return clamp(rounding_shift(total, shift) + zero_point, lo, hi)


# ---- spec 4: convolution and linear accumulators ------------------------------------------------

def quantize_bias(bias, input_scale, weight_scale):
    """float bias -> int64 tensor clamped to int32, at scale s_x * s_w[c], computed in float64."""
    scale = float(input_scale) * weight_scale.to(torch.float64)
    q = torch.round(bias.detach().to(torch.float64) / scale)
    return torch.clamp(q, INT32_MIN, INT32_MAX).to(torch.int64)


def check_accumulator_range(bias_q, products_per_output, where):
    """Spec 4: |bias| + K * 255 * 127 must stay below 2**31 so int32 accumulation is exact."""
    worst = int(bias_q.abs().max()) if bias_q.numel() else 0
    worst += products_per_output * 255 * WEIGHT_MAX
    if worst > INT32_MAX:
        raise ValueError(f"{where}: the int32 accumulator could overflow ({products_per_output} "
                         f"products per output, |bias| up to {worst}); split the layer or lower its "
                         f"fan-in")


def conv2d_accumulate(x_q, x_zp, w_q, bias_q, stride, padding, dilation, groups):
    """Exact int32 convolution sums, in float64 (integers below 2**53 sum exactly in any order)."""
    x = (x_q.to(torch.int64) - x_zp).to(torch.float64)
    acc = torch.nn.functional.conv2d(x, w_q.to(torch.float64), None, stride, padding, dilation,
                                     groups)
    return acc.to(torch.int64) + bias_q.reshape(1, -1, 1, 1)


def linear_accumulate(x_q, x_zp, w_q, bias_q):
    x = (x_q.to(torch.int64) - x_zp).to(torch.float64)
    return (x @ w_q.to(torch.float64).t()).to(torch.int64) + bias_q


# ---- spec 5: activations as clamps --------------------------------------------------------------

def activation_bounds(activation, qparams):
    """(lo, hi) clamp bounds for None, 'relu' or 'relu6' on an output with ``qparams`` (scale,
    zero_point, qmin, qmax): the activation's range intersected with the output's integer range."""
    scale, zero_point, lo, hi = qparams
    if activation in ("relu", "relu6"):
        lo = max(lo, int(zero_point))
    if activation == "relu6":
        hi = min(hi, quantize_scalar(6.0, scale, zero_point))
    if activation not in (None, "relu", "relu6"):
        raise ValueError(f"unknown fused activation {activation!r}")
    return lo, hi


# ---- spec 6: pooling ----------------------------------------------------------------------------

def round_half_away_div(total, divisor):
    """sign(S) * floor((2|S| + d) / (2d)) on int64 tensors, d > 0."""
    magnitude = torch.div(2 * total.abs() + divisor, 2 * divisor, rounding_mode="floor")
    return torch.where(total < 0, -magnitude, magnitude)


def average(total, divisor, zero_point):
    return clamp(round_half_away_div(total, divisor) + zero_point, INT8_MIN, INT8_MAX)


# ---- spec 9 to 13: multiplication, tables, resize ---------------------------------------------

def lookup_table(function, input_qparams, output_qparams):
    """Spec 10: the 256-entry int8 table of ``function`` (evaluated by torch in float32)."""
    q = torch.arange(INT8_MIN, INT8_MAX + 1)
    x = dequantize(q, input_qparams.scale, input_qparams.zero_point)
    return quantize(function(x), *output_qparams).to(torch.int8)


def apply_lookup_table(q, table):
    return table[q.to(torch.int64) + 128]


BILINEAR_WEIGHT_BITS = 10


def resize_output_size(in_size, size, scale_factor):
    """torch.nn.functional.interpolate's output size along one axis."""
    if size is not None:
        return int(size)
    return int(math.floor(in_size * float(scale_factor)))


def nearest_indices(in_size, out_size, scale_factor):
    """Spec 12: the source index of each output position, by torch's own nearest rule."""
    grid = torch.arange(in_size, dtype=torch.float64).reshape(1, 1, in_size)
    kwargs = ({"scale_factor": float(scale_factor)} if scale_factor is not None
              else {"size": out_size})
    indices = torch.nn.functional.interpolate(grid, mode="nearest", **kwargs).reshape(-1)
    return indices.to(torch.int64)


def bilinear_taps(in_size, out_size, scale_factor, align_corners):
    """Spec 12: (i0, i1, Q10 weight of i1) for each output position along one axis."""
    out = torch.arange(out_size, dtype=torch.float64)
    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        source = out * scale
    else:
        scale = 1.0 / float(scale_factor) if scale_factor is not None else in_size / out_size
        source = torch.clamp((out + 0.5) * scale - 0.5, min=0.0)
    i0 = torch.clamp(torch.floor(source), max=in_size - 1)
    i1 = torch.clamp(i0 + 1, max=in_size - 1)
    weight = torch.round((source - i0) * 2**BILINEAR_WEIGHT_BITS)
    return i0.to(torch.int64), i1.to(torch.int64), weight.to(torch.int64)


def bilinear_accumulate(q, zero_point, taps_h, taps_w):
    """Spec 12: sum over the four taps of wy * wx * (q - z), exact in int64."""
    one = 2**BILINEAR_WEIGHT_BITS
    centered = q.to(torch.int64) - zero_point
    (h0, h1, wh), (w0, w1, ww) = taps_h, taps_w
    rows = [(h0, one - wh), (h1, wh)]
    cols = [(w0, one - ww), (w1, ww)]
    acc = 0
    for row_index, row_weight in rows:
        picked_rows = centered[:, :, row_index, :]
        for col_index, col_weight in cols:
            acc = acc + picked_rows[:, :, :, col_index] * row_weight.reshape(-1, 1) * col_weight
    return acc
