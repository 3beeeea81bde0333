// float32 depthwise conv2d row micro-kernel, AVX-512 (depthwise_float32.h): 64 outputs per pass in
// four accumulators, so each tap's pointer and weight are loaded once per four vectors; the last
// pass through masks.
#include "avx512_intrinsics.h"

#include "depthwise_float32.h"

namespace qtk {
namespace detail {
namespace {

__mmask16 first_lanes(int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF)
           : count <= 0 ? __mmask16(0)
                        : __mmask16((1u << count) - 1);
}

void depthwise_row_avx512(const float* const* rows, const float* weights, int64_t taps, float bias,
                          float lo, float hi, int64_t count, float* out) {
    const __m512 vbias = _mm512_set1_ps(bias);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const auto bounded = [&](__m512 v) { return _mm512_min_ps(vhi, _mm512_max_ps(vlo, v)); };
    for (int64_t j = 0; j < count; j += 64) {
        // The last pass masks its vectors (some may be empty) but keeps four independent sums:
        // one vector at a time would wait on each fused multiply-add's latency.
        const bool full = j + 64 <= count;
        const __mmask16 mask0 = first_lanes(count - j), mask1 = first_lanes(count - j - 16);
        const __mmask16 mask2 = first_lanes(count - j - 32), mask3 = first_lanes(count - j - 48);
        __m512 vacc0 = vbias, vacc1 = vbias, vacc2 = vbias, vacc3 = vbias;
        for (int64_t t = 0; t < taps; ++t) {
            const __m512 vw = _mm512_set1_ps(weights[t]);
            const float* x = rows[t] + j;
            vacc0 = _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(mask0, x), vacc0);
            vacc1 = _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(mask1, x + 16), vacc1);
            vacc2 = _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(mask2, x + 32), vacc2);
            vacc3 = _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(mask3, x + 48), vacc3);
        }
        if (full) {
            _mm512_storeu_ps(out + j, bounded(vacc0));
            _mm512_storeu_ps(out + j + 16, bounded(vacc1));
            _mm512_storeu_ps(out + j + 32, bounded(vacc2));
            _mm512_storeu_ps(out + j + 48, bounded(vacc3));
        } else {
            _mm512_mask_storeu_ps(out + j, mask0, bounded(vacc0));
            _mm512_mask_storeu_ps(out + j + 16, mask1, bounded(vacc1));
            _mm512_mask_storeu_ps(out + j + 32, mask2, bounded(vacc2));
            _mm512_mask_storeu_ps(out + j + 48, mask3, bounded(vacc3));
        }
    }
}

}  // namespace

extern const Float32DepthwiseRowFn kFloat32DepthwiseRowAvx512 = depthwise_row_avx512;

}  // namespace detail
}  // namespace qtk
