// float32 depthwise conv2d row micro-kernel, AVX-512 (depthwise_float32.h): 128 outputs per pass
// in eight accumulators, so each tap's pointer and weight are loaded once per eight vectors and
// the fused multiply-adds of a tap do not wait on each other; the last pass with only as many
// vectors as it has outputs, the last of them masked.
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

// Outputs [j, j + count), 16 (V - 1) < count <= 16 V, in V independent sums (unrolled, so that
// they stay in registers); only the last vector is masked.
template <int V>
void pass(const float* const* rows, const float* weights, int64_t taps, __m512 vbias, __m512 vlo,
          __m512 vhi, int64_t j, int64_t count, float* out) {
    const __mmask16 mask = first_lanes(count - 16 * (V - 1));
    __m512 vacc[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
        vacc[v] = vbias;
    }
    for (int64_t t = 0; t < taps; ++t) {
        const __m512 vw = _mm512_set1_ps(weights[t]);
        const float* x = rows[t] + j;
#pragma GCC unroll 8
        for (int v = 0; v < V - 1; ++v) {
            vacc[v] = _mm512_fmadd_ps(vw, _mm512_loadu_ps(x + 16 * v), vacc[v]);
        }
        vacc[V - 1] =
            _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(mask, x + 16 * (V - 1)), vacc[V - 1]);
    }
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const auto bounded = [&](__m512 v) { return _mm512_min_ps(vhi, _mm512_max_ps(vlo, v)); };
#pragma GCC unroll 8
    for (int v = 0; v < V - 1; ++v) {
        _mm512_storeu_ps(out + j + 16 * v, bounded(vacc[v]));
    }
    _mm512_mask_storeu_ps(out + j + 16 * (V - 1), mask, bounded(vacc[V - 1]));
}

void depthwise_row_avx512(const float* const* rows, const float* weights, int64_t taps, float bias,
                          float lo, float hi, int64_t count, float* out) {
    const __m512 vbias = _mm512_set1_ps(bias);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    int64_t j = 0;
    for (; j + 128 <= count; j += 128) {
        pass<8>(rows, weights, taps, vbias, vlo, vhi, j, 128, out);
    }
    const int64_t left = count - j;
    switch ((left + 15) / 16) {
        case 0: break;
        case 1: pass<1>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 2: pass<2>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 3: pass<3>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 4: pass<4>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 5: pass<5>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 6: pass<6>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 7: pass<7>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        default: pass<8>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
    }
}

}  // namespace

extern const Float32DepthwiseRowFn kFloat32DepthwiseRowAvx512 = depthwise_row_avx512;

}  // namespace detail
}  // namespace qtk
