// float32 GEMM micro-kernel, 6 output channels x 16 pixels, AVX2 + FMA (gemm_float32.h): 12 ymm
// accumulators, per k two pixel vectors and 6 broadcast weights (15 of the 16 registers).
#include <immintrin.h>

#include "../contracts/gemm_float32.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kMr = 6;

// All ones in lanes [0, count), for maskload / maskstore.
__m256i first_lanes(int64_t count) {
    const __m256i vindex = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int lanes = int(count < 0 ? 0 : count > 8 ? 8 : count);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), vindex);
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

// kTail: fewer than 16 columns, read and written through masks. R >= rows: the rows summed (a
// linear layer at batch 1 has one).
template <bool kTail, int R, typename Rows>
void gemm_6x16(int64_t k_count, const float* a, const float* b, Rows rows_of_b, const float* bias,
               float lo, float hi, int64_t rows, int64_t cols, float* c, int64_t c_stride) {
    const __m256i mask0 = first_lanes(cols), mask1 = first_lanes(cols - 8);
    __m256 vacc[R][2];
    if (bias != nullptr) {
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
            vacc[r][0] = vacc[r][1] = _mm256_set1_ps(bias[r]);
        }
    } else {  // rows past `rows` start from row 0's, never stored
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
            const float* cr = c + (r < rows ? r : 0) * c_stride;
            vacc[r][0] = _mm256_maskload_ps(cr, mask0);
            vacc[r][1] = _mm256_maskload_ps(cr + 8, mask1);
        }
    }
    for (int64_t k = 0; k < k_count; ++k, a += kMr) {
        const float* bk = rows_of_b.row(b, k);
        const __m256 vb0 = kTail ? _mm256_maskload_ps(bk, mask0) : _mm256_loadu_ps(bk);
        const __m256 vb1 = kTail ? _mm256_maskload_ps(bk + 8, mask1) : _mm256_loadu_ps(bk + 8);
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
            const __m256 va = _mm256_broadcast_ss(a + r);
            vacc[r][0] = _mm256_fmadd_ps(va, vb0, vacc[r][0]);
            vacc[r][1] = _mm256_fmadd_ps(va, vb1, vacc[r][1]);
        }
    }
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
        if (r < rows) {
            const __m256 vy0 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, vacc[r][0]));
            const __m256 vy1 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, vacc[r][1]));
            if (kTail) {  // vmaskmovps stores are slow on AMD: only where they are needed
                _mm256_maskstore_ps(c + r * c_stride, mask0, vy0);
                _mm256_maskstore_ps(c + r * c_stride + 8, mask1, vy1);
            } else {
                _mm256_storeu_ps(c + r * c_stride, vy0);
                _mm256_storeu_ps(c + r * c_stride + 8, vy1);
            }
        }
    }
}

template <int R, typename Rows>
void gemm_rows(int64_t k_count, const float* a, const float* b, Rows rows_of_b, const float* bias,
               float lo, float hi, int64_t rows, int64_t cols, float* c, int64_t c_stride) {
    (cols < 16 ? gemm_6x16<true, R, Rows> : gemm_6x16<false, R, Rows>)(
        k_count, a, b, rows_of_b, bias, lo, hi, rows, cols, c, c_stride);
}

template <typename Rows>
void gemm_6x16_avx2(int64_t k_count, const float* a, const float* b, Rows rows_of_b,
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
    gemm_6x16_avx2(k_count, a, b, OffsetRows{b_offsets}, bias, lo, hi, rows, cols, c, c_stride);
}

void run_strided(int64_t k_count, const float* a, const float* b, int64_t b_stride,
                 const float* bias, float lo, float hi, int64_t rows, int64_t cols, float* c,
                 int64_t c_stride) {
    gemm_6x16_avx2(k_count, a, b, StridedRows{b_stride}, bias, lo, hi, rows, cols, c, c_stride);
}

}  // namespace

extern const Float32GemmUkernel kFloat32Gemm6x16Avx2 = {kMr, 16, run, run_strided};

}  // namespace detail
}  // namespace qtk
