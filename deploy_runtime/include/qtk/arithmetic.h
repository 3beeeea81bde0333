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

namespace qtk {
namespace arith {

constexpr int32_t kInt8Min = -128;
constexpr int32_t kInt8Max = 127;

inline int32_t clamp(int64_t v, int32_t lo, int32_t hi) {
    return static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(v, lo), hi));
}

// Spec 2: one rounding step, half toward +infinity, exact in int64 for |acc| < 2^31, M < 2^31,
// 1 <= shift <= 62.
inline int64_t rounding_constant(int32_t shift) { return int64_t{1} << (shift - 1); }

inline int64_t rounding_shift(int64_t product_sum, int32_t shift) {
    return (product_sum + rounding_constant(shift)) >> shift;
}

inline int8_t requantize(int32_t acc, int32_t multiplier, int32_t shift, int32_t zero_point,
                         int32_t lo, int32_t hi) {
    const int64_t scaled = rounding_shift(int64_t{acc} * multiplier, shift);
    return static_cast<int8_t>(clamp(scaled + zero_point, lo, hi));
}

// Spec 3: the rescaled sum of (q_i - z_i) * M_i with one shared shift; the caller accumulates the
// int64 sum (each term below 2^39) and this finishes it.
inline int8_t finish_rescaled_sum(int64_t sum, int32_t shift, int32_t zero_point, int32_t lo,
                                  int32_t hi) {
    return static_cast<int8_t>(clamp(rounding_shift(sum, shift) + zero_point, lo, hi));
}

inline int8_t rescale_add(int8_t a, int32_t za, int32_t ma, int8_t b, int32_t zb, int32_t mb,
                          int32_t shift, int32_t zero_point, int32_t lo, int32_t hi) {
    const int64_t sum = int64_t{a - za} * ma + int64_t{b - zb} * mb;
    return finish_rescaled_sum(sum, shift, zero_point, lo, hi);
}

inline int8_t rescale(int8_t q, int32_t zq, int32_t multiplier, int32_t shift, int32_t zero_point) {
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
inline int32_t round_half_away_div(int64_t sum, int64_t divisor) {
    const int64_t magnitude = (2 * (sum < 0 ? -sum : sum) + divisor) / (2 * divisor);
    return static_cast<int32_t>(sum < 0 ? -magnitude : magnitude);
}

inline int8_t average(int64_t sum_minus_zp, int64_t divisor, int32_t zero_point) {
    return static_cast<int8_t>(
        clamp(int64_t{round_half_away_div(sum_minus_zp, divisor)} + zero_point, kInt8Min, kInt8Max));
}

}  // namespace arith
}  // namespace qtk
