// float32 function micro-kernels, AVX2 + FMA (function_float32.h): 8 lanes, the last vector
// through a masked load and store.
#include <immintrin.h>

#include "../contracts/function_float32.h"
#include "function_float32_simd.h"

namespace qtk {
namespace detail {
namespace {

struct Avx2 {
    using Vec = __m256;
    static constexpr int64_t kLanes = 8;

    static __m256i lanes(int64_t n) {  // lane i set where i < n
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static Vec load(const float* p, int64_t n) {
        return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(n));
    }
    static void store(float* p, Vec v, int64_t n) {
        if (n >= 8) {
            _mm256_storeu_ps(p, v);
        } else {
            _mm256_maskstore_ps(p, lanes(n), v);
        }
    }
    static Vec set1(float v) { return _mm256_set1_ps(v); }
    static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
    static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
    static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
    static Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
    static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
    static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
    static Vec min(Vec a, Vec b) { return _mm256_min_ps(a, b); }
    static Vec round(Vec v) {
        return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    // v 2^n as v 2^(n/2) 2^(n - n/2): each factor a normal float for n in [-150, 129], and only
    // the second product rounds.
    static Vec scale(Vec v, Vec n) {
        const __m256i k = _mm256_cvtps_epi32(n);
        const __m256i half = _mm256_srai_epi32(k, 1);
        const auto power = [](__m256i e) {  // 2^e: the exponent field e + 127
            const __m256i biased = _mm256_add_epi32(e, _mm256_set1_epi32(127));
            return _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
        };
        return _mm256_mul_ps(_mm256_mul_ps(v, power(half)), power(_mm256_sub_epi32(k, half)));
    }
};

}  // namespace

extern const Float32FunctionUkernels kFloat32FunctionsAvx2 = {
    function_float32::apply<Avx2, function_float32::Hardswish>,
    function_float32::apply<Avx2, function_float32::Hardsigmoid>,
    function_float32::apply<Avx2, function_float32::Sigmoid>,
    function_float32::apply<Avx2, function_float32::Silu>};

}  // namespace detail
}  // namespace qtk
