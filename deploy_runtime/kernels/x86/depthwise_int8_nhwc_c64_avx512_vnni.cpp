// int8 depthwise conv2d, channels-last, 64 channels per step, AVX-512 VNNI (depthwise_int8_nhwc.h):
// vpdpbusd takes 4 rows' taps of 16 channels per instruction, and each output pixel's 64
// accumulators are requantized in registers and stored as int8.
#include "avx512_intrinsics.h"

#include "depthwise_int8_nhwc.h"
#include "requantize_int8_avx512.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kChunk = 16;  // output pixels whose input columns are interleaved together

// The requantization of the block's 4 vectors, one form for all (kHigh: the high-half form).
struct Requant64 {
    Int8HighHalf16 high[4];
    Int8Exact16 exact[4];
    __m512i lo8, hi8;
};

// Columns [first, first + count) of the padded input rows into `groups` row groups of 4 vectors
// each, per column: packed[(column groups + g) 4 + q].
template <int K>
void interleave_columns(const DepthwiseNhwcRow& a, int64_t first, int64_t count, __mmask64 mask,
                        __m512i* packed) {
    constexpr int kGroups = (K + 3) / 4;
    const __m512i vflip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i vpad = _mm512_set1_epi8(static_cast<char>(a.zero_point ^ 0x80));
    for (int64_t j = 0; j < count; ++j) {
        const int64_t ix = first + j - a.pad_w;
        const bool inside = ix >= 0 && ix < a.in_w;
        __m512i vrow[4 * kGroups];
#pragma GCC unroll 8
        for (int ky = 0; ky < 4 * kGroups; ++ky) {
            if (ky >= K) {
                vrow[ky] = _mm512_setzero_si512();  // weighs 0
            } else if (inside) {
                vrow[ky] = _mm512_xor_si512(
                    _mm512_maskz_loadu_epi8(mask, a.rows[ky] + a.pixel_strides[ky] * ix), vflip);
            } else {
                vrow[ky] = vpad;
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < kGroups; ++g) {
            const __m512i* r = vrow + 4 * g;
            const __m512i v01lo = _mm512_unpacklo_epi8(r[0], r[1]);
            const __m512i v01hi = _mm512_unpackhi_epi8(r[0], r[1]);
            const __m512i v23lo = _mm512_unpacklo_epi8(r[2], r[3]);
            const __m512i v23hi = _mm512_unpackhi_epi8(r[2], r[3]);
            __m512i* out = packed + (j * kGroups + g) * 4;
            out[0] = _mm512_unpacklo_epi16(v01lo, v23lo);
            out[1] = _mm512_unpackhi_epi16(v01lo, v23lo);
            out[2] = _mm512_unpacklo_epi16(v01hi, v23hi);
            out[3] = _mm512_unpackhi_epi16(v01hi, v23hi);
        }
    }
}

// U output pixels from their interleaved columns (packed: the first one's), requantized into
// y, y + y_stride, ...: each column's vectors are loaded once for every (pixel, kx) that reads it.
template <int K, int S, int U, bool kHigh>
[[gnu::always_inline]] inline void pixels(const __m512i* packed, const __m512i* vw,
                                          const __m512i* vinit, const Requant64& rq,
                                          __mmask64 mask, int8_t* y, int64_t y_stride) {
    constexpr int kGroups = (K + 3) / 4;
    __m512i vacc[U][4];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
            vacc[u][q] = vinit[q];
        }
    }
#pragma GCC unroll 16
    for (int c = 0; c < S * (U - 1) + K; ++c) {
#pragma GCC unroll 2
        for (int g = 0; g < kGroups; ++g) {
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const __m512i vx = _mm512_load_si512(packed + (c * kGroups + g) * 4 + q);
#pragma GCC unroll 4
                for (int u = 0; u < U; ++u) {
                    const int kx = c - S * u;
                    if (kx >= 0 && kx < K) {
                        vacc[u][q] =
                            _mm512_dpbusd_epi32(vacc[u][q], vx, vw[(g * K + kx) * 4 + q]);
                    }
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
        __m512i vy[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
            vy[q] = kHigh ? int8_scale16_high_half(vacc[u][q], rq.high[q])
                          : int8_requantize16_exact(vacc[u][q], rq.exact[q]);
        }
        // The packs put the channels back in order (depthwise_int8_nhwc.h); the clamp to
        // [lo, hi] within int8 follows the saturation, so it is exact.
        const __m512i vbytes = int8_pack4x16(vy[0], vy[1], vy[2], vy[3]);
        _mm512_mask_storeu_epi8(y + u * y_stride, mask,
                                _mm512_min_epi8(_mm512_max_epi8(vbytes, rq.lo8), rq.hi8));
    }
}

template <int K, int S, bool kHigh>
void row_blocks(const DepthwiseNhwcRow& a, const Requant64& rq, __mmask64 mask) {
    constexpr int kGroups = (K + 3) / 4;
    constexpr int kU = 4;
    __m512i vw[kGroups * K * 4], vinit[4];
    for (int i = 0; i < kGroups * K * 4; ++i) {
        vw[i] = _mm512_loadu_si512(a.weights + 64 * i);
    }
    for (int q = 0; q < 4; ++q) {
        vinit[q] = _mm512_loadu_si512(a.init + 16 * q);
    }
    __m512i packed[(S * (kChunk - 1) + K) * kGroups * 4];
    for (int64_t o0 = 0; o0 < a.out_w; o0 += kChunk) {
        const int64_t n = a.out_w - o0 < kChunk ? a.out_w - o0 : kChunk;
        interleave_columns<K>(a, S * o0, S * (n - 1) + K, mask, packed);
        int8_t* y = a.y + o0 * a.y_stride;
        int64_t u = 0;
        for (; u + kU <= n; u += kU) {
            pixels<K, S, kU, kHigh>(packed + S * u * kGroups * 4, vw, vinit, rq, mask,
                                    y + u * a.y_stride, a.y_stride);
        }
        const __m512i* rest = packed + S * u * kGroups * 4;
        y += u * a.y_stride;
        switch (n - u) {
            case 3: pixels<K, S, 3, kHigh>(rest, vw, vinit, rq, mask, y, a.y_stride); break;
            case 2: pixels<K, S, 2, kHigh>(rest, vw, vinit, rq, mask, y, a.y_stride); break;
            case 1: pixels<K, S, 1, kHigh>(rest, vw, vinit, rq, mask, y, a.y_stride); break;
            default: break;
        }
    }
}

template <int K, int S>
void depthwise_nhwc_row_avx512_vnni(const DepthwiseNhwcRow& a) {
    const __mmask64 mask =
        a.valid >= 64 ? ~__mmask64{0} : (__mmask64{1} << a.valid) - 1;
    Requant64 rq;
    bool high = true;
    for (int q = 0; q < 4 && high; ++q) {
        high = int8_high_half16(a.multiplier + 16 * q, a.shift + 16 * q, 0xFFFF, *a.out,
                                &rq.high[q]);
    }
    rq.lo8 = _mm512_set1_epi8(static_cast<char>(a.out->lo));
    rq.hi8 = _mm512_set1_epi8(static_cast<char>(a.out->hi));
    if (high) {
        row_blocks<K, S, true>(a, rq, mask);
        return;
    }
    for (int q = 0; q < 4; ++q) {
        rq.exact[q] = int8_exact16(_mm512_loadu_si512(a.multiplier + 16 * q),
                                   _mm512_loadu_si512(a.shift + 16 * q), *a.out);
    }
    row_blocks<K, S, false>(a, rq, mask);
}

}  // namespace

extern const Int8DepthwiseNhwcUkernel kInt8DepthwiseNhwcC64Avx512Vnni = {
    {{depthwise_nhwc_row_avx512_vnni<3, 1>, depthwise_nhwc_row_avx512_vnni<3, 2>},
     {depthwise_nhwc_row_avx512_vnni<5, 1>, depthwise_nhwc_row_avx512_vnni<5, 2>}}};

}  // namespace detail
}  // namespace qtk
