// The int8 add of docs/quantization_spec.md section 3 (two inputs of one shape, one shared shift,
// a fused clamp), vectorized; one file per ISA, each compiled with its own flags and called only
// where cpu_supports() its level. The driver is add_int8_vadd.cpp.
//
// Contract: y[i] = arith::rescale_add(a[i], a_zero_point, a_multiplier, b[i], b_zero_point,
// b_multiplier, shift, zero_point, lo, hi), byte for byte, for multipliers in [0, 2^31), shift in
// [1, 62], zero points in [-128, 127] and -128 <= lo <= hi <= 127. Exact in int64 lanes as the
// scalar form: each product (q - z) * M is below 2^39 in magnitude (vpmuldq of two int32).
// No alignment is required.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why), and take every
// derived constant from Int8AddParams, which baseline code builds (kernels/drivers/int8_plans.cpp),
// so both ISAs consume one derivation.
//
// The 16-bit form (AVX-512), exact by this split: with d = q - z in [-255, 255] and each
// M = H 2^16 + L, L in [-2^15, 2^15), 0 <= H < 2^15 (so M < 2^31 - 2^15), the sum is
// S_H 2^16 + S_L with S_H = d_a H_a + d_b H_b and S_L = d_a L_a + d_b L_b, each below 2^24 in
// magnitude. For 17 <= n <= 46, (S_H 2^16 + S_L + 2^(n-1)) >> n = (S_H + (S_L >> 16) + 2^(n-17))
// >> (n - 16), and adding the output zero point z_y after the shift is adding z_y 2^(n-16)
// before it. The zero points of the inputs fold into constants too, on u = q + 128 (the byte
// with its sign bit flipped, read unsigned: two byte unpacks, one with zeros, make the int16
// pairs, where sign extension took four shuffles): S_L = L.u + C_L and S_H = H.u - C_H, where
// L.u = u_a L_a + u_b L_b (one vpdpwssd of the (u_a, u_b) pairs onto
// C_L = -((z_a + 128) L_a + (z_b + 128) L_b), below 2^24), and H.u alike (below 2^24). So the sum
// plus z_y is ((L.u + C_L) >> 16) + K + H.u, shifted by n - 16, with
// K = 2^(n-17) + z_y 2^(n-16) - C_H: two vpdpwssd, two shifts and one add per 16 elements, all in
// int32 where |K| + 2^24 + 2^9 < 2^31 (the plan checks it; else the int64 form runs).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

// The add's constants and what the vector forms derive from them (a plain-data plan: the
// constructor is defined out of line, in baseline code).
struct Int8AddParams {
    Int8AddParams() = default;
    Int8AddParams(int32_t a_zero_point, int32_t a_multiplier, int32_t b_zero_point,
                  int32_t b_multiplier, int32_t shift, int32_t zero_point, int32_t lo, int32_t hi);

    int32_t a_zero_point, a_multiplier, b_zero_point, b_multiplier, shift;
    int32_t zero_point, lo, hi;  // of the output
    // The int64 form: 2^(n-1), and the clamp relative to the zero point (applied before adding it).
    int64_t round, lo_from_zero_point, hi_from_zero_point;
    // The 16-bit form, where `pairs` (shift and multipliers in its range, K within int32):
    bool pairs;
    int32_t high_pair, low_pair;  // (H_a, H_b) and (L_a, L_b) as int16 pairs, a's in the low half
    int32_t pair_low_init;        // C_L
    int32_t pair_constant;        // K
    int32_t pair_shift;           // n - 16
};

struct Int8VaddUkernel {
    void (*run)(const int8_t* a, const int8_t* b, int64_t count, const Int8AddParams& p,
                int8_t* y);
};

extern const Int8VaddUkernel kInt8VaddAvx2;
extern const Int8VaddUkernel kInt8VaddAvx512;
extern const Int8VaddUkernel kInt8VaddNeon;

}  // namespace detail
}  // namespace qtk
