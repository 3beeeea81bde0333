// float32 Winograd F(4x4, 3x3) transforms, 16 tiles a vector, AVX-512 (winograd_float32_f4x3.h).
#include "avx512_intrinsics.h"
#include "../contracts/winograd_float32_f4x3.h"

namespace qtk {
namespace detail {
namespace {

struct Avx512Ops {
    using F = __m512;
    static constexpr int kLanes = 16;

    static F load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
    static F set1(float s) { return _mm512_set1_ps(s); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F min(F a, F b) { return _mm512_min_ps(a, b); }
    static F max(F a, F b) { return _mm512_max_ps(a, b); }
    // Pairs a_t b_t and c_t d_t first, then pairs of pairs, as 64-bit elements.
    static void store_quads(float* p, F a, F b, F c, F d) {
        const __m512i vlo =
            _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512i vhi = _mm512_add_epi32(vlo, _mm512_set1_epi32(8));
        const __m512d vab0 = _mm512_castps_pd(_mm512_permutex2var_ps(a, vlo, b));
        const __m512d vab1 = _mm512_castps_pd(_mm512_permutex2var_ps(a, vhi, b));
        const __m512d vcd0 = _mm512_castps_pd(_mm512_permutex2var_ps(c, vlo, d));
        const __m512d vcd1 = _mm512_castps_pd(_mm512_permutex2var_ps(c, vhi, d));
        const __m512i vpairs_lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
        const __m512i vpairs_hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
        _mm512_storeu_pd(p, _mm512_permutex2var_pd(vab0, vpairs_lo, vcd0));
        _mm512_storeu_pd(p + 16, _mm512_permutex2var_pd(vab0, vpairs_hi, vcd0));
        _mm512_storeu_pd(p + 32, _mm512_permutex2var_pd(vab1, vpairs_lo, vcd1));
        _mm512_storeu_pd(p + 48, _mm512_permutex2var_pd(vab1, vpairs_hi, vcd1));
    }
};

}  // namespace

extern const WinogradF4x3Transforms kWinogradF4x3Avx512 = {WinogradF4x3<Avx512Ops>::input,
                                                           WinogradF4x3<Avx512Ops>::output};

}  // namespace detail
}  // namespace qtk
