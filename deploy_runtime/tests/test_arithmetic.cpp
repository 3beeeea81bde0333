// Hand-worked cases for qtk/arithmetic.h (docs/quantization_spec.md): ties, saturation, negative
// values, the extreme shifts and multipliers. The expected values are worked out in the comments.
#include <cmath>
#include <limits>

#include "check.h"
#include "qtk/arithmetic.h"

using namespace qtk::arith;

namespace {

constexpr int32_t kTwo30 = 1 << 30;
constexpr int32_t kMaxMult = std::numeric_limits<int32_t>::max();  // 2^31 - 1
constexpr int32_t kMinAcc = std::numeric_limits<int32_t>::min();

void test_requantize() {
    // M = 2^30, n = 31 is m = 0.5: 5 * 0.5 = 2.5 rounds up, -2.5 rounds up to -2.
    CHECK_EQ(requantize(5, kTwo30, 31, 0, -128, 127), 3);
    CHECK_EQ(requantize(-5, kTwo30, 31, 0, -128, 127), -2);
    CHECK_EQ(requantize(7, kTwo30, 31, 0, -128, 127), 4);    // 3.5 -> 4
    CHECK_EQ(requantize(-7, kTwo30, 31, 0, -128, 127), -3);  // -3.5 -> -3
    CHECK_EQ(requantize(-6, kTwo30, 31, 0, -128, 127), -3);  // exact
    // Zero point is added after rounding.
    CHECK_EQ(requantize(5, kTwo30, 31, 10, -128, 127), 13);
    CHECK_EQ(requantize(-5, kTwo30, 31, -10, -128, 127), -12);
    // Saturation at both ends and at a fused clamp.
    CHECK_EQ(requantize(300, kTwo30, 30, 0, -128, 127), 127);
    CHECK_EQ(requantize(-200, kTwo30, 30, -10, -128, 127), -128);
    CHECK_EQ(requantize(100, kTwo30, 30, 0, -128, 60), 60);
    CHECK_EQ(requantize(-100, kTwo30, 30, 5, 5, 127), 5);  // ReLU: lo = z
    // Shift 1 with M = 1 is m = 0.5 too: (3 + 1) >> 1 = 2, (-3 + 1) >> 1 = -1.
    CHECK_EQ(requantize(3, 1, 1, 0, -128, 127), 2);
    CHECK_EQ(requantize(-3, 1, 1, 0, -128, 127), -1);
    CHECK_EQ(requantize(-1, 1, 1, 0, -128, 127), 0);  // -0.5 -> 0
    // Shift 62, largest |acc| and M: (2^31-1)^2 = 2^62 - 2^32 + 1; + 2^61 then >> 62 gives 1.
    CHECK_EQ(requantize(kMaxMult, kMaxMult, 62, 0, -128, 127), 1);
    // -2^31 * (2^31 - 1) = -2^62 + 2^31; + 2^61 = -2^61 + 2^31, floor(/2^62) = -1.
    CHECK_EQ(requantize(kMinAcc, kMaxMult, 62, 0, -128, 127), -1);
    // 2^30 * (2^31 - 1) + 2^61 = 2^62 - 2^30 -> 0 at shift 62.
    CHECK_EQ(requantize(kMaxMult, kTwo30, 62, 0, -128, 127), 0);
    // M = 2^31 - 1, n = 31 is m just below 1: 100 * (2^31 - 1) + 2^30 = 100 * 2^31 + 2^30 - 100 ->
    // 100.
    CHECK_EQ(requantize(100, kMaxMult, 31, 0, -128, 127), 100);
    CHECK_EQ(requantize(-100, kMaxMult, 31, 0, -128, 127), -100);
    // Multiplier 0 (below resolution, spec 2): every output is z.
    CHECK_EQ(requantize(kMaxMult, 0, 1, 7, -128, 127), 7);
    // Large accumulator saturates.
    CHECK_EQ(requantize(kMaxMult, kMaxMult, 31, 0, -128, 127), 127);
    CHECK_EQ(requantize(kMinAcc, kMaxMult, 31, 0, -128, 127), -128);
}

void test_rescaled_sums() {
    // (10 - 0) * 2^30 + (-5 - 3) * 2^30 at shift 30 = 2, plus z = 4.
    CHECK_EQ(rescale_add(10, 0, kTwo30, -5, 3, kTwo30, 30, 4, -128, 127), 6);
    // Ties: a sum of 2^29 at shift 30 is 0.5 -> 1; -2^29 is -0.5 -> 0.
    CHECK_EQ(rescale_add(1, 0, 1 << 29, 0, 0, kTwo30, 30, 0, -128, 127), 1);
    CHECK_EQ(rescale_add(-1, 0, 1 << 29, 0, 0, kTwo30, 30, 0, -128, 127), 0);
    // One rounding step: 0.25 + 0.25 = 0.5 -> 1 (rounding each first would give 0 + 0).
    CHECK_EQ(rescale_add(1, 0, 1 << 28, 1, 0, 1 << 28, 30, 0, -128, 127), 1);
    // Saturation and clamps.
    CHECK_EQ(rescale_add(127, -128, kTwo30, 127, -128, kTwo30, 30, 0, -128, 127), 127);
    CHECK_EQ(rescale_add(-128, 127, kTwo30, -128, 127, kTwo30, 30, 0, -128, 127), -128);
    CHECK_EQ(rescale_add(50, 0, kTwo30, 0, 0, kTwo30, 30, 0, -128, 20), 20);
    // Extreme terms: (127 - -128) * (2^31 - 1) twice at shift 31 = 2 * 255 * (1 - 2^-31) -> 510 ->
    // 127.
    CHECK_EQ(rescale_add(127, -128, kMaxMult, 127, -128, kMaxMult, 31, -128, -128, 127), 127);
    // Identity rescale (M = 2^30, n = 30) moves the value between zero points exactly.
    CHECK_EQ(rescale(-100, 20, kTwo30, 30, -3), -123);
    CHECK_EQ(rescale(100, -50, kTwo30, 30, 0), 127);  // 150 saturates
    // Halving: 3 * 0.5 = 1.5 -> 2, -3 * 0.5 = -1.5 -> -1.
    CHECK_EQ(rescale(3, 0, kTwo30, 31, 0), 2);
    CHECK_EQ(rescale(-3, 0, kTwo30, 31, 0), -1);
}

void test_quantize() {
    const float inv1 = inverse_scale(1.0f);
    // Round half to even.
    CHECK_EQ(quantize(0.5f, inv1, 0), 0);
    CHECK_EQ(quantize(1.5f, inv1, 0), 2);
    CHECK_EQ(quantize(2.5f, inv1, 0), 2);
    CHECK_EQ(quantize(-0.5f, inv1, 0), 0);
    CHECK_EQ(quantize(-1.5f, inv1, 0), -2);
    CHECK_EQ(quantize(-2.5f, inv1, 0), -2);
    // Scale 0.5: x / 0.5 = x * 2 exactly; 0.75 -> 1.5 -> 2, plus z.
    const float inv_half = inverse_scale(0.5f);
    CHECK_EQ(inv_half, 2.0f);
    CHECK_EQ(quantize(0.75f, inv_half, -10), -8);
    CHECK_EQ(quantize(-0.25f, inv_half, 5), 5);  // -0.5 -> -0 -> 0
    // Saturation in float before converting: huge, infinite, and clamp relative to z.
    CHECK_EQ(quantize(1e30f, inv1, 0), 127);
    CHECK_EQ(quantize(-1e30f, inv1, 0), -128);
    CHECK_EQ(quantize(std::numeric_limits<float>::infinity(), inv1, 3), 127);
    CHECK_EQ(quantize(-std::numeric_limits<float>::infinity(), inv1, 3), -128);
    CHECK_EQ(quantize(300.0f, inv1, 10), 127);    // r clamps to 117
    CHECK_EQ(quantize(-1.0f, inv1, -128), -128);  // r clamps to 0
    CHECK_EQ(quantize(255.0f, inv1, -128), 127);
    // NaN is treated as 0, i.e. the zero point.
    CHECK_EQ(quantize(std::nanf(""), inv1, 7), 7);
    // Narrow range for weights.
    CHECK_EQ(quantize(-1000.0f, inv1, 0, -127, 127), -127);
}

void test_dequantize() {
    CHECK(dequantize(5, 0.5f, 1) == 2.0f);
    CHECK(dequantize(-128, 0.25f, 127) == -63.75f);  // -255 * 0.25
    CHECK(dequantize(127, 1.0f, -128) == 255.0f);
    CHECK(dequantize(3, 0.1f, 3) == 0.0f);
}

void test_average() {
    CHECK_EQ(round_half_away_div(5, 2), 3);    // 2.5 -> 3
    CHECK_EQ(round_half_away_div(-5, 2), -3);  // -2.5 -> -3
    CHECK_EQ(round_half_away_div(7, 3), 2);    // 2.33
    CHECK_EQ(round_half_away_div(-7, 3), -2);
    CHECK_EQ(round_half_away_div(8, 3), 3);  // 2.67
    CHECK_EQ(round_half_away_div(-8, 3), -3);
    CHECK_EQ(round_half_away_div(4, 8), 1);  // 0.5 -> 1
    CHECK_EQ(round_half_away_div(-4, 8), -1);
    CHECK_EQ(round_half_away_div(3, 8), 0);
    CHECK_EQ(round_half_away_div(0, 5), 0);
    CHECK_EQ(round_half_away_div(-255 * 9, 9), -255);
    CHECK_EQ(average(-255 * 9, 9, 127), -128);
    CHECK_EQ(average(5, 2, -10), -7);
    CHECK_EQ(average(255 * 4, 4, -128), 127);
}

void test_clamp() {
    CHECK_EQ(clamp(int64_t{1} << 40, -128, 127), 127);
    CHECK_EQ(clamp(-(int64_t{1} << 40), -128, 127), -128);
    CHECK_EQ(clamp(5, 0, 3), 3);
}

}  // namespace

// Spec 19's exact integer functions at the edges: powers of two, k^2 - 1, k^2 and k^2 + 1 up to
// the largest uint64 (the method must not depend on a float guess being close).
void test_bit_length_and_isqrt() {
    CHECK_EQ(bit_length(0), 0);
    CHECK_EQ(bit_length(1), 1);
    CHECK_EQ(bit_length(255), 8);
    CHECK_EQ(bit_length(256), 9);
    CHECK_EQ(bit_length((uint64_t{1} << 62) - 1), 62);
    CHECK_EQ(bit_length(~uint64_t{0}), 64);
    CHECK_EQ(isqrt(0), uint64_t{0});
    CHECK_EQ(isqrt(3), uint64_t{1});
    CHECK_EQ(isqrt(4), uint64_t{2});
    CHECK_EQ(isqrt(~uint64_t{0}), uint64_t{0xFFFFFFFF});
    for (uint64_t k : {uint64_t{2}, uint64_t{3}, uint64_t{1} << 20, (uint64_t{1} << 26) + 1,
                       (uint64_t{1} << 30) + 3, (uint64_t{1} << 31) - 1, uint64_t{3037000499},
                       (uint64_t{1} << 32) - 1}) {
        CHECK_EQ(isqrt(k * k - 1), k - 1);
        CHECK_EQ(isqrt(k * k), k);
        if (k < (uint64_t{1} << 32) - 1) {
            CHECK_EQ(isqrt(k * k + 1), k);
            CHECK_EQ(isqrt(k * k + 2 * k), k);  // (k + 1)^2 - 1
        }
    }
    // normalized_q16 of [1, -1] with E = 1: V = 5, k = 29, t = round(2^17 / sqrt 5) = 58617.
    const int8_t row[] = {1, -1};
    const NormRow stats = norm_row(row, 2, 1, 0, 1);
    CHECK_EQ(stats.shift, 29);
    CHECK_EQ(normalized_q16(stats, 1, 0), int64_t{58617});
    CHECK_EQ(normalized_q16(stats, -1, 0), int64_t{-58617});
}

int main() {
    test_requantize();
    test_bit_length_and_isqrt();
    test_rescaled_sums();
    test_quantize();
    test_dequantize();
    test_average();
    test_clamp();
    return qtk_test::check_report();
}
