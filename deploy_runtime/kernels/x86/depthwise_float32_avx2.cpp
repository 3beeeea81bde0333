// float32 depthwise conv2d row micro-kernel, AVX2 + FMA (depthwise_float32.h): 32 outputs per pass
// in four accumulators, so each tap's pointer and weight are loaded once per four vectors; then 8
// at a time, the last through a mask.
#include <immintrin.h>

#include "../contracts/depthwise_float32.h"

namespace qtk {
namespace detail {
namespace {

// All ones in lanes [0, count), for maskload / maskstore.
__m256i first_lanes(int64_t count) {
    const __m256i vindex = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(count > 8 ? 8 : count)), vindex);
}

void depthwise_row_avx2(const float* const* rows, const float* weights, int64_t taps, float bias,
                        float lo, float hi, int64_t count, float* out) {
    const __m256 vbias = _mm256_set1_ps(bias);
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const auto bounded = [&](__m256 v) { return _mm256_min_ps(vhi, _mm256_max_ps(vlo, v)); };
    int64_t j = 0;
    for (; j + 32 <= count; j += 32) {
        __m256 vacc0 = vbias, vacc1 = vbias, vacc2 = vbias, vacc3 = vbias;
        for (int64_t t = 0; t < taps; ++t) {
            const __m256 vw = _mm256_broadcast_ss(weights + t);
            const float* x = rows[t] + j;
            vacc0 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(x), vacc0);
            vacc1 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + 8), vacc1);
            vacc2 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + 16), vacc2);
            vacc3 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + 24), vacc3);
        }
        _mm256_storeu_ps(out + j, bounded(vacc0));
        _mm256_storeu_ps(out + j + 8, bounded(vacc1));
        _mm256_storeu_ps(out + j + 16, bounded(vacc2));
        _mm256_storeu_ps(out + j + 24, bounded(vacc3));
    }
    for (; j + 8 <= count; j += 8) {
        __m256 vacc = vbias;
        for (int64_t t = 0; t < taps; ++t) {
            vacc = _mm256_fmadd_ps(_mm256_broadcast_ss(weights + t), _mm256_loadu_ps(rows[t] + j),
                                   vacc);
        }
        _mm256_storeu_ps(out + j, bounded(vacc));
    }
    if (j < count) {  // vmaskmovps is slow on AMD: only for the last few outputs
        const __m256i mask = first_lanes(count - j);
        __m256 vacc = vbias;
        for (int64_t t = 0; t < taps; ++t) {
            vacc = _mm256_fmadd_ps(_mm256_broadcast_ss(weights + t),
                                   _mm256_maskload_ps(rows[t] + j, mask), vacc);
        }
        _mm256_maskstore_ps(out + j, mask, bounded(vacc));
    }
}

}  // namespace

extern const Float32DepthwiseRowFn kFloat32DepthwiseRowAvx2 = depthwise_row_avx2;

}  // namespace detail
}  // namespace qtk
