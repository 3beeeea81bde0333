// int8 mul products (mul_int8.h), AVX-512: 16 per step, widened by vpmovsxbd, the tail masked.
#include "avx512_intrinsics.h"

#include "../contracts/mul_int8.h"

namespace qtk {
namespace detail {
namespace {

void products_int8_avx512(const int8_t* x, int32_t x_zero_point, const int8_t* s, int64_t s_step,
                          int32_t s_zero_point, int64_t count, int32_t* p) {
    const __m512i vx_zero_point = _mm512_set1_epi32(x_zero_point);
    const __m512i vs_zero_point = _mm512_set1_epi32(s_zero_point);
    const __m512i vfactor = _mm512_set1_epi32(int32_t{s[0]} - s_zero_point);
    for (int64_t i = 0; i < count; i += 16) {
        const __mmask16 mask =
            count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
        const __m512i vx = _mm512_sub_epi32(
            _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, x + i)), vx_zero_point);
        const __m512i vs =
            s_step == 0 ? vfactor
                        : _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, s + i)),
                                           vs_zero_point);
        _mm512_mask_storeu_epi32(p + i, mask, _mm512_mullo_epi32(vx, vs));
    }
}

}  // namespace

extern const Int8ProductsUkernel kInt8ProductsAvx512 = {products_int8_avx512};

}  // namespace detail
}  // namespace qtk
