// float32 Winograd F(4x4, 3x3) transforms, 8 tiles a vector, AVX2 + FMA (winograd_float32_f4x3.h).
#include <immintrin.h>

#include "../contracts/winograd_float32_f4x3.h"

namespace qtk {
namespace detail {
namespace {

struct Avx2Ops {
    using F = __m256;
    static constexpr int kLanes = 8;

    static F load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
    static F set1(float s) { return _mm256_set1_ps(s); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static F min(F a, F b) { return _mm256_min_ps(a, b); }
    static F max(F a, F b) { return _mm256_max_ps(a, b); }
    // A 4x8 transpose: unpacks interleave within 128-bit halves, so vq_t holds tiles t and t + 4.
    static void store_quads(float* p, F a, F b, F c, F d) {
        const __m256d vab_lo = _mm256_castps_pd(_mm256_unpacklo_ps(a, b));  // a0 b0 a1 b1 | 4 5
        const __m256d vab_hi = _mm256_castps_pd(_mm256_unpackhi_ps(a, b));  // a2 b2 a3 b3 | 6 7
        const __m256d vcd_lo = _mm256_castps_pd(_mm256_unpacklo_ps(c, d));
        const __m256d vcd_hi = _mm256_castps_pd(_mm256_unpackhi_ps(c, d));
        const F vq0 = _mm256_castpd_ps(_mm256_unpacklo_pd(vab_lo, vcd_lo));
        const F vq1 = _mm256_castpd_ps(_mm256_unpackhi_pd(vab_lo, vcd_lo));
        const F vq2 = _mm256_castpd_ps(_mm256_unpacklo_pd(vab_hi, vcd_hi));
        const F vq3 = _mm256_castpd_ps(_mm256_unpackhi_pd(vab_hi, vcd_hi));
        _mm256_storeu_ps(p, _mm256_permute2f128_ps(vq0, vq1, 0x20));
        _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(vq2, vq3, 0x20));
        _mm256_storeu_ps(p + 16, _mm256_permute2f128_ps(vq0, vq1, 0x31));
        _mm256_storeu_ps(p + 24, _mm256_permute2f128_ps(vq2, vq3, 0x31));
    }
};

}  // namespace

extern const WinogradF4x3Transforms kWinogradF4x3Avx2 = {WinogradF4x3<Avx2Ops>::input,
                                                         WinogradF4x3<Avx2Ops>::output};

}  // namespace detail
}  // namespace qtk
