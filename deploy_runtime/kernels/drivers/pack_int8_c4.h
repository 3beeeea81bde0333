// The activation quads that the int8 GEMM micro-kernels read (gemm_int8.h), shared by the x86
// convs that build them (conv2d_int8_gemm.cpp packs im2col rows, conv2d_int8_direct.cpp lays out
// the input once): 4 consecutive k (input channels) of one pixel in 4 bytes, as u = x ^ 0x80 =
// x + 128, so that vpdpbusd's unsigned operand holds every int8 value.
//
// Exact: sum (x - z) w = sum u w - (128 + z) sum w, so one constant per output channel (below)
// turns the micro-kernel's sums into the spec's accumulator; padding holds x = z, whose u the
// constant cancels. Built with the baseline flags (SSE2).
#pragma once

#include <emmintrin.h>

#include <cstdint>

#include "../x86/gemm_int8.h"

namespace qtk {
namespace detail {

// 16 pixels of 4 rows of k (one vector each) into 64 bytes of quads at out.
inline void store_c4_quads16(__m128i vrow0, __m128i vrow1, __m128i vrow2, __m128i vrow3,
                             uint8_t* out) {
    const __m128i vflip = _mm_set1_epi8(-128);
    const __m128i v01lo = _mm_unpacklo_epi8(vrow0, vrow1);
    const __m128i v01hi = _mm_unpackhi_epi8(vrow0, vrow1);
    const __m128i v23lo = _mm_unpacklo_epi8(vrow2, vrow3);
    const __m128i v23hi = _mm_unpackhi_epi8(vrow2, vrow3);
    __m128i* vout = reinterpret_cast<__m128i*>(out);
    _mm_storeu_si128(vout + 0, _mm_xor_si128(_mm_unpacklo_epi16(v01lo, v23lo), vflip));
    _mm_storeu_si128(vout + 1, _mm_xor_si128(_mm_unpackhi_epi16(v01lo, v23lo), vflip));
    _mm_storeu_si128(vout + 2, _mm_xor_si128(_mm_unpacklo_epi16(v01hi, v23hi), vflip));
    _mm_storeu_si128(vout + 3, _mm_xor_si128(_mm_unpackhi_epi16(v01hi, v23hi), vflip));
}

// The per-channel constant: bias - (128 + z) sum w. In int32: |bias| + 255 * 127 * K < 2^31
// (check_accumulator_range).
inline int32_t c4_acc_init(int32_t bias, int32_t input_zero_point, int64_t weight_sum) {
    return static_cast<int32_t>(bias - (128 + int64_t{input_zero_point}) * weight_sum);
}

// Quads padded to whole quad blocks of the micro-kernel u (their weights are 0).
inline int64_t c4_padded_quads(int64_t quads, const Int8GemmUkernel& u) {
    return (quads + u.quad_block - 1) / u.quad_block * u.quad_block;
}

// Where one weight goes in a tile of u's packed weights (gemm_int8.h's a, quad_block B): outer
// quad q, inner step i of `inner`, row r of mr, byte `lane` of the quad.
inline int64_t c4_weight_offset(const Int8GemmUkernel& u, int64_t inner, int64_t q, int64_t i,
                                int64_t r, int64_t lane) {
    const int64_t block = u.quad_block;
    return ((((q / block) * inner + i) * u.mr + r) * block + q % block) * 4 + lane;
}

}  // namespace detail
}  // namespace qtk
