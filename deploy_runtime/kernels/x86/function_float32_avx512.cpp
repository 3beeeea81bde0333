// float32 function micro-kernels, AVX-512 (function_float32.h): 16 lanes, the last vector masked.
#include "avx512_intrinsics.h"

#include "../contracts/function_float32.h"
#include "function_float32_simd.h"

namespace qtk {
namespace detail {
namespace {

struct Avx512 {
    using Vec = __m512;
    static constexpr int64_t kLanes = 16;

    static __mmask16 lanes(int64_t n) {
        return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    }
    static Vec load(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(lanes(n), p); }
    static void store(float* p, Vec v, int64_t n) { _mm512_mask_storeu_ps(p, lanes(n), v); }
    static Vec set1(float v) { return _mm512_set1_ps(v); }
    static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
    static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
    static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
    static Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
    static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
    static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
    static Vec min(Vec a, Vec b) { return _mm512_min_ps(a, b); }
    static Vec round(Vec v) {
        return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    static Vec scale(Vec v, Vec n) { return _mm512_scalef_ps(v, n); }
};

}  // namespace

extern const Float32FunctionUkernels kFloat32FunctionsAvx512 = {
    function_float32::apply<Avx512, function_float32::Hardswish>,
    function_float32::apply<Avx512, function_float32::Hardsigmoid>,
    function_float32::apply<Avx512, function_float32::Sigmoid>,
    function_float32::apply<Avx512, function_float32::Silu>};

}  // namespace detail
}  // namespace qtk
