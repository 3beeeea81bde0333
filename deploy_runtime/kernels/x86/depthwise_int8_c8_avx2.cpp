// int8 depthwise conv2d micro-kernels, 8 channels per vector, AVX2 (depthwise_int8_channels.h):
// vpmaddwd multiplies x by the (w, 0) pair and adds it into an int32 lane without saturation.
#include <immintrin.h>

#include <cstring>

#include "../contracts/depthwise_int8_channels.h"

namespace qtk {
namespace detail {
namespace {

// 8 channel rows of 16 int8 columns -> per column the 8 channels, int32, in blocks of 16 columns:
// an 8x16 byte transpose (unpack networks) before the sign extension. AVX2 has no masked byte
// loads: a partial last block is copied to a zeroed buffer first.
void transpose_in_avx2(const int8_t* const* channel_rows, int64_t count, int32_t* row) {
    for (int64_t j = 0; j < count; j += 16) {
        __m128i vch[8];
        for (int c = 0; c < 8; ++c) {
            if (channel_rows[c] == nullptr) {
                vch[c] = _mm_setzero_si128();
            } else if (count - j >= 16) {
                vch[c] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(channel_rows[c] + j));
            } else {
                alignas(16) int8_t tail[16] = {};
                std::memcpy(tail, channel_rows[c] + j, size_t(count - j));
                vch[c] = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
            }
        }
        // Channel pairs, quads, then octets: 8 bytes of vcolumns[q] = one column's 8 channels.
        __m128i vpairs[8], vquads[8];
        for (int c = 0; c < 8; c += 2) {
            vpairs[c] = _mm_unpacklo_epi8(vch[c], vch[c + 1]);      // columns 0-7
            vpairs[c + 1] = _mm_unpackhi_epi8(vch[c], vch[c + 1]);  // columns 8-15
        }
        for (int h = 0; h < 2; ++h) {  // channels 0-3, 4-7
            const __m128i* vp = vpairs + 4 * h;
            vquads[4 * h + 0] = _mm_unpacklo_epi16(vp[0], vp[2]);  // columns 0-3
            vquads[4 * h + 1] = _mm_unpackhi_epi16(vp[0], vp[2]);  // 4-7
            vquads[4 * h + 2] = _mm_unpacklo_epi16(vp[1], vp[3]);  // 8-11
            vquads[4 * h + 3] = _mm_unpackhi_epi16(vp[1], vp[3]);  // 12-15
        }
        for (int m = 0; m < 4; ++m) {  // columns 4 m .. 4 m + 3
            const __m128i vlo = _mm_unpacklo_epi32(vquads[m], vquads[4 + m]);  // 4 m, 4 m + 1
            const __m128i vhi = _mm_unpackhi_epi32(vquads[m], vquads[4 + m]);  // 4 m + 2, + 3
            int32_t* dst = row + 8 * (j + 4 * m);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_cvtepi8_epi32(vlo));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8),
                                _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(vlo, vlo)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16), _mm256_cvtepi8_epi32(vhi));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 24),
                                _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(vhi, vhi)));
        }
    }
}

template <int K, int S>
void depthwise_c8_row_avx2(const int32_t* const* rows, const int32_t* weights, int64_t count,
                           int32_t* acc) {
    constexpr int U = 4;  // output pixels per step: independent chains
    int64_t o = 0;
    for (; o + U <= count; o += U) {
        __m256i vacc[U];
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) {
            vacc[u] = _mm256_setzero_si256();
        }
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ++ky) {
            const int32_t* r = rows[ky] + 8 * S * o;
#pragma GCC unroll 5
            for (int kx = 0; kx < K; ++kx) {
                const __m256i vw = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(weights + 8 * (K * ky + kx)));
#pragma GCC unroll 4
                for (int u = 0; u < U; ++u) {
                    const __m256i vx =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 8 * (S * u + kx)));
                    vacc[u] = _mm256_add_epi32(vacc[u], _mm256_madd_epi16(vx, vw));
                }
            }
        }
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + 8 * (o + u)), vacc[u]);
        }
    }
    for (; o < count; ++o) {
        __m256i vacc = _mm256_setzero_si256();
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ++ky) {
#pragma GCC unroll 5
            for (int kx = 0; kx < K; ++kx) {
                const __m256i vw = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(weights + 8 * (K * ky + kx)));
                const __m256i vx = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(rows[ky] + 8 * (S * o + kx)));
                vacc = _mm256_add_epi32(vacc, _mm256_madd_epi16(vx, vw));
            }
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + 8 * o), vacc);
    }
}

// 8x8 int32 transpose: unpack 32- and 64-bit elements within 128-bit lanes, then swap lanes.
void transpose_out_avx2(const int32_t* acc, int64_t stride, int32_t* planes) {
    __m256i vr[8], vt[8];
    for (int i = 0; i < 8; ++i) {
        vr[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + 8 * i));
    }
    for (int i = 0; i < 8; i += 2) {
        vt[i] = _mm256_unpacklo_epi32(vr[i], vr[i + 1]);
        vt[i + 1] = _mm256_unpackhi_epi32(vr[i], vr[i + 1]);
    }
    // vr[4 i + q], lane l: column 4 l + q of rows 4 i .. 4 i + 3.
    for (int i = 0; i < 8; i += 4) {
        vr[i] = _mm256_unpacklo_epi64(vt[i], vt[i + 2]);
        vr[i + 1] = _mm256_unpackhi_epi64(vt[i], vt[i + 2]);
        vr[i + 2] = _mm256_unpacklo_epi64(vt[i + 1], vt[i + 3]);
        vr[i + 3] = _mm256_unpackhi_epi64(vt[i + 1], vt[i + 3]);
    }
    for (int q = 0; q < 4; ++q) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(planes + stride * q),
                            _mm256_permute2x128_si256(vr[q], vr[4 + q], 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(planes + stride * (4 + q)),
                            _mm256_permute2x128_si256(vr[q], vr[4 + q], 0x31));
    }
}

}  // namespace

extern const Int8DepthwiseChannelsUkernel kInt8DepthwiseC8Avx2 = {
    8,
    transpose_in_avx2,
    {{depthwise_c8_row_avx2<3, 1>, depthwise_c8_row_avx2<3, 2>},
     {depthwise_c8_row_avx2<5, 1>, depthwise_c8_row_avx2<5, 2>}},
    transpose_out_avx2};

}  // namespace detail
}  // namespace qtk
