// The activation quads that the int8 GEMM micro-kernels read (gemm_int8.h), shared by the convs
// that build them (conv2d_int8_gemm.cpp packs im2col rows, conv2d_int8_direct.cpp lays out the
// input once): 4 consecutive k (input channels) of one pixel in 4 bytes, as the micro-kernel's
// x_offset asks: u = x ^ 0x80 = x + 128 where it is 128 (x86: vpdpbusd's unsigned operand holds
// every int8 value), x itself where it is 0 (aarch64: sdot and smmla multiply signed bytes).
//
// Exact: sum (x - z) w = sum (x + o) w - (o + z) sum w for the offset o, so one constant per output
// channel (below) turns the micro-kernel's sums into the spec's accumulator; padding holds x = z,
// whose x + o the constant cancels. Built with the baseline flags: SSE2 on x86-64, NEON on
// aarch64, plain loops elsewhere.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include <cstdint>
#include <cstring>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {

// The byte every packed activation is xor-ed with: 0x80 for x_offset 128, else 0.
inline uint8_t c4_flip(const Int8GemmUkernel& u) { return u.x_offset == 128 ? 0x80 : 0; }

// 16 pixels of 4 rows of k (16 bytes from each row pointer) into 64 bytes of quads at out, each
// byte xor-ed with flip.
inline void store_c4_quads16(const int8_t* row0, const int8_t* row1, const int8_t* row2,
                             const int8_t* row3, uint8_t flip, uint8_t* out) {
#if defined(__SSE2__)
    const auto load = [](const int8_t* row) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row));
    };
    const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
    const __m128i vrow0 = load(row0), vrow1 = load(row1), vrow2 = load(row2), vrow3 = load(row3);
    const __m128i v01lo = _mm_unpacklo_epi8(vrow0, vrow1);
    const __m128i v01hi = _mm_unpackhi_epi8(vrow0, vrow1);
    const __m128i v23lo = _mm_unpacklo_epi8(vrow2, vrow3);
    const __m128i v23hi = _mm_unpackhi_epi8(vrow2, vrow3);
    __m128i* vout = reinterpret_cast<__m128i*>(out);
    _mm_storeu_si128(vout + 0, _mm_xor_si128(_mm_unpacklo_epi16(v01lo, v23lo), vflip));
    _mm_storeu_si128(vout + 1, _mm_xor_si128(_mm_unpackhi_epi16(v01lo, v23lo), vflip));
    _mm_storeu_si128(vout + 2, _mm_xor_si128(_mm_unpacklo_epi16(v01hi, v23hi), vflip));
    _mm_storeu_si128(vout + 3, _mm_xor_si128(_mm_unpackhi_epi16(v01hi, v23hi), vflip));
#elif defined(__ARM_NEON)
    const uint8x16_t vflip = vdupq_n_u8(flip);
    const auto load = [&](const int8_t* row) {
        return veorq_u8(vld1q_u8(reinterpret_cast<const uint8_t*>(row)), vflip);
    };
    uint8x16x4_t vrows;
    vrows.val[0] = load(row0);
    vrows.val[1] = load(row1);
    vrows.val[2] = load(row2);
    vrows.val[3] = load(row3);
    vst4q_u8(out, vrows);  // interleaves the four rows: quad i is their bytes i
#else
    const int8_t* rows[4] = {row0, row1, row2, row3};
    for (int i = 0; i < 16; ++i) {
        for (int j = 0; j < 4; ++j) {
            out[4 * i + j] = static_cast<uint8_t>(rows[j][i]) ^ flip;
        }
    }
#endif
}

// The 4-byte pixels [0, count) of `pixels` (count a multiple of 8) by column phase: pixel 2 i to
// evens + 4 i, pixel 2 i + 1 to odds + 4 i.
inline void split_c4_phases(const uint8_t* pixels, int64_t count, uint8_t* evens, uint8_t* odds) {
    for (int64_t i = 0; i < count; i += 8) {
#if defined(__SSE2__)
        const __m128 va = _mm_loadu_ps(reinterpret_cast<const float*>(pixels + i * 4));
        const __m128 vb = _mm_loadu_ps(reinterpret_cast<const float*>(pixels + i * 4 + 16));
        _mm_storeu_ps(reinterpret_cast<float*>(evens + i * 2),
                      _mm_shuffle_ps(va, vb, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm_storeu_ps(reinterpret_cast<float*>(odds + i * 2),
                      _mm_shuffle_ps(va, vb, _MM_SHUFFLE(3, 1, 3, 1)));
#elif defined(__ARM_NEON)
        const uint32x4x2_t v = vld2q_u32(reinterpret_cast<const uint32_t*>(pixels + i * 4));
        vst1q_u32(reinterpret_cast<uint32_t*>(evens + i * 2), v.val[0]);
        vst1q_u32(reinterpret_cast<uint32_t*>(odds + i * 2), v.val[1]);
#else
        for (int64_t j = 0; j < 4; ++j) {
            std::memcpy(evens + (i / 2 + j) * 4, pixels + (i + 2 * j) * 4, 4);
            std::memcpy(odds + (i / 2 + j) * 4, pixels + (i + 2 * j + 1) * 4, 4);
        }
#endif
    }
}

// The per-channel constant: bias - (o + z) sum w for u's x_offset o. In int32: |bias| + 255 * 127
// * K < 2^31 (check_accumulator_range).
inline int32_t c4_acc_init(const Int8GemmUkernel& u, int32_t bias, int32_t input_zero_point,
                           int64_t weight_sum) {
    return static_cast<int32_t>(bias - (int64_t{u.x_offset} + input_zero_point) * weight_sum);
}

// Quads padded to whole quad blocks of the micro-kernel u (their weights are 0).
inline int64_t c4_padded_quads(int64_t quads, const Int8GemmUkernel& u) {
    return (quads + u.quad_block - 1) / u.quad_block * u.quad_block;
}

// Bytes of one tile of u's packed weights (gemm_int8.h's a) over `quads` quads.
inline int64_t c4_weight_tile_bytes(const Int8GemmUkernel& u, int64_t quads) {
    return quads * u.mr * 4 * u.weight_bytes;
}

// Stores one weight w into a tile of u's packed weights (quad_block B, weight_bytes wide): outer
// quad q, inner step i of `inner`, row r of mr, element `lane` of the quad.
inline void c4_store_weight(const Int8GemmUkernel& u, int8_t* tile, int64_t inner, int64_t q,
                            int64_t i, int64_t r, int64_t lane, int8_t w) {
    const int64_t block = u.quad_block;
    const int64_t index = ((((q / block) * inner + i) * u.mr + r) * block + q % block) * 4 + lane;
    if (u.weight_bytes == 2) {
        const int16_t wide = w;
        std::memcpy(tile + 2 * index, &wide, 2);
    } else {
        tile[index] = w;
    }
}

}  // namespace detail
}  // namespace qtk
