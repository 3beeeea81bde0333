// float32 GEMM micro-kernel, 8 output channels x 32 pixels, AVX-512 (gemm_float32.h): 16 zmm
// accumulators, per k two pixel vectors and 8 broadcast weights. It runs at the FMA peak from L1
// (measured on Zen 4, where 512-bit FMAs are double-pumped and 12x32 or 6x64 tiles are no faster).
#include "avx512_intrinsics.h"

#include "gemm_float32.h"

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

// kTail: fewer than 32 columns, read and written through masks.
template <bool kTail, typename Rows>
void gemm_8x32(int64_t k_count, const float* a, const float* b, Rows rows_of_b, const float* bias,
               float lo, float hi, int64_t rows, int64_t cols, float* c, int64_t c_stride) {
    const __mmask16 mask0 = first_lanes(cols), mask1 = first_lanes(cols - 16);
    __m512 vacc[kMr][2];
    if (bias != nullptr) {
#pragma GCC unroll 8
        for (int r = 0; r < kMr; ++r) {
            vacc[r][0] = vacc[r][1] = _mm512_set1_ps(bias[r]);
        }
    } else {  // rows past `rows` start from zero, never read
#pragma GCC unroll 8
        for (int r = 0; r < kMr; ++r) {
            const float* cr = c + (r < rows ? r : 0) * c_stride;
            vacc[r][0] = _mm512_maskz_loadu_ps(mask0, cr);
            vacc[r][1] = _mm512_maskz_loadu_ps(mask1, cr + 16);
        }
    }
    for (int64_t k = 0; k < k_count; ++k, a += kMr) {
        const float* bk = rows_of_b.row(b, k);
        const __m512 vb0 = kTail ? _mm512_maskz_loadu_ps(mask0, bk) : _mm512_loadu_ps(bk);
        const __m512 vb1 = kTail ? _mm512_maskz_loadu_ps(mask1, bk + 16) : _mm512_loadu_ps(bk + 16);
#pragma GCC unroll 8
        for (int r = 0; r < kMr; ++r) {
            const __m512 va = _mm512_set1_ps(a[r]);
            vacc[r][0] = _mm512_fmadd_ps(va, vb0, vacc[r][0]);
            vacc[r][1] = _mm512_fmadd_ps(va, vb1, vacc[r][1]);
        }
    }
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
        if (r < rows) {
            const __m512 vy0 = _mm512_min_ps(vhi, _mm512_max_ps(vlo, vacc[r][0]));
            const __m512 vy1 = _mm512_min_ps(vhi, _mm512_max_ps(vlo, vacc[r][1]));
            _mm512_mask_storeu_ps(c + r * c_stride, mask0, vy0);
            _mm512_mask_storeu_ps(c + r * c_stride + 16, mask1, vy1);
        }
    }
}

template <typename Rows>
void gemm_8x32_avx512(int64_t k_count, const float* a, const float* b, Rows rows_of_b,
                      const float* bias, float lo, float hi, int64_t rows, int64_t cols, float* c,
                      int64_t c_stride) {
    (cols < 32 ? gemm_8x32<true, Rows> : gemm_8x32<false, Rows>)(k_count, a, b, rows_of_b, bias,
                                                                 lo, hi, rows, cols, c, c_stride);
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

}  // namespace

extern const Float32GemmUkernel kFloat32Gemm8x32Avx512 = {kMr, 32, run, run_strided};

}  // namespace detail
}  // namespace qtk
