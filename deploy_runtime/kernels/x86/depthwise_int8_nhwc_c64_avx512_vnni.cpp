// int8 depthwise conv2d, channels-last, 64 channels per step, AVX-512 VNNI (depthwise_int8_nhwc.h):
// vpdpbusd takes 4 rows' taps of 16 channels per instruction, and each output pixel's 64
// accumulators are requantized in registers and stored as int8.
#include "avx512_intrinsics.h"

#include "../contracts/depthwise_int8_nhwc.h"
#include "requantize_int8_avx512.h"

namespace qtk {
namespace detail {
namespace {

// The requantization of the block's 4 vectors, one form for all (kHigh: the high-half form).
struct Requant64 {
    Int8HighHalf16 high[4];
    Int8Exact16 exact[4];
    __m512i lo8, hi8;
};

// Columns [first, first + count) of the padded input rows into G quads of 4 vectors each, per
// column: packed[(column G + g) 4 + q]; rows from kUsed on weigh 0 and read as 0. kPairs: the
// vectors' 128-bit lanes 2 and 3 hold column + a.stride of the block's 32 channels, lanes 0 and 1
// the column's.
template <int G, int kUsed, bool kPairs>
void interleave_columns(const DepthwiseNhwcRows& a, int64_t first, int64_t count, __mmask64 mask,
                        __m512i* packed) {
    const __m512i vflip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i vpad = _mm512_set1_epi8(static_cast<char>(a.zero_point));
    const auto inside = [&](int64_t ix) { return ix >= 0 && ix < a.in_w; };
    for (int64_t j = 0; j < count; ++j) {
        const int64_t ix = first + j - a.pad_w;
        __m512i vrow[4 * G];
#pragma GCC unroll 8
        for (int i = 0; i < 4 * G; ++i) {
            if (i >= kUsed) {
                vrow[i] = _mm512_setzero_si512();
                continue;
            }
            const int8_t* row = a.rows[i];
            const int64_t step = a.pixel_strides[i];
            __m512i vx;
            if (kPairs) {
                const __m256i vpad256 = _mm512_castsi512_si256(vpad);
                const __mmask32 mask32 = __mmask32(mask);
                const __m256i vfirst =
                    inside(ix) ? _mm256_maskz_loadu_epi8(mask32, row + step * ix) : vpad256;
                const int64_t ix2 = ix + a.stride;
                const __m256i vsecond =
                    inside(ix2) ? _mm256_maskz_loadu_epi8(mask32, row + step * ix2) : vpad256;
                vx = _mm512_inserti64x4(_mm512_castsi256_si512(vfirst), vsecond, 1);
            } else {
                vx = inside(ix) ? _mm512_maskz_loadu_epi8(mask, row + step * ix) : vpad;
            }
            vrow[i] = _mm512_xor_si512(vx, vflip);
        }
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            const __m512i* r = vrow + 4 * g;
            const __m512i v01lo = _mm512_unpacklo_epi8(r[0], r[1]);
            const __m512i v01hi = _mm512_unpackhi_epi8(r[0], r[1]);
            const __m512i v23lo = _mm512_unpacklo_epi8(r[2], r[3]);
            const __m512i v23hi = _mm512_unpackhi_epi8(r[2], r[3]);
            __m512i* out = packed + (j * G + g) * 4;
            out[0] = _mm512_unpacklo_epi16(v01lo, v23lo);
            out[1] = _mm512_unpackhi_epi16(v01lo, v23lo);
            out[2] = _mm512_unpacklo_epi16(v01hi, v23hi);
            out[3] = _mm512_unpackhi_epi16(v01hi, v23hi);
        }
    }
}

// U steps of output pixels of R rows from their interleaved columns (packed: the first one's;
// step u reads columns S u + kx), requantized into y + r y_row_stride + u y_stride for r <
// out_rows (kPairs: each step two pixels, the second's bytes from lanes 2 and 3, `pixels` of them
// in all). Each column's vectors are loaded once for every (row, step, kx) that reads them.
template <int K, int S, int R, int G, int U, bool kHigh, bool kPairs>
[[gnu::always_inline]] inline void steps(const DepthwiseNhwcRows& a, const __m512i* packed,
                                         const __m512i* vinit, const Requant64& rq,
                                         __mmask64 mask, int8_t* y, int64_t pixels) {
    const int8_t* weights = a.weights;
    const int64_t y_stride = a.y_stride;
    __m512i vacc[R][U][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) {
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                vacc[r][u][q] = vinit[q];
            }
        }
    }
#pragma GCC unroll 16
    for (int c = 0; c < S * (U - 1) + K; ++c) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const __m512i vx = _mm512_load_si512(packed + (c * G + g) * 4 + q);
#pragma GCC unroll 4
                for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
                    for (int u = 0; u < U; ++u) {
                        const int kx = c - S * u;
                        if (kx >= 0 && kx < K) {
                            const __m512i vw = _mm512_loadu_si512(
                                weights + 64 * (((r * G + g) * K + kx) * 4 + q));
                            vacc[r][u][q] = _mm512_dpbusd_epi32(vacc[r][u][q], vx, vw);
                        }
                    }
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        if (r >= a.out_rows) {
            break;
        }
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) {
            __m512i vy[4];
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                vy[q] = kHigh ? int8_scale16_high_half(vacc[r][u][q], rq.high[q])
                              : int8_requantize16_exact(vacc[r][u][q], rq.exact[q]);
            }
            // The packs put the channels back in order (depthwise_int8_nhwc.h); the clamp to
            // [lo, hi] within int8 follows the saturation, so it is exact.
            const __m512i vbytes = _mm512_min_epi8(
                _mm512_max_epi8(int8_pack4x16(vy[0], vy[1], vy[2], vy[3]), rq.lo8), rq.hi8);
            int8_t* yr = y + r * a.y_row_stride;
            if (kPairs) {
                _mm256_mask_storeu_epi8(yr + 2 * u * y_stride, __mmask32(mask),
                                        _mm512_castsi512_si256(vbytes));
                if (2 * u + 1 < pixels) {
                    _mm256_mask_storeu_epi8(yr + (2 * u + 1) * y_stride, __mmask32(mask),
                                            _mm512_extracti64x4_epi64(vbytes, 1));
                }
            } else {
                _mm512_mask_storeu_epi8(yr + u * y_stride, mask, vbytes);
            }
        }
    }
}

// `count` steps, at most U, by the largest instantiation that fits.
template <int K, int S, int R, int G, int U, bool kHigh, bool kPairs>
[[gnu::always_inline]] inline void steps_upto(int64_t count, const DepthwiseNhwcRows& a,
                                              const __m512i* packed, const __m512i* vinit,
                                              const Requant64& rq, __mmask64 mask, int8_t* y,
                                              int64_t pixels) {
    if constexpr (U > 1) {
        if (count < U) {
            steps_upto<K, S, R, G, U - 1, kHigh, kPairs>(count, a, packed, vinit, rq, mask, y,
                                                         pixels);
            return;
        }
    }
    steps<K, S, R, G, U, kHigh, kPairs>(a, packed, vinit, rq, mask, y, pixels);
}

// The rows in chunks of steps: interleave their columns, then up to U steps at a time, U R 4
// accumulators at most 16. kPairs: a step is two pixels, the columns' stride S = 2 a.stride.
template <int K, int SR, int S, bool kHigh, bool kPairs>
void row_steps(const DepthwiseNhwcRows& a, const Requant64& rq, __mmask64 mask) {
    constexpr int R = int(depthwise_nhwc_rows(K, SR)), G = int(depthwise_nhwc_quads(K, SR));
    constexpr int kU = 4 / R;
    constexpr int64_t kChunk = S >= 4 ? 8 : 16;  // steps whose columns are interleaved together
    constexpr int64_t kPerStep = kPairs ? 2 : 1;
    __m512i vinit[4];
    for (int q = 0; q < 4; ++q) {
        vinit[q] = _mm512_loadu_si512(a.init + 16 * q);
    }
    const int64_t step_count = (a.out_w + kPerStep - 1) / kPerStep;
    __m512i packed[(S * (kChunk - 1) + K) * G * 4];
    for (int64_t o0 = 0; o0 < step_count; o0 += kChunk) {
        const int64_t n = step_count - o0 < kChunk ? step_count - o0 : kChunk;
        interleave_columns<G, SR * (R - 1) + K, kPairs>(a, S * o0, S * (n - 1) + K, mask, packed);
        for (int64_t u = 0; u < n; u += kU) {
            const int64_t pixel = (o0 + u) * kPerStep;
            const __m512i* p = packed + S * u * G * 4;
            int8_t* y = a.y + pixel * a.y_stride;
            steps_upto<K, S, R, G, kU, kHigh, kPairs>(n - u, a, p, vinit, rq, mask, y,
                                                      a.out_w - pixel);
        }
    }
}

template <int K, int S, bool kHigh>
void rows_any(const DepthwiseNhwcRows& a, const Requant64& rq, __mmask64 mask) {
    if (a.pairs) {
        row_steps<K, S, 2 * S, kHigh, true>(a, rq, mask);
    } else {
        row_steps<K, S, S, kHigh, false>(a, rq, mask);
    }
}

template <int K, int S>
void depthwise_nhwc_rows_avx512_vnni(const DepthwiseNhwcRows& a) {
    const __mmask64 mask = a.valid >= 64 ? ~__mmask64{0} : (__mmask64{1} << a.valid) - 1;
    Requant64 rq;
    bool high = true;
    for (int q = 0; q < 4 && high; ++q) {
        high = int8_high_half16(a.multiplier + 16 * q, a.shift + 16 * q, 0xFFFF, *a.out,
                                &rq.high[q]);
    }
    rq.lo8 = _mm512_set1_epi8(static_cast<char>(a.out->lo));
    rq.hi8 = _mm512_set1_epi8(static_cast<char>(a.out->hi));
    if (high) {
        rows_any<K, S, true>(a, rq, mask);
        return;
    }
    for (int q = 0; q < 4; ++q) {
        rq.exact[q] = int8_exact16(_mm512_loadu_si512(a.multiplier + 16 * q),
                                   _mm512_loadu_si512(a.shift + 16 * q), *a.out);
    }
    rows_any<K, S, false>(a, rq, mask);
}

// 16 x 16 bytes at a time: 16 rows of up to 16 bytes (the rest read as 0), a 4-level unpack
// network (bytes, words, dwords, qwords), then up to 16 rows out, every loop unrolled so the tile
// stays in registers (3x faster than rolled). Tiles go down the rows first, so each run of 16
// destination rows is written whole while it is in cache.
void transpose_bytes_avx512(const int8_t* src, int64_t src_stride, int64_t rows, int64_t cols,
                            int8_t* dst, int64_t dst_stride) {
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
        const int64_t tile_cols = cols - c0 < 16 ? cols - c0 : 16;
        const __mmask16 col_mask = __mmask16((1u << tile_cols) - 1);
        for (int64_t r0 = 0; r0 < rows; r0 += 16) {
            const int64_t tile_rows = rows - r0 < 16 ? rows - r0 : 16;
            const __mmask16 row_mask = __mmask16((1u << tile_rows) - 1);
            __m128i v[16], t[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) {
                v[i] = i < tile_rows ? _mm_maskz_loadu_epi8(col_mask,
                                                            src + (r0 + i) * src_stride + c0)
                                     : _mm_setzero_si128();
            }
#pragma GCC unroll 8
            for (int i = 0; i < 16; i += 2) {  // t[i]: columns 0-7 of rows i, i + 1 interleaved
                t[i] = _mm_unpacklo_epi8(v[i], v[i + 1]);
                t[i + 1] = _mm_unpackhi_epi8(v[i], v[i + 1]);
            }
#pragma GCC unroll 4
            for (int i = 0; i < 16; i += 4) {
#pragma GCC unroll 2
                for (int j = 0; j < 2; ++j) {
                    v[i + 2 * j] = _mm_unpacklo_epi16(t[i + j], t[i + j + 2]);
                    v[i + 2 * j + 1] = _mm_unpackhi_epi16(t[i + j], t[i + j + 2]);
                }
            }
#pragma GCC unroll 2
            for (int i = 0; i < 16; i += 8) {
#pragma GCC unroll 4
                for (int j = 0; j < 4; ++j) {
                    t[i + 2 * j] = _mm_unpacklo_epi32(v[i + j], v[i + j + 4]);
                    t[i + 2 * j + 1] = _mm_unpackhi_epi32(v[i + j], v[i + j + 4]);
                }
            }
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
                v[2 * j] = _mm_unpacklo_epi64(t[j], t[j + 8]);
                v[2 * j + 1] = _mm_unpackhi_epi64(t[j], t[j + 8]);
            }
#pragma GCC unroll 16
            for (int c = 0; c < 16; ++c) {
                if (c < tile_cols) {
                    _mm_mask_storeu_epi8(dst + (c0 + c) * dst_stride + r0, row_mask, v[c]);
                }
            }
        }
    }
}

}  // namespace

extern const Int8DepthwiseNhwcUkernel kInt8DepthwiseNhwcC64Avx512Vnni = {
    {{depthwise_nhwc_rows_avx512_vnni<3, 1>, depthwise_nhwc_rows_avx512_vnni<3, 2>},
     {depthwise_nhwc_rows_avx512_vnni<5, 1>, depthwise_nhwc_rows_avx512_vnni<5, 2>}},
    transpose_bytes_avx512};

}  // namespace detail
}  // namespace qtk
