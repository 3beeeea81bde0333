// The requantization of requantize_int8.h on 16 int32 lanes in a register, AVX-512 F: shared by
// requantize_int8_avx512.cpp and the kernels that requantize their accumulators before storing
// them (depthwise_int8_nhwc_c64_avx512_vnni.cpp), so the arithmetic is written once. Include only
// from files built with the AVX-512 flags. Each lane has its own multiplier and shift (one channel
// sets all 16 alike).
//
// Two forms, both exact (requantize_int8.h): the int64 form for every shift, and the high-half
// form for 33 <= n <= 54, which needs only the products' high int32 halves and folds the zero
// point into its rounding constant.
#pragma once

#include "avx512_intrinsics.h"

#include "../contracts/requantize_int8.h"

namespace qtk {
namespace detail {

// The int64 form's constants, split into the even and odd int32 positions, and the clamp bounds
// relative to the zero point.
struct Int8Exact16 {
    __m512i multiplier_even, multiplier_odd, round_even, round_odd, shift_even, shift_odd;
    __m512i lo, hi, zero_point;
};

inline Int8Exact16 int8_exact16(__m512i vmultiplier, __m512i vshift, const Int8Output& out) {
    const __m512i vone = _mm512_set1_epi64(1);
    Int8Exact16 p;
    p.multiplier_even = vmultiplier;  // vpmuldq reads the low int32 of each int64 lane
    p.multiplier_odd = _mm512_srli_epi64(vmultiplier, 32);
    p.shift_even = _mm512_and_si512(vshift, _mm512_set1_epi64(0xFFFFFFFF));
    p.shift_odd = _mm512_srli_epi64(vshift, 32);
    p.round_even = _mm512_sllv_epi64(vone, _mm512_sub_epi64(p.shift_even, vone));
    p.round_odd = _mm512_sllv_epi64(vone, _mm512_sub_epi64(p.shift_odd, vone));
    p.lo = _mm512_set1_epi64(out.lo_from_zero_point);
    p.hi = _mm512_set1_epi64(out.hi_from_zero_point);
    p.zero_point = _mm512_set1_epi32(out.zero_point);
    return p;
}

// clamp((product + 2^(n-1)) >> n, lo - z, hi - z) on int64 lanes: vpsravq shifts arithmetically
// and the clamp happens before anything is narrowed, so no lane wraps however large the product.
[[gnu::always_inline]] inline __m512i int8_scale_exact(__m512i vproduct, __m512i vround,
                                                       __m512i vshift, const Int8Exact16& p) {
    const __m512i vscaled = _mm512_srav_epi64(_mm512_add_epi64(vproduct, vround), vshift);
    return _mm512_min_epi64(_mm512_max_epi64(vscaled, p.lo), p.hi);
}

// The 16 accumulators requantized, clamped, zero point added: int32 lanes in [lo, hi].
[[gnu::always_inline]] inline __m512i int8_requantize16_exact(__m512i vacc, const Int8Exact16& p) {
    const __m512i veven =
        int8_scale_exact(_mm512_mul_epi32(vacc, p.multiplier_even), p.round_even, p.shift_even, p);
    const __m512i vodd = int8_scale_exact(
        _mm512_mul_epi32(_mm512_srli_epi64(vacc, 32), p.multiplier_odd), p.round_odd, p.shift_odd,
        p);
    const __m512i vy = _mm512_mask_blend_epi32(0xAAAA, veven, _mm512_slli_epi64(vodd, 32));
    return _mm512_add_epi32(vy, p.zero_point);
}

// The high-half form's constants.
struct Int8HighHalf16 {
    __m512i multiplier, multiplier_odd;  // odd: shifted down
    __m512i round;                       // 2^(n-33) + z 2^(n-32) per lane
    __m512i shift;  // n - 32 per lane, for vpsravd (one uop, where vpsrad by xmm is two)
    __m512i lo, hi;
};

// The high-half constants of 16 lanes (the masked lanes of the arrays; the others read shift 33 and
// nothing else); false where a lane's shift is outside 33..54.
inline bool int8_high_half16(const int32_t* multiplier, const int32_t* shift, __mmask16 mask,
                             const Int8Output& out, Int8HighHalf16* p) {
    const __m512i vmin = _mm512_set1_epi32(kHighHalfMinShift);
    const __m512i vshift = _mm512_mask_loadu_epi32(vmin, mask, shift);
    if ((_mm512_cmplt_epi32_mask(vshift, vmin) |
         _mm512_cmpgt_epi32_mask(vshift, _mm512_set1_epi32(kHighHalfMaxShift))) != 0) {
        return false;
    }
    const __m512i vmultiplier = _mm512_maskz_loadu_epi32(mask, multiplier);
    *p = {vmultiplier,
          _mm512_srli_epi64(vmultiplier, 32),
          _mm512_sllv_epi32(_mm512_set1_epi32(out.round_odd), _mm512_sub_epi32(vshift, vmin)),
          _mm512_sub_epi32(vshift, _mm512_set1_epi32(kHighHalfDroppedBits)),
          _mm512_set1_epi32(out.lo),
          _mm512_set1_epi32(out.hi)};
    return true;
}

// The high-half constants of a block of the plan (requantize_int8.h), loaded as they lie.
[[gnu::always_inline]] inline Int8HighHalf16 int8_high_half16(const Int8HighHalfBlock& block,
                                                             const Int8Output& out) {
    return {_mm512_loadu_si512(block.multiplier), _mm512_loadu_si512(block.multiplier_odd),
            _mm512_loadu_si512(block.round),      _mm512_loadu_si512(block.shift),
            _mm512_set1_epi32(out.lo),            _mm512_set1_epi32(out.hi)};
}

// Spec 22's two sides in the high-half form: the lanes set in `negative` (values below zero) take
// the negative side's constants. vpmuldq reads the odd lanes' multipliers from multiplier_odd's
// even lanes, so those blend by the mask moved down one lane.
[[gnu::always_inline]] inline Int8HighHalf16 int8_high_half16_by_sign(
    __mmask16 negative, const Int8HighHalf16& positive, const Int8HighHalf16& negative_side) {
    return {_mm512_mask_blend_epi32(negative, positive.multiplier, negative_side.multiplier),
            _mm512_mask_blend_epi32(__mmask16(negative >> 1), positive.multiplier_odd,
                                    negative_side.multiplier_odd),
            _mm512_mask_blend_epi32(negative, positive.round, negative_side.round),
            _mm512_mask_blend_epi32(negative, positive.shift, negative_side.shift),
            positive.lo,
            positive.hi};
}

// (h + 2^(n-33)) >> (n - 32) + z of 16 accumulators, before the clamp (int32 lanes, |.| < 2^31).
[[gnu::always_inline]] inline __m512i int8_scale16_high_half(__m512i vacc,
                                                             const Int8HighHalf16& p) {
    // h: the high (odd) dword of each product, the odd lanes' where vodd has them, the even ones'
    // moved down from veven (an in-lane shuffle, cheaper than a two-source permute).
    const __m512i veven = _mm512_mul_epi32(vacc, p.multiplier);
    const __m512i vodd = _mm512_mul_epi32(_mm512_srli_epi64(vacc, 32), p.multiplier_odd);
    const __m512i vhigh = _mm512_mask_shuffle_epi32(vodd, 0x5555, veven, _MM_PERM_DDBB);
    return _mm512_srav_epi32(_mm512_add_epi32(vhigh, p.round), p.shift);
}

// Four vectors of int32 lanes in int8 range or beyond, narrowed with saturating packs (exact where
// a clamp within int8 follows), which interleave them per 128-bit lane: byte 16 l + 4 j + i of
// the result is dword i of 128-bit lane l of v[j]. The callers put back the order they need.
[[gnu::always_inline]] inline __m512i int8_pack4x16(__m512i v0, __m512i v1, __m512i v2,
                                                    __m512i v3) {
    return _mm512_packs_epi16(_mm512_packs_epi32(v0, v1), _mm512_packs_epi32(v2, v3));
}

}  // namespace detail
}  // namespace qtk
