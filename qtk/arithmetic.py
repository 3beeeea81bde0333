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


# ---- spec 1: quantization parameters, quantize / dequantize --------------------------------------

MIN_SCALE = 2.0**-23  # float32's epsilon: the smallest scale a range of nonzero width gets
ZERO_RANGE_SCALE = 1.0  # the scale of a range of zero width (every observed value was 0)


class NonFiniteRangeError(ValueError):
    """A quantizer's range or scale is NaN or infinite: the values it saw held NaN or inf."""


def qparams_from_range(min_val, max_val, qmin, qmax, symmetric):
    """Spec 1 ranges: (min, max) tensors -> (float32 scale, int64 zero point), the range first
    widened to include 0. Symmetric ranges put zero at 0 and use ``max(|min|, |max|) / ((qmax -
    qmin) / 2)`` (``amax / 127`` for narrow-range int8 weights); asymmetric ones ``(max - min) /
    (qmax - qmin)``. A zero width gets ``ZERO_RANGE_SCALE``, any other width at least
    ``MIN_SCALE``. NaN stays NaN, for convert to report."""
    min_val = torch.clamp(min_val.detach().to(torch.float32), max=0.0)
    max_val = torch.clamp(max_val.detach().to(torch.float32), min=0.0)
    if symmetric:
        scale = torch.maximum(-min_val, max_val) / ((qmax - qmin) / 2.0)
    else:
        scale = (max_val - min_val) / float(qmax - qmin)
    scale = torch.where(scale == 0, ZERO_RANGE_SCALE, torch.clamp(scale, min=MIN_SCALE))
    if symmetric:
        zero_point = torch.zeros_like(scale, dtype=torch.int64)
    else:
        zero_point = torch.clamp(qmin - torch.round(min_val / scale).to(torch.int64), qmin, qmax)
    return scale, zero_point


def shared_zero_point_qparams(min_val, max_val, qmin, qmax):
    """Spec 25's per-channel activation qparams: a scale per channel and one zero point for all
    (float32 scales, int64 zero points, one per channel and all equal). Each channel's range is
    widened to include 0 and gets, for a zero point ``z``, the smallest scale that holds it,
    ``s_c(z) = max(max_c / (qmax - z), -min_c / (z - qmin))``. The zero point is the ``z`` in
    ``[qmin, qmax]`` with the least rounding noise over the channels, ``sum_c s_c(z)^2`` (the
    first such ``z``); each scale is then floored as spec 1's."""
    min_val = torch.clamp(min_val.detach().to(torch.float64).reshape(1, -1), max=0.0)
    max_val = torch.clamp(max_val.detach().to(torch.float64).reshape(1, -1), min=0.0)
    z = torch.arange(qmin, qmax + 1, dtype=torch.float64).reshape(-1, 1)
    above = torch.where(max_val > 0, max_val / (qmax - z).clamp(min=1), 0.0)
    below = torch.where(min_val < 0, -min_val / (z - qmin).clamp(min=1), 0.0)
    scales = torch.maximum(above, below)
    # a z at the end of the range cannot hold values on that side
    unusable = ((max_val > 0) & (z >= qmax)) | ((min_val < 0) & (z <= qmin))
    noise = torch.where(unusable, math.inf, scales.square()).sum(1)
    best = int(torch.argmin(noise))
    scale = scales[best].to(torch.float32)
    scale = torch.where(scale == 0, ZERO_RANGE_SCALE, torch.clamp(scale, min=MIN_SCALE))
    return scale, torch.full(scale.shape, qmin + best, dtype=torch.int64)


def check_finite_scale(scale, what):
    """Convert's guard: ``scale`` (a tensor) must be finite; ``what`` names the quantizer."""
    if not bool(torch.isfinite(scale).all()):
        raise NonFiniteRangeError(
            f"the {what} scale is {scale.reshape(-1).tolist()[:4]}, not finite: the values its "
            f"quantizer observed or learned from held NaN or inf")


def inverse_scale(scale):
    """Spec 1's ``f32(1 / s)``: quantize multiplies by it (rounding ``x / s`` could differ)."""
    return torch.ones((), dtype=torch.float32) / torch.as_tensor(scale, dtype=torch.float32)


def quantize(x, scale, zero_point, qmin=INT8_MIN, qmax=INT8_MAX, axis=None):
    """Float tensor -> int64 tensor of quantized values; `scale`/`zero_point` are per tensor, or
    per channel along `axis`. This is torch.fake_quantize_per_*_affine's rounding rule."""
    scale = torch.as_tensor(scale, dtype=torch.float32)
    zero_point = torch.as_tensor(zero_point, dtype=torch.int64)
    if axis is not None:
        shape = [1] * x.dim()
        shape[axis] = -1
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    r = torch.round(x.to(torch.float32) * inverse_scale(scale))
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


def rescale_multipliers(input_scales, output_scale, shared_shift):
    """Spec 3: the multipliers ``s_i / s_y`` of a rescaled sum, one shared shift for an add
    (returns ``([M_i], n)``), or each input on its own for a concat (returns ``([M_i], [n_i])``)."""
    ms = [float(s) / float(output_scale) for s in input_scales]
    if shared_shift:
        return shared_shift_multipliers(ms)
    pairs = [quantize_multiplier(m) for m in ms]
    return [p[0] for p in pairs], [p[1] for p in pairs]


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

ZERO_CHANNEL_BIAS = 2**16


def _zero_channels(weight_q):
    return (weight_q.reshape(weight_q.shape[0], -1) == 0).all(1)


def bias_scales(weight_q, input_scale, weight_scale, output_scale):
    """Spec 4: the scale of each output channel's int32 bias, float64: ``s_x * s_w[c]``, or
    ``s_y`` for a channel whose int8 weights are all zero. Scales are floats or float64 tensors
    per output channel (spec 25)."""
    products = torch.as_tensor(input_scale, dtype=torch.float64) * weight_scale.to(torch.float64)
    return torch.where(_zero_channels(weight_q),
                       torch.as_tensor(output_scale, dtype=torch.float64), products)


def weight_layer_requantization(bias, weight_q, input_scale, weight_scale, output_scale, where,
                                input_bound=255):
    """Spec 4: a conv or linear layer's int32 bias and (M, n) per output channel, as int64 tensors.

    ``m[c] = s_x * s_w[c] / s_y`` and ``bias[c]`` at scale ``s_x * s_w[c]``, in float64 from the
    float32 scales. A channel whose int8 weights are all zero accumulates its bias alone: it takes
    ``m = 1`` (M = 2**30, n = 30) and its bias at the output scale ``s_y``, so its output is its
    bias rounded once, whatever scale the (empty) weight range was given.
    """
    if not bool(torch.isfinite(bias).all()):
        raise NonFiniteRangeError(f"the bias holds NaN or inf (channels "
                                  f"{torch.nonzero(~torch.isfinite(bias)).reshape(-1).tolist()[:4]})")
    zero_channel = _zero_channels(weight_q)
    products = torch.as_tensor(input_scale, dtype=torch.float64) * weight_scale.to(torch.float64)
    output_scale = torch.as_tensor(output_scale, dtype=torch.float64)
    bias_q = torch.round(bias.detach().to(torch.float64) /
                         bias_scales(weight_q, input_scale, weight_scale, output_scale))
    bias_q = torch.clamp(bias_q, INT32_MIN, INT32_MAX).to(torch.int64)
    # past +-2^16 a zero channel's output saturates alike; kernels keep their int32 headroom
    bias_q = torch.where(zero_channel, bias_q.clamp(-ZERO_CHANNEL_BIAS, ZERO_CHANNEL_BIAS), bias_q)
    # Spec 4's bound: |bias| + K * 255 * 127 < 2**31, where K products can be nonzero.
    products_per_output = weight_q[0].numel()
    worst = bias_q.abs() + torch.where(zero_channel, 0,
                                       products_per_output * input_bound * WEIGHT_MAX)
    if bias_q.numel() and int(worst.max()) > INT32_MAX:
        c = int(worst.argmax())
        raise ValueError(f"{where}: the int32 accumulator of output channel {c} could overflow: "
                         f"{products_per_output} products of up to {input_bound} * 127 and a bias of "
                         f"{float(bias[c]):g}, which is {int(bias_q[c])} at its scale s_x * s_w = "
                         f"{float(products[c]):.3g}; the layer's fan-in or that bias is too large "
                         f"for int8 inputs at that scale")
    multiplier, shift = quantize_multipliers(
        layer_multipliers(weight_q, input_scale, weight_scale, output_scale).tolist())
    return bias_q, multiplier, shift


def layer_multipliers(weight_q, input_scale, weight_scale, output_scale):
    """Spec 4's real multiplier per output channel, float64: ``s_x * s_w[c] / s_y``, or 1 for a
    channel whose int8 weights are all zero (its bias is at the output scale)."""
    products = torch.as_tensor(input_scale, dtype=torch.float64) * weight_scale.to(torch.float64)
    return torch.where(_zero_channels(weight_q), 1.0,
                       products / torch.as_tensor(output_scale, dtype=torch.float64))


def fused_prelu_multipliers(slopes, weight_q, input_scale, weight_scale, output_scale, where):
    """Spec 22, a PReLU fused into the conv before it: per output channel c, signed (M, n) of
    ``a_c m[c]`` for the sums below zero (``m`` spec 4's, :func:`layer_multipliers`); a slope of 0
    gives M = 0, n = 1. ``slopes``: one, or one per output channel."""
    ratios = layer_multipliers(weight_q, input_scale, weight_scale, output_scale)
    a = slopes.detach().to(torch.float64).reshape(-1).expand(ratios.numel())
    return signed_multipliers(a * ratios, where)


def requantize_by_sign(acc, positive, negative, zero_point, lo=INT8_MIN, hi=INT8_MAX):
    """Spec 22 fused: ``acc`` at or above zero by ``positive`` (M, n), below by ``negative``."""
    above = requantize(acc, *positive, zero_point, lo, hi)
    return torch.where(acc >= 0, above, requantize(acc, *negative, zero_point, lo, hi))


def conv2d_accumulate(x_q, x_zp, w_q, bias_q, stride, padding, dilation, groups):
    """Exact int32 convolution sums, in float64 (integers below 2**53 sum exactly in any order)."""
    x = (x_q.to(torch.int64) - x_zp).to(torch.float64)
    acc = torch.nn.functional.conv2d(x, w_q.to(torch.float64), None, stride, padding, dilation,
                                     groups)
    return acc.to(torch.int64) + bias_q.reshape(1, -1, 1, 1)


def conv_transpose2d_accumulate(x_q, x_zp, w_q, bias_q, stride, padding, output_padding,
                                dilation, groups):
    """Spec 20's exact int32 sums of a transposed convolution, torch's weight layout
    ``[C, O/groups, kh, kw]``, in float64 (exact as for conv2d)."""
    x = (x_q.to(torch.int64) - x_zp).to(torch.float64)
    acc = torch.nn.functional.conv_transpose2d(x, w_q.to(torch.float64), None, stride, padding,
                                               output_padding, groups, dilation)
    return acc.to(torch.int64) + bias_q.reshape(1, -1, 1, 1)


def linear_accumulate(x_q, x_zp, w_q, bias_q):
    x = (x_q.to(torch.int64) - x_zp).to(torch.float64)
    return (x @ w_q.to(torch.float64).t()).to(torch.int64) + bias_q


# ---- spec 5: activations as clamps --------------------------------------------------------------

def activation_bounds(activation, qparams):
    """(lo, hi) clamp bounds for None, 'relu', 'relu6' or 'prelu' on an output with ``qparams``
    (scale, zero_point, qmin, qmax): the activation's range intersected with the output's integer
    range."""
    scale, zero_point, lo, hi = qparams
    if activation == "relu6" and isinstance(scale, tuple):
        raise ValueError("a ReLU6 on an output quantized per channel would clamp each channel at "
                         "its own 6 (spec 25); quantize that output per tensor")
    if activation in ("relu", "relu6"):
        lo = max(lo, int(zero_point))
    if activation == "relu6":
        hi = min(hi, quantize_scalar(6.0, scale, zero_point))
    if activation not in (None, "relu", "relu6", "prelu"):  # PReLU: no clamp (spec 22)
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

def mul_multiplier(scale_a, scale_b, output_scale):
    """Spec 9: (M, n) of ``s_a * s_b / s_y``."""
    return quantize_multiplier(float(scale_a) * float(scale_b) / float(output_scale))


def lookup_table(function, input_qparams, output_qparams, channels=1, per_channel_function=False):
    """Spec 10: the 256-entry int8 table of ``function`` (evaluated by torch in float32), or with
    ``channels`` > 1 a table per channel, [channels, 256], from each channel's (s, z) (spec 25);
    with ``per_channel_function`` each channel's own function, ``function`` taking every channel's
    256 values at once as [1, channels, 256] (dim 1 the channels, as an activation's)."""
    q = torch.arange(INT8_MIN, INT8_MAX + 1)

    def inputs(c):
        x_qparams = input_qparams.channel(c)
        return dequantize(q, x_qparams.scale, x_qparams.zero_point)

    def table(y, c):
        return quantize(y, *output_qparams.channel(c)).to(torch.int8)

    if per_channel_function:
        y = function(torch.stack([inputs(c) for c in range(channels)])[None])[0]
        return torch.stack([table(y[c], c) for c in range(channels)])
    if channels == 1:
        return table(function(inputs(0)), 0)
    return torch.stack([table(function(inputs(c)), c) for c in range(channels)])


def apply_lookup_table(q, table):
    """y = table[q + 128]; a table per channel (spec 25) looks up each channel along dim 1 in its
    own row."""
    index = q.to(torch.int64) + 128
    if table.dim() == 1:
        return table[index]
    channel = torch.arange(table.shape[0]).reshape([1, -1] + [1] * (q.dim() - 2))
    return table[channel, index]


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
    i0, i1, fraction = bilinear_sources(in_size, out_size, scale_factor, align_corners)
    return i0, i1, torch.round(fraction * 2**BILINEAR_WEIGHT_BITS).to(torch.int64)


def bilinear_sources(in_size, out_size, scale_factor, align_corners):
    """PyTorch's bilinear source positions along one axis: (i0, i1, float64 weight of i1)."""
    out = torch.arange(out_size, dtype=torch.float64)
    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        source = out * scale
    else:
        scale = 1.0 / float(scale_factor) if scale_factor is not None else in_size / out_size
        source = torch.clamp((out + 0.5) * scale - 0.5, min=0.0)
    i0 = torch.clamp(torch.floor(source), max=in_size - 1)
    i1 = torch.clamp(i0 + 1, max=in_size - 1)
    return i0.to(torch.int64), i1.to(torch.int64), source - i0


def bilinear_multiplier(input_scale, output_scale):
    """Spec 12: (M, n) of ``s_x / (s_y * 2**20)``, the Q10 x Q10 weights' product undone."""
    return quantize_multiplier(float(input_scale) / (float(output_scale)
                                                     * 2**(2 * BILINEAR_WEIGHT_BITS)))


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


# ---- spec 16: bit widths below 8 ----------------------------------------------------------------

def storage_bits(qmin, qmax):
    """The packed width that holds signed integers in [qmin, qmax]: 2, 4 or 8 bits."""
    return next(bits for bits in (2, 4, 8) if -(2 ** (bits - 1)) <= qmin and qmax < 2 ** (bits - 1))


# ---- spec 17: matmul of two activations ---------------------------------------------------------

# The largest K whose K products of up to 255 * 255 sum in int32: K * 255 * 255 < 2**31.
MATMUL_MAX_DEPTH = INT32_MAX // (255 * 255)  # 33025


def check_matmul_depth(depth, where):
    """Spec 17's bound: refuses a matmul of ``depth`` (K) products per output beyond
    ``MATMUL_MAX_DEPTH``; ``where`` names the module."""
    if int(depth) > MATMUL_MAX_DEPTH:
        raise ValueError(f"{where}: the int32 accumulator of this matmul could overflow: K = "
                         f"{int(depth)} products of up to 255 * 255, above the {MATMUL_MAX_DEPTH} "
                         f"that fit (docs/quantization_spec.md section 17); keep it float with a "
                         f"qconfig of None for this module, or split K")


def matmul_multiplier(scale_a, scale_b, output_scale):
    """Spec 17: (M, n) of ``s_a * s_b / s_y``, the product of scales of spec 9's multiply."""
    return mul_multiplier(scale_a, scale_b, output_scale)


def matmul_accumulate(a_q, a_zp, b_q, b_zp, transpose_b=False):
    """Spec 17: sum_k (a[..., i, k] - z_a) * (b[..., k, j] - z_b) with torch.matmul's
    broadcasting of the batch dims (``b`` read as ``[..., N, K]`` with ``transpose_b``), exact:
    in float64, every partial sum an integer below 2**31."""
    a = (a_q.to(torch.int64) - a_zp).to(torch.float64)
    b = (b_q.to(torch.int64) - b_zp).to(torch.float64)
    return torch.matmul(a, b.transpose(-2, -1) if transpose_b else b).to(torch.int64)


# ---- spec 18: softmax by a table of exponentials -----------------------------------------------

SOFTMAX_TABLE_BITS = 20
SOFTMAX_MAX_ROW = 2**20
SOFTMAX_MIN_OUTPUT_SCALE = 2.0**-14


def softmax_table(input_scale):
    """Spec 18: T[d] = round(2^20 exp(-s d)) for d = 0 .. 255, int64."""
    d = torch.arange(256, dtype=torch.float64)
    return torch.round(torch.exp(-float(input_scale) * d) * 2**SOFTMAX_TABLE_BITS).to(torch.int64)


def softmax_output_multiplier(output_scale, where):
    """Spec 18: A = round(2^16 / s_y), refused below ``SOFTMAX_MIN_OUTPUT_SCALE``."""
    if float(output_scale) < SOFTMAX_MIN_OUTPUT_SCALE:
        raise ValueError(f"{where}: softmax output scale {float(output_scale):.3g} is below "
                         f"2^-14 (docs/quantization_spec.md section 18)")
    return int(round(2**16 / float(output_scale)))


def integer_softmax(q, axis, table, multiplier, zero_point, lo=INT8_MIN, hi=INT8_MAX):
    """Spec 18 along ``axis`` of an int8 tensor: table lookups, an int64 sum and one division."""
    q = q.to(torch.int64)
    terms = table[q.amax(axis, keepdim=True) - q]
    total = terms.sum(axis, keepdim=True)
    y = torch.div(2 * terms * multiplier + total * 2**16, total * 2**17, rounding_mode="floor")
    return torch.clamp(zero_point + y, lo, hi)


# ---- spec 19: LayerNorm and GroupNorm in integers ----------------------------------------------

NORM_FRACTION_BITS = 16
NORM_MAX_ROW = 2**14


def _bit_length(v):
    """Exact bit lengths of a non-negative int64 tensor (float64 only guesses)."""
    _, exponent = torch.frexp(v.to(torch.float64))
    length = exponent.to(torch.int64)
    too_long = (length > 0) & ((torch.ones_like(v) << (length - 1).clamp(min=0)) > v)
    return torch.where(too_long, length - 1, length)


def isqrt(v):
    """Exact floor square roots of a non-negative int64 tensor below 2^62."""
    r = torch.floor(torch.sqrt(v.to(torch.float64))).to(torch.int64)
    while True:  # the float guess is at most a step or two away
        high = r * r > v
        low = (r + 1) * (r + 1) <= v
        if not bool(high.any() or low.any()):
            return r
        r = r - high.to(torch.int64) + low.to(torch.int64)


def norm_eps_term(count, eps, input_scale, where):
    """Spec 19: E = max(1, round(C^2 eps / s^2)), refused beyond 2^61."""
    e = max(1, round(count * count * float(eps) / float(input_scale) ** 2))
    if e > 2**61:
        raise ValueError(f"{where}: eps {eps:g} at input scale {float(input_scale):.3g} is too "
                         f"large for the integer normalization (docs/quantization_spec.md "
                         f"section 19)")
    return e


def _q16_over_root(n, v):
    """Spec 19: round_half_away(2^16 n / sqrt(V)) by k and r = isqrt(V 4^k), 1 <= V < 2^62."""
    k = torch.div(62 - _bit_length(v), 2, rounding_mode="floor")
    r = isqrt(v << (2 * k))
    t = torch.div(2 * n.abs() * (torch.ones_like(k) << (NORM_FRACTION_BITS + k)) + r, 2 * r,
                  rounding_mode="floor")
    return torch.sign(n) * t


def normalized_q16(q, zero_point, dims, eps_term):
    """Spec 19: t = the values normalized over ``dims``, in Q16 (int64, q's shape)."""
    x = q.to(torch.int64) - zero_point
    count = 1
    for d in dims:
        count *= x.shape[d]
    sx = x.sum(dims, keepdim=True)
    v = count * (x * x).sum(dims, keepdim=True) - sx * sx + eps_term
    return _q16_over_root(count * x - sx, v)


def l2_eps_term(eps, input_scale, where):
    """Spec 19.1: E = max(1, ceil(eps^2 / s^2)) in float64, refused beyond 2^61."""
    ratio = (float(eps) / float(input_scale)) ** 2
    if not ratio <= 2**61:
        raise ValueError(f"{where}: eps {eps:g} at input scale {float(input_scale):.3g} is too "
                         f"large for the integer L2 normalization (docs/quantization_spec.md "
                         f"section 19.1)")
    return max(1, math.ceil(ratio))


def l2_normalized_q16(q, zero_point, dims, eps_term):
    """Spec 19.1: t = x / max(sqrt(S), sqrt(E)) over ``dims`` in Q16, x = q - z, S = sum x^2."""
    x = q.to(torch.int64) - zero_point
    return _q16_over_root(x, torch.clamp((x * x).sum(dims, keepdim=True), min=eps_term))


def norm_affine_requantization(gamma, beta, output_scale, count, where):
    """Spec 19's affine part as spec 4's layer on Q16 input: (gamma_q, bias, M, n) per channel."""
    gamma = gamma.detach().to(torch.float64).reshape(-1)
    gamma_scale = (gamma.abs() / WEIGHT_MAX).to(torch.float32)
    live = gamma != 0
    gamma_q = torch.where(live, torch.sign(gamma) * WEIGHT_MAX, 0).to(torch.int64)
    bias_q, multiplier, shift = weight_layer_requantization(
        beta.detach().reshape(-1), gamma_q.reshape(-1, 1), 2.0**-NORM_FRACTION_BITS,
        torch.where(live, gamma_scale, 1.0), output_scale, where,
        input_bound=(math.isqrt(count) + 1) << NORM_FRACTION_BITS)
    return gamma_q, bias_q, multiplier, shift


# ---- spec 21: arithmetic with a constant ---------------------------------------------------------

CONSTANT_INPUT_SHIFT = 16  # k at most: x's term (q - z) * 2^k of add_constant
CONSTANT_MAX_BIAS = 2**30  # |B| at most: with |q - z| * 2^16 < 2^24 the sum stays below 2^31


def _finite_constant(constant, where):
    c = constant.detach().to(torch.float32).to(torch.float64)
    if not bool(torch.isfinite(c).all()):
        raise ValueError(f"{where}: the constant holds NaN or inf, which has no int8 form")
    return c


def quantize_multiplier_tensor(m, where):
    """Spec 2 elementwise on a float64 tensor of multipliers >= 0: (M, n) int64 tensors of its
    shape; a multiplier of 0 (or below the resolution) gives M = 0, n = 1."""
    f, e = torch.frexp(m)
    big_m = torch.round(f * 2.0**31).to(torch.int64)  # f * 2^31 is exact; round half even
    e = torch.where(big_m == 2**31, e + 1, e).to(torch.int64)
    big_m = torch.where(big_m == 2**31, 2**30, big_m)
    n = 31 - e
    zero = (m == 0) | (n > MAX_SHIFT)
    if bool(((n < 1) & ~zero).any()):
        raise ValueError(f"{where}: requantization multiplier {float(m.max()):g} is too large "
                         f"(>= 2**30)")
    return torch.where(zero, 0, big_m), torch.where(zero, 1, n)


def signed_multipliers(m, where):
    """Spec 2 for signed real multipliers (a float64 tensor): (M, n) of ``|m|`` with M carrying
    m's sign (spec 21's constants, spec 22's slopes); m = 0 gives M = 0, n = 1."""
    if not bool(torch.isfinite(m).all()):
        raise ValueError(f"{where}: a multiplier is NaN or infinite ({m.flatten()[:4].tolist()}"
                         f"...), which has no int8 form")
    big_m, n = quantize_multiplier_tensor(m.abs(), where)
    return torch.where(m < 0, -big_m, big_m), n


def constant_mul_requantization(constant, input_scale, output_scale, where, divide=False):
    """Spec 21: ``x * c`` (or ``x / c``, ``divide``) as signed (M, n) per element of ``c``:
    ``m = s_x |c| / s_y`` (``s_x / (|c| s_y)``), M carrying c's sign; c = 0 gives M = 0."""
    c = _finite_constant(constant, where)
    if divide:
        if bool((c == 0).any()):
            raise ValueError(f"{where}: division by a constant holding 0 has no int8 form")
        c = 1.0 / c
    return signed_multipliers(float(input_scale) * c / float(output_scale), where)


def constant_add_requantization(constant, input_scale, output_scale, where):
    """Spec 21: ``x + c`` as (B, k, M, n): ``B = round(c 2^k / s_x)`` per element (int64 tensor),
    ``k`` the largest in [0, 16] with every ``|B| <= 2^30``, and (M, n) of ``s_x / (s_y 2^k)``."""
    c = _finite_constant(constant, where)
    s_x = float(input_scale)
    steps = float(c.abs().max()) / s_x if c.numel() else 0.0
    k = CONSTANT_INPUT_SHIFT
    while k > 0 and round(steps * 2.0**k) > CONSTANT_MAX_BIAS:
        k -= 1
    if round(steps) > CONSTANT_MAX_BIAS:
        raise ValueError(f"{where}: the constant {steps * s_x:g} is {steps:.3g} input steps "
                         f"(s_x = {s_x:g}), beyond the 2^30 an int32 sum holds")
    bias = torch.round(c * 2.0**k / s_x).to(torch.int64)
    big_m, n = quantize_multiplier_tensor(torch.tensor(s_x / (float(output_scale) * 2.0**k),
                                                       dtype=torch.float64), where)
    return bias, k, int(big_m), int(n)


def mul_constant(q, zero_point, multiplier, shift, output_zero_point, lo=INT8_MIN, hi=INT8_MAX):
    """Spec 21: ``requantize(q - z, M, n, z_y)`` with a signed M (broadcast like torch)."""
    return requantize(q.to(torch.int64) - zero_point, multiplier, shift, output_zero_point, lo, hi)


def add_constant(q, zero_point, negate, input_shift, bias, multiplier, shift, output_zero_point,
                 lo=INT8_MIN, hi=INT8_MAX):
    """Spec 21: ``requantize(+-(q - z) * 2^k + B, M, n, z_y)`` (B broadcast like torch)."""
    d = q.to(torch.int64) - zero_point
    acc = (-d if negate else d) * (1 << input_shift) + bias
    return requantize(acc, multiplier, shift, output_zero_point, lo, hi)


# ---- spec 22: PReLU ----------------------------------------------------------------------------

def prelu_multipliers(slopes, input_scale, output_scale):
    """Spec 22: the positive side's (M, n) of ``s_x / s_y`` and, per slope ``a_c``, (M_c, n_c) of
    ``|a_c| s_x / s_y`` with M_c carrying a_c's sign (M_c = 0, n_c = 1 for a_c = 0)."""
    ratio = float(input_scale) / float(output_scale)
    a = slopes.detach().to(torch.float64).reshape(-1)
    return quantize_multiplier(ratio), signed_multipliers(a * ratio, "slope")


def prelu(q, zero_point, positive, multipliers, shifts, output_zero_point, lo=INT8_MIN,
          hi=INT8_MAX):
    """Spec 22 on an int8 tensor: ``multipliers`` and ``shifts`` broadcast against q (one slope,
    or one per channel of dim 1)."""
    return requantize_by_sign(q.to(torch.int64) - zero_point, positive, (multipliers, shifts),
                              output_zero_point, lo, hi)


# ---- spec 23: image input (integer resize of uint8 pixels) --------------------------------------
IMAGE_WEIGHT_ONE = 2048  # bilinear weights in units of 1/2048
IMAGE_INTERPOLATIONS = ("nearest", "bilinear")  # the file's codes 0 and 1


def image_resize_taps(n_in, n_out, interpolation):
    """Spec 23: for each output index o of n_out, the source indices (i0, i1) and the weight w of
    i1 in units of 1/2048 (int64 tensors). The source coordinate is ((2 o + 1) n_in - n_out) /
    (2 n_out); nearest reads i0 = i1 = min(((2 o + 1) n_in) // (2 n_out), n_in - 1) with w = 0."""
    o = torch.arange(n_out, dtype=torch.int64)
    if interpolation == "nearest":
        i = torch.clamp((2 * o + 1) * n_in // (2 * n_out), max=n_in - 1)
        return i, i, torch.zeros_like(i)
    num = (2 * o + 1) * n_in - n_out
    den = 2 * n_out
    whole = torch.div(num, den, rounding_mode="floor")
    before_first = num < 0  # the coordinate is below 0: the first pixel alone
    i0 = torch.where(before_first, 0, torch.clamp(whole, 0, n_in - 1))
    i1 = torch.where(before_first, 0, torch.clamp(i0 + 1, max=n_in - 1))
    w = (2 * IMAGE_WEIGHT_ONE * (num - whole * den) + den) // (2 * den)
    return i0, i1, torch.where(before_first, 0, w)


def image_resize(p, size, interpolation):
    """Spec 23: integer pixels [N, C, H, W] (int64, 0..255) resized to ``size`` (h, w); bilinear
    weighs the four taps with products of 1/2048 weights and rounds once: (acc + 2^21) >> 22."""
    rows = [t.to(p.device) for t in image_resize_taps(p.shape[2], size[0], interpolation)]
    cols = [t.to(p.device) for t in image_resize_taps(p.shape[3], size[1], interpolation)]
    if interpolation == "nearest":
        return p[:, :, rows[0]][:, :, :, cols[0]]
    one = IMAGE_WEIGHT_ONE
    wy, wx = rows[2].reshape(-1, 1), cols[2].reshape(1, -1)
    top, bottom = p[:, :, rows[0]], p[:, :, rows[1]]
    acc = ((one - wy) * (one - wx) * top[:, :, :, cols[0]] + (one - wy) * wx * top[:, :, :, cols[1]]
           + wy * (one - wx) * bottom[:, :, :, cols[0]] + wy * wx * bottom[:, :, :, cols[1]])
    return (acc + (1 << 21)) >> 22


# ---- spec 24: binary convolution ---------------------------------------------------------------

def binary_thresholds(thresholds, scale, zero_point):
    """RSign's learned real thresholds a[c] as the integers t[c] a binary layer compares q with
    (spec 24): the least q with s (q - z) >= a[c], ceil(z + a[c] / s) in float64, clamped to
    [-128, 128] (always +1, always -1), as int64."""
    return torch.ceil(zero_point + thresholds.double() / scale).clamp(-128, 128).to(torch.int64)


def binary_sign(q, zero_point=0):
    """The sign a binary layer reads: +1 where q >= z (the real value's sign, sign(0) = +1), else
    -1, as int64; with z = 0 it is also a float weight's 1-bit quantization. ``zero_point`` may
    be a tensor of thresholds per channel that broadcasts against q (RSign, spec 24)."""
    return torch.where(q >= zero_point, 1, -1).to(torch.int64)
