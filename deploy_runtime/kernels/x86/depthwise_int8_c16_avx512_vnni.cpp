// int8 depthwise conv2d micro-kernels, 16 channels per vector, AVX-512 VNNI
// (depthwise_int8_channels.h):
// vpdpwssd multiplies x by the (w, 0) pair and adds it to an int32 lane without saturation.
#include "avx512_intrinsics.h"

#include "depthwise_int8_channels.h"

namespace qtk {
namespace detail {
namespace {

// 16 channel rows of 16 int8 columns -> per column the 16 channels, int32, in blocks of 16 columns:
// a 16x16 byte transpose (unpack networks within 128-bit lanes, then one vpermd) before the
// sign extension, which reads the transposed bytes from a small staging array.
void transpose_in_avx512(const int8_t* const* channel_rows, int64_t count, int32_t* row) {
    const __m512i vquad_transpose =
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    alignas(64) int8_t staged[16 * 16];
    for (int64_t j = 0; j < count; j += 16) {
        const __mmask16 mask =
            count - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - j)) - 1);
        __m128i vch[16];
        for (int c = 0; c < 16; ++c) {
            vch[c] = channel_rows[c] == nullptr ? _mm_setzero_si128()
                                                : _mm_maskz_loadu_epi8(mask, channel_rows[c] + j);
        }
        // vr[i]: 128-bit lane l holds channel 4 l + i.
        __m512i vr[4];
        for (int i = 0; i < 4; ++i) {
            vr[i] = _mm512_castsi128_si512(vch[i]);
            vr[i] = _mm512_inserti32x4(vr[i], vch[4 + i], 1);
            vr[i] = _mm512_inserti32x4(vr[i], vch[8 + i], 2);
            vr[i] = _mm512_inserti32x4(vr[i], vch[12 + i], 3);
        }
        // Byte pairs, then quads: dword q of lane l = channels 4 l .. 4 l + 3 of one column.
        const __m512i vt0 = _mm512_unpacklo_epi8(vr[0], vr[1]);  // columns 0-7
        const __m512i vt1 = _mm512_unpackhi_epi8(vr[0], vr[1]);  // columns 8-15
        const __m512i vt2 = _mm512_unpacklo_epi8(vr[2], vr[3]);
        const __m512i vt3 = _mm512_unpackhi_epi8(vr[2], vr[3]);
        const __m512i vquads[4] = {
            _mm512_unpacklo_epi16(vt0, vt2), _mm512_unpackhi_epi16(vt0, vt2),  // columns 0-3, 4-7
            _mm512_unpacklo_epi16(vt1, vt3), _mm512_unpackhi_epi16(vt1, vt3)};  // 8-11, 12-15
        // Lane q of vcolumns m: column 4 m + q, channels 0 .. 15.
        for (int m = 0; m < 4; ++m) {
            _mm512_store_si512(staged + 64 * m, _mm512_permutexvar_epi32(vquad_transpose,
                                                                         vquads[m]));
        }
        for (int q = 0; q < 16; ++q) {
            const __m128i vcolumn =
                _mm_load_si128(reinterpret_cast<const __m128i*>(staged + 16 * q));
            _mm512_storeu_si512(row + 16 * (j + q), _mm512_cvtepi8_epi32(vcolumn));
        }
    }
}

template <int K, int S>
void depthwise_c16_row_avx512_vnni(const int32_t* const* rows, const int32_t* weights,
                                   int64_t count, int32_t* acc) {
    constexpr int U = K == 3 ? 6 : 3;  // output pixels per step: independent vpdpwssd chains
    __m512i vw[K * K];
#pragma GCC unroll 25
    for (int t = 0; t < K * K; ++t) {
        vw[t] = _mm512_loadu_si512(weights + 16 * t);
    }
    int64_t o = 0;
    for (; o + U <= count; o += U) {
        __m512i vacc[U];
#pragma GCC unroll 6
        for (int u = 0; u < U; ++u) {
            vacc[u] = _mm512_setzero_si512();
        }
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ++ky) {
            const int32_t* r = rows[ky] + 16 * S * o;
#pragma GCC unroll 5
            for (int kx = 0; kx < K; ++kx) {
#pragma GCC unroll 6
                for (int u = 0; u < U; ++u) {
                    vacc[u] = _mm512_dpwssd_epi32(
                        vacc[u], _mm512_loadu_si512(r + 16 * (S * u + kx)), vw[K * ky + kx]);
                }
            }
        }
#pragma GCC unroll 6
        for (int u = 0; u < U; ++u) {
            _mm512_storeu_si512(acc + 16 * (o + u), vacc[u]);
        }
    }
    for (; o < count; ++o) {
        __m512i vacc = _mm512_setzero_si512();
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ++ky) {
#pragma GCC unroll 5
            for (int kx = 0; kx < K; ++kx) {
                vacc = _mm512_dpwssd_epi32(
                    vacc, _mm512_loadu_si512(rows[ky] + 16 * (S * o + kx)), vw[K * ky + kx]);
            }
        }
        _mm512_storeu_si512(acc + 16 * o, vacc);
    }
}

// 16x16 int32 transpose: unpack 32- and 64-bit elements within 128-bit lanes, then move lanes.
void transpose_out_avx512(const int32_t* acc, int64_t stride, int32_t* planes) {
    __m512i vr[16], vt[16];
    for (int i = 0; i < 16; ++i) {
        vr[i] = _mm512_loadu_si512(acc + 16 * i);
    }
    for (int i = 0; i < 16; i += 2) {
        vt[i] = _mm512_unpacklo_epi32(vr[i], vr[i + 1]);
        vt[i + 1] = _mm512_unpackhi_epi32(vr[i], vr[i + 1]);
    }
    // vr[4 i + q], lane l: column 4 l + q of rows 4 i .. 4 i + 3.
    for (int i = 0; i < 16; i += 4) {
        vr[i] = _mm512_unpacklo_epi64(vt[i], vt[i + 2]);
        vr[i + 1] = _mm512_unpackhi_epi64(vt[i], vt[i + 2]);
        vr[i + 2] = _mm512_unpacklo_epi64(vt[i + 1], vt[i + 3]);
        vr[i + 3] = _mm512_unpackhi_epi64(vt[i + 1], vt[i + 3]);
    }
    for (int q = 0; q < 4; ++q) {
        const __m512i vlo = _mm512_shuffle_i32x4(vr[q], vr[4 + q], 0x44);    // lanes 0, 1
        const __m512i vhi = _mm512_shuffle_i32x4(vr[q], vr[4 + q], 0xEE);    // lanes 2, 3
        const __m512i vlo2 = _mm512_shuffle_i32x4(vr[8 + q], vr[12 + q], 0x44);
        const __m512i vhi2 = _mm512_shuffle_i32x4(vr[8 + q], vr[12 + q], 0xEE);
        _mm512_storeu_si512(planes + stride * q, _mm512_shuffle_i32x4(vlo, vlo2, 0x88));
        _mm512_storeu_si512(planes + stride * (4 + q), _mm512_shuffle_i32x4(vlo, vlo2, 0xDD));
        _mm512_storeu_si512(planes + stride * (8 + q), _mm512_shuffle_i32x4(vhi, vhi2, 0x88));
        _mm512_storeu_si512(planes + stride * (12 + q), _mm512_shuffle_i32x4(vhi, vhi2, 0xDD));
    }
}

}  // namespace

extern const Int8DepthwiseChannelsUkernel kInt8DepthwiseC16Avx512Vnni = {
    16,
    transpose_in_avx512,
    {{depthwise_c16_row_avx512_vnni<3, 1>, depthwise_c16_row_avx512_vnni<3, 2>},
     {depthwise_c16_row_avx512_vnni<5, 1>, depthwise_c16_row_avx512_vnni<5, 2>}},
    transpose_out_avx512};

}  // namespace detail
}  // namespace qtk
