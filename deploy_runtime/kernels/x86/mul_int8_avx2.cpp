// int8 mul products (mul_int8.h), AVX2: 8 per step, widened by vpmovsxbd; the tail scalar.
#include <immintrin.h>

#include <cstring>

#include "../contracts/mul_int8.h"

namespace qtk {
namespace detail {
namespace {

void products_int8_avx2(const int8_t* x, int32_t x_zero_point, const int8_t* s, int64_t s_step,
                        int32_t s_zero_point, int64_t count, int32_t* p) {
    const __m256i vx_zero_point = _mm256_set1_epi32(x_zero_point);
    const __m256i vs_zero_point = _mm256_set1_epi32(s_zero_point);
    const __m256i vfactor = _mm256_set1_epi32(int32_t{s[0]} - s_zero_point);
    const auto load8 = [](const int8_t* v) {
        int64_t bytes;
        std::memcpy(&bytes, v, 8);
        return _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
    };
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        const __m256i vx = _mm256_sub_epi32(load8(x + i), vx_zero_point);
        const __m256i vs = s_step == 0 ? vfactor : _mm256_sub_epi32(load8(s + i), vs_zero_point);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + i), _mm256_mullo_epi32(vx, vs));
    }
    for (; i < count; ++i) {
        p[i] = (int32_t{x[i]} - x_zero_point) * (int32_t{s[i * s_step]} - s_zero_point);
    }
}

}  // namespace

extern const Int8ProductsUkernel kInt8ProductsAvx2 = {products_int8_avx2};

}  // namespace detail
}  // namespace qtk
