// float32 GEMM micro-kernel, 8 output channels x 32 pixels, AVX-512 (gemm_float32.h): 16 zmm
// accumulators, per k two pixel vectors (one for a tail of 16 or fewer) and 8 broadcast weights.
// It runs at the FMA peak from L1 (measured on Zen 4, where 512-bit FMAs are double-pumped and
// 12x32 or 6x64 tiles are no faster).
#include "avx512_intrinsics.h"

#include "../contracts/gemm_float32.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kMr = 8;

__mmask16 first_lanes(int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF)
           : count <= 0 ? __mmask16(0)
                        : __mmask16((1u << count) - 1);
}

// Where B row k starts: at a tap's offset (run) or a packed stride (run_strided).
struct OffsetRows {
    const int64_t* offsets;
    const float* row(const float* b, int64_t k) const { return b + offsets[k]; }
};
struct StridedRows {
    int64_t stride;
    const float* row(const float* b, int64_t k) const { return b + k * stride; }
};

// kTail: fewer than 32 columns, read and written through masks. V: the vectors of 16 columns
// summed, 1 where cols <= 16 (a plane's last columns: 14x14 planes end in 4, which two vectors
// would spend 32 columns' multiply-adds on). R >= rows: the rows summed (a linear layer at batch 1
// has one, which 8 would spend 8 times its multiply-adds on and bound by their throughput).
template <bool kTail, int V, int R, typename Rows>
void gemm_8x32(int64_t k_count, const float* a, const float* b, Rows rows_of_b, const float* bias,
               float lo, float hi, int64_t rows, int64_t cols, float* c, int64_t c_stride) {
    const __mmask16 mask[2] = {first_lanes(cols), first_lanes(cols - 16)};
    __m512 vacc[R][V];
    if (bias != nullptr) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
            for (int v = 0; v < V; ++v) {
                vacc[r][v] = _mm512_set1_ps(bias[r]);
            }
        }
    } else {  // rows past `rows` start from row 0's, never stored
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const float* cr = c + (r < rows ? r : 0) * c_stride;
#pragma GCC unroll 2
            for (int v = 0; v < V; ++v) {
                vacc[r][v] = _mm512_maskz_loadu_ps(mask[v], cr + 16 * v);
            }
        }
    }
    for (int64_t k = 0; k < k_count; ++k, a += kMr) {
        const float* bk = rows_of_b.row(b, k);
        __m512 vb[V];
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) {
            vb[v] = kTail ? _mm512_maskz_loadu_ps(mask[v], bk + 16 * v)
                          : _mm512_loadu_ps(bk + 16 * v);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m512 va = _mm512_set1_ps(a[r]);
#pragma GCC unroll 2
            for (int v = 0; v < V; ++v) {
                vacc[r][v] = _mm512_fmadd_ps(va, vb[v], vacc[r][v]);
            }
        }
    }
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        if (r < rows) {
#pragma GCC unroll 2
            for (int v = 0; v < V; ++v) {
                const __m512 vy = _mm512_min_ps(vhi, _mm512_max_ps(vlo, vacc[r][v]));
                _mm512_mask_storeu_ps(c + r * c_stride + 16 * v, mask[v], vy);
            }
        }
    }
}

template <int R, typename Rows>
void gemm_rows(int64_t k_count, const float* a, const float* b, Rows rows_of_b, const float* bias,
               float lo, float hi, int64_t rows, int64_t cols, float* c, int64_t c_stride) {
    (cols <= 16  ? gemm_8x32<true, 1, R, Rows>
     : cols < 32 ? gemm_8x32<true, 2, R, Rows>
                 : gemm_8x32<false, 2, R, Rows>)(k_count, a, b, rows_of_b, bias, lo, hi, rows,
                                                 cols, c, c_stride);
}

template <typename Rows>
void gemm_8x32_avx512(int64_t k_count, const float* a, const float* b, Rows rows_of_b,
                      const float* bias, float lo, float hi, int64_t rows, int64_t cols, float* c,
                      int64_t c_stride) {
    (rows <= 1   ? gemm_rows<1, Rows>
     : rows <= 2 ? gemm_rows<2, Rows>
     : rows <= 4 ? gemm_rows<4, Rows>
                 : gemm_rows<kMr, Rows>)(k_count, a, b, rows_of_b, bias, lo, hi, rows, cols, c,
                                         c_stride);
}

void run(int64_t k_count, const float* a, const float* b, const int64_t* b_offsets,
         const float* bias, float lo, float hi, int64_t rows, int64_t cols, float* c,
         int64_t c_stride) {
    gemm_8x32_avx512(k_count, a, b, OffsetRows{b_offsets}, bias, lo, hi, rows, cols, c, c_stride);
}

void run_strided(int64_t k_count, const float* a, const float* b, int64_t b_stride,
                 const float* bias, float lo, float hi, int64_t rows, int64_t cols, float* c,
                 int64_t c_stride) {
    gemm_8x32_avx512(k_count, a, b, StridedRows{b_stride}, bias, lo, hi, rows, cols, c, c_stride);
}

// 7 pixels x 32 output channels: 14 accumulators. 7 pixels a tile cover the planes of 7x7, 14x14,
// 28x28 and 56x56 outputs without a partial tile. A pixel tile's rows past `pixels` and channel
// tiles past `oc_tiles` repeat the last real one and are not stored.
constexpr int kPixelRows = 7;
static_assert(kPixelRows < 8, "run_pixels transposes its rows with one zero row in 8x8 blocks");
// Floats ahead of each weight tile's read that it prefetches (32 k): a panel's weights come from
// L3 on its first pixel tile, where 4 streams a step outrun the hardware prefetcher (mobilenet_v2's
// 1x1 convs on 7x7 planes: 4-6% less time at K 320 to 960, 1% at K 160; Zen 4).
constexpr int kWeightsAhead = 256;

// 8 floats at lo, then 8 at hi (insertf64x4: AVX-512 F, where insertf32x8 needs DQ).
__m512 join(const float* lo, const float* hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(
                                                   _mm256_loadu_ps(lo))),
                                               _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
}

// Rows 0 .. 7 of 8 floats in, columns out: the 8x8 transpose of AVX.
void transpose8x8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

void run_pixels(int64_t k_count, const float* w, int64_t w_tile_stride, int64_t oc_tiles,
                const float* x, const int64_t* x_offsets, const int64_t* pixel_offsets,
                int64_t pixels, const float* bias, float lo, float hi, int64_t channels, float* c,
                int64_t c_stride) {
    const float* vx[kPixelRows];
#pragma GCC unroll 7
    for (int p = 0; p < kPixelRows; ++p) {
        vx[p] = x + pixel_offsets[p < pixels ? p : pixels - 1];
    }
    const float* w_tile[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
        w_tile[t] = w + (t < oc_tiles ? t : oc_tiles - 1) * w_tile_stride;
    }
    const __m512 vbias0 = _mm512_loadu_ps(bias), vbias1 = _mm512_loadu_ps(bias + 16);
    __m512 vacc[kPixelRows][2];
#pragma GCC unroll 7
    for (int p = 0; p < kPixelRows; ++p) {
        vacc[p][0] = vbias0;
        vacc[p][1] = vbias1;
    }
    for (int64_t k = 0; k < k_count; ++k) {
        const int64_t offset = x_offsets[k];
        const __m512 vw0 = join(w_tile[0], w_tile[1]), vw1 = join(w_tile[2], w_tile[3]);
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
            _mm_prefetch(reinterpret_cast<const char*>(w_tile[t] + kWeightsAhead), _MM_HINT_T0);
            w_tile[t] += kMr;
        }
#pragma GCC unroll 7
        for (int p = 0; p < kPixelRows; ++p) {
            const __m512 vxp = _mm512_set1_ps(vx[p][offset]);
            vacc[p][0] = _mm512_fmadd_ps(vxp, vw0, vacc[p][0]);
            vacc[p][1] = _mm512_fmadd_ps(vxp, vw1, vacc[p][1]);
        }
    }
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 7
    for (int p = 0; p < kPixelRows; ++p) {
        vacc[p][0] = _mm512_min_ps(vhi, _mm512_max_ps(vlo, vacc[p][0]));
        vacc[p][1] = _mm512_min_ps(vhi, _mm512_max_ps(vlo, vacc[p][1]));
    }
    // Each group of 8 channels' pixels transposed in registers into 8 rows of c, `pixels` floats
    // each (scalar copies of a 7x32 tile took a tenth of a 7x7 layer's time at K 160; Zen 4).
    const __mmask8 row_mask = __mmask8((1u << pixels) - 1);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
        if (8 * g >= channels) {
            break;
        }
        __m256 r[8];
#pragma GCC unroll 7
        for (int p = 0; p < kPixelRows; ++p) {
            r[p] = g % 2 == 0 ? _mm512_castps512_ps256(vacc[p][g / 2])
                              : _mm256_castpd_ps(_mm512_extractf64x4_pd(
                                    _mm512_castps_pd(vacc[p][g / 2]), 1));
        }
        r[7] = _mm256_setzero_ps();
        transpose8x8(r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            if (8 * g + j < channels) {
                _mm256_mask_storeu_ps(c + (8 * g + j) * c_stride, row_mask, r[j]);
            }
        }
    }
}

}  // namespace

extern const Float32GemmUkernel kFloat32Gemm8x32Avx512 = {kMr,        32,         run,
                                                          run_strided, run_pixels, kPixelRows};

}  // namespace detail
}  // namespace qtk
