// The quantized arithmetic of docs/quantization_spec.md, written once for every C++ kernel.
//
// Every reference and optimized kernel computes its results through these functions (or through
// SIMD code tested byte-exact against them). The Python twin is qtk/arithmetic.py; the test
// tests/test_arithmetic.py holds the two against each other. Multipliers and shifts are derived in
// Python at convert time and stored in the model: the runtime never derives them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

// The functions a CUDA kernel's epilogue calls are host-device functions under nvcc
// (kernels/cuda/): the GPU computes the same integer operations, which the CPU tests execute.
#ifdef __CUDACC__
#define QTK_HOST_DEVICE __host__ __device__
#else
#define QTK_HOST_DEVICE
#endif

namespace qtk {
namespace arith {

constexpr int32_t kInt8Min = -128;
constexpr int32_t kInt8Max = 127;

QTK_HOST_DEVICE inline int32_t clamp(int64_t v, int32_t lo, int32_t hi) {
    return static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(v, lo), hi));
}

// Spec 2: one rounding step, half toward +infinity, exact in int64 for |acc| < 2^31, M < 2^31,
// 1 <= shift <= 62.
QTK_HOST_DEVICE inline int64_t rounding_constant(int32_t shift) {
    return int64_t{1} << (shift - 1);
}

QTK_HOST_DEVICE inline int64_t rounding_shift(int64_t product_sum, int32_t shift) {
    return (product_sum + rounding_constant(shift)) >> shift;
}

QTK_HOST_DEVICE inline int8_t requantize(int32_t acc, int32_t multiplier, int32_t shift,
                                         int32_t zero_point, int32_t lo, int32_t hi) {
    const int64_t scaled = rounding_shift(int64_t{acc} * multiplier, shift);
    return static_cast<int8_t>(clamp(scaled + zero_point, lo, hi));
}

// Spec 22: the two sides of a PReLU, fused into a conv or alone: acc at or above zero by (M, n),
// below by the slope's (M_neg, n_neg), M_neg signed (|M_neg| < 2^31 keeps acc M_neg exact).
QTK_HOST_DEVICE inline int8_t requantize_by_sign(int32_t acc, int32_t multiplier, int32_t shift,
                                                 int32_t negative_multiplier,
                                                 int32_t negative_shift, int32_t zero_point,
                                                 int32_t lo, int32_t hi) {
    return acc >= 0 ? requantize(acc, multiplier, shift, zero_point, lo, hi)
                    : requantize(acc, negative_multiplier, negative_shift, zero_point, lo, hi);
}

// Spec 3: the rescaled sum of (q_i - z_i) * M_i with one shared shift; the caller accumulates the
// int64 sum (each term below 2^39) and this finishes it.
QTK_HOST_DEVICE inline int8_t finish_rescaled_sum(int64_t sum, int32_t shift,
                                                  int32_t zero_point, int32_t lo, int32_t hi) {
    return static_cast<int8_t>(clamp(rounding_shift(sum, shift) + zero_point, lo, hi));
}

QTK_HOST_DEVICE inline int8_t rescale_add(int8_t a, int32_t za, int32_t ma, int8_t b, int32_t zb,
                                          int32_t mb, int32_t shift, int32_t zero_point,
                                          int32_t lo, int32_t hi) {
    const int64_t sum = int64_t{a - za} * ma + int64_t{b - zb} * mb;
    return finish_rescaled_sum(sum, shift, zero_point, lo, hi);
}

QTK_HOST_DEVICE inline int8_t rescale(int8_t q, int32_t zq, int32_t multiplier, int32_t shift,
                                      int32_t zero_point) {
    return finish_rescaled_sum(int64_t{q - zq} * multiplier, shift, zero_point, kInt8Min, kInt8Max);
}

// Spec 1: the rule of torch.fake_quantize_per_tensor_affine; `inv_scale` is f32(1.0f / scale).
// Callers compute inv_scale once; kernels must be built with -ffp-contract=off.
inline float inverse_scale(float scale) { return 1.0f / scale; }

// The clamp of the rounded value, in float, relative to the zero point.
struct QuantizeBounds {
    float lo, hi;
};

inline QuantizeBounds quantize_bounds(int32_t zero_point, int32_t qmin = kInt8Min,
                                      int32_t qmax = kInt8Max) {
    return {static_cast<float>(qmin - zero_point), static_cast<float>(qmax - zero_point)};
}

inline int8_t quantize(float x, float inv_scale, int32_t zero_point, int32_t qmin = kInt8Min,
                       int32_t qmax = kInt8Max) {
    float r = std::nearbyint(x * inv_scale);
    if (std::isnan(r)) r = 0.0f;
    const QuantizeBounds bounds = quantize_bounds(zero_point, qmin, qmax);
    r = std::min(std::max(r, bounds.lo), bounds.hi);
    return static_cast<int8_t>(static_cast<int32_t>(r) + zero_point);
}

inline float dequantize(int8_t q, float scale, int32_t zero_point) {
    return static_cast<float>(int32_t{q} - zero_point) * scale;
}

// Spec 6: sign(S) * floor((2|S| + d) / (2d)) for d > 0.
// In int64: with a divisor_override below the window's size the quotient may pass int32.
QTK_HOST_DEVICE inline int64_t round_half_away_div(int64_t sum, int64_t divisor) {
    const int64_t magnitude = (2 * (sum < 0 ? -sum : sum) + divisor) / (2 * divisor);
    return sum < 0 ? -magnitude : magnitude;
}

QTK_HOST_DEVICE inline int8_t average(int64_t sum_minus_zp, int64_t divisor,
                                      int32_t zero_point) {
    return static_cast<int8_t>(
        clamp(round_half_away_div(sum_minus_zp, divisor) + zero_point, kInt8Min, kInt8Max));
}

// Spec 24: the sign a binary layer reads from an int8 activation, +1 where q >= z (sign(0) = +1).
inline int32_t binary_sign(int8_t q, int32_t zero_point) { return q >= zero_point ? 1 : -1; }

// ---- Spec 18: softmax by a table of exponentials ----------------------------------------------
// T[d] = round(2^20 exp(-s d)) for the distances d = max(q) - q in [0, 255], computed at convert;
// A = round(2^16 / s_y) in [1, 2^30]. With T <= 2^20, T[0] = 2^20 and rows of at most 2^20
// values, S <= 2^40 and every term below stays under 2^62.
constexpr int32_t kSoftmaxTableOne = int32_t{1} << 20;  // T[0], the row maximum's exp(0)
constexpr int64_t kSoftmaxMaxRow = int64_t{1} << 20;
constexpr int64_t kSoftmaxMaxMultiplier = int64_t{1} << 30;

// One row of `length` int8 values `stride` apart (the softmax axis), written to y at the same
// offsets: y_i = clamp(z + floor((2 T_i A + S 2^16) / (S 2^17)), lo, hi), T_i = T[max(q) - q_i],
// S = sum_j T_j. The input's zero point cancels.
inline void softmax_row(const int8_t* x, int8_t* y, int64_t length, int64_t stride,
                        const int32_t* table, int32_t multiplier, int32_t zero_point, int32_t lo,
                        int32_t hi) {
    int32_t max = kInt8Min;
    for (int64_t i = 0; i < length; ++i) {
        max = std::max<int32_t>(max, x[i * stride]);
    }
    int64_t sum = 0;
    for (int64_t i = 0; i < length; ++i) {
        sum += table[max - x[i * stride]];
    }
    const int64_t divisor = sum << 17;  // S >= T[0] = 2^20: the maximum is in the row
    for (int64_t i = 0; i < length; ++i) {
        const int64_t numerator =
            2 * int64_t{table[max - x[i * stride]]} * multiplier + (sum << 16);
        y[i * stride] = static_cast<int8_t>(clamp(numerator / divisor + zero_point, lo, hi));
    }
}

// ---- Spec 19: LayerNorm and GroupNorm in integers ---------------------------------------------
constexpr int kNormFractionBits = 16;                      // t is Q16
constexpr int64_t kNormMaxRow = int64_t{1} << 14;          // C <= 2^14
constexpr int64_t kNormMaxEpsTerm = int64_t{1} << 61;      // 1 <= E <= 2^61
constexpr int32_t kNormMaxBias = int32_t{1} << 30;         // |bias| <= 2^30
constexpr int64_t kL2NormMaxRow = (int64_t{1} << 45) - 1;  // spec 19.1: S < 2^61

// The number of bits of v (0 for 0): Python's int.bit_length.
inline int bit_length(uint64_t v) {
    int bits = 0;
    for (; v != 0; v >>= 1) {
        ++bits;
    }
    return bits;
}

// floor(sqrt(v)) exactly for every uint64: the digit-by-digit method in base 4, integer only (no
// float guess, no __int128 or builtins), so every compiler and target gives the same result.
inline uint64_t isqrt(uint64_t v) {
    uint64_t root = 0;
    uint64_t bit = uint64_t{1} << 62;  // the largest power of 4 in a uint64
    while (bit > v) {
        bit >>= 2;
    }
    while (bit != 0) {
        if (v >= root + bit) {
            v -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    return root;
}

// What a row's normalized values share: C, sx = sum x, k and r = isqrt(V 4^k), for
// V = C sxx - sx^2 + E (x = q - z). Contract: 1 <= C <= 2^14, 1 <= E <= 2^61, so V < 2^62,
// V 4^k < 2^62 and r >= 2^30 (V 4^k has 61 or 62 bits).
struct NormRow {
    int64_t count;
    int64_t sum;
    int shift;     // k
    int64_t root;  // r
};

// The row of C, sx and V (1 <= V < 2^62): k = floor((62 - bit_length(V)) / 2), r = isqrt(V 4^k).
inline NormRow norm_row_of(int64_t count, int64_t sum, int64_t v) {
    const int shift = (62 - bit_length(static_cast<uint64_t>(v))) / 2;
    const int64_t root = static_cast<int64_t>(isqrt(static_cast<uint64_t>(v) << (2 * shift)));
    return {count, sum, shift, root};
}

// Spec 19's statistics of one row of `count` int8 values `stride` apart.
inline NormRow norm_row(const int8_t* q, int64_t count, int64_t stride, int32_t zero_point,
                        int64_t eps_term) {
    int64_t sum = 0, squares = 0;  // |sx| <= 2^14 * 255, sxx <= 2^14 * 255^2
    for (int64_t i = 0; i < count; ++i) {
        const int64_t x = int64_t{q[i * stride]} - zero_point;
        sum += x;
        squares += x * x;
    }
    return norm_row_of(count, sum, count * squares - sum * sum + eps_term);  // >= E (C-S)
}

// Spec 19.1 (L2 normalization): the row as spec 19's with C = 1, sx = 0 and V = max(S, E),
// S = sum x^2, so normalized_q16 gives round_half_away(2^16 x / sqrt V). Contract: 1 <= E <=
// 2^61 and count < 2^45 (S < 2^61), so V < 2^62.
inline NormRow l2_row(const int8_t* q, int64_t count, int64_t stride, int32_t zero_point,
                      int64_t eps_term) {
    int64_t squares = 0;
    for (int64_t i = 0; i < count; ++i) {
        const int64_t x = int64_t{q[i * stride]} - zero_point;
        squares += x * x;
    }
    return norm_row_of(1, 0, squares < eps_term ? eps_term : squares);
}

// t = sign(n) floor((2 |n| 2^(16+k) + r) / (2 r)), n = C x - sx: round_half_away(2^16 n / sqrt V)
// in Q16. |n| <= sqrt(C V), so 2 |n| 2^(16+k) < 2^56; |t| <= 2^16 sqrt(C - 1) + 1 < 2^23.
inline int64_t normalized_q16(const NormRow& row, int8_t q, int32_t zero_point) {
    const int64_t n = row.count * (int64_t{q} - zero_point) - row.sum;
    const int64_t magnitude = n < 0 ? -n : n;
    const int64_t t = (2 * magnitude * (int64_t{1} << (kNormFractionBits + row.shift)) + row.root) /
                      (2 * row.root);
    return n < 0 ? -t : t;
}

// The affine part (spec 4 on t at scale 2^-16): requantize(t w[c] + bias[c], M[c], n[c], ...).
// |t w| < 2^30 for any int8 w (|t| <= 8388342 at C = 2^14) and |bias| <= 2^30, so the
// accumulator fits int32 as requantize requires.
inline int8_t norm_affine(int64_t t, int8_t weight, int32_t bias, int32_t multiplier,
                          int32_t shift, int32_t zero_point, int32_t lo, int32_t hi) {
    const int64_t acc = t * weight + bias;
    return requantize(static_cast<int32_t>(acc), multiplier, shift, zero_point, lo, hi);
}

// ---- Spec 21: arithmetic with a constant ---------------------------------------------------------
// The constant c is folded into the requantization, never quantized to int8.
constexpr int32_t kConstantMaxInputShift = 16;     // k of add_constant
constexpr int32_t kConstantMaxBias = int32_t{1} << 30;  // |B| of add_constant

// x * c (x / c as x * (1 / c)): requantize(q - z, M_e, n_e) with M_e signed, carrying c's sign
// (|M_e| < 2^31, so (q - z) M_e is exact in int64); M_e = 0 for c = 0 gives z_out.
inline int8_t mul_constant(int8_t q, int32_t zero_point, int32_t multiplier, int32_t shift,
                           int32_t zero_point_out, int32_t lo, int32_t hi) {
    return requantize(int32_t{q} - zero_point, multiplier, shift, zero_point_out, lo, hi);
}

// x + c, x - c (B of -c) and c - x (negate): requantize(+-(q - z) 2^k + B_e, M, n).
// k <= 16 and |B_e| <= 2^30 keep the sum below 255 * 2^16 + 2^30 < 2^31.
inline int8_t add_constant(int8_t q, int32_t zero_point, bool negate, int32_t input_shift,
                           int32_t bias, int32_t multiplier, int32_t shift, int32_t zero_point_out,
                           int32_t lo, int32_t hi) {
    const int32_t d = negate ? zero_point - q : q - zero_point;
    return requantize(d * (int32_t{1} << input_shift) + bias, multiplier, shift, zero_point_out, lo,
                      hi);
}

}  // namespace arith
}  // namespace qtk
