// int8 add (int8_vadd.h), AVX-512: 8 elements per int64 vector, 16 per step; the tail masked.
#include <immintrin.h>

#include "int8_vadd.h"

// GCC 12 warns falsely inside its own unmasked AVX-512 intrinsics, whose pass-through operand is
// _mm512_undefined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qtk {
namespace detail {
namespace {

struct Constants {
    __m512i a_zero_point, a_multiplier, b_zero_point, b_multiplier, round, lo, hi, zero_point;
    __m128i shift;
};

// 8 int8 values of a and of b (the low 8 bytes of each) to 8 output values in int64 lanes.
__m512i add8(__m128i va, __m128i vb, const Constants& k) {
    const __m512i vprod_a = _mm512_mul_epi32(
        _mm512_sub_epi64(_mm512_cvtepi8_epi64(va), k.a_zero_point), k.a_multiplier);
    const __m512i vprod_b = _mm512_mul_epi32(
        _mm512_sub_epi64(_mm512_cvtepi8_epi64(vb), k.b_zero_point), k.b_multiplier);
    __m512i v = _mm512_sra_epi64(_mm512_add_epi64(_mm512_add_epi64(vprod_a, vprod_b), k.round),
                                 k.shift);
    v = _mm512_min_epi64(_mm512_max_epi64(v, k.lo), k.hi);  // relative to the zero point
    return _mm512_add_epi64(v, k.zero_point);
}

void vadd_avx512(const int8_t* a, const int8_t* b, int64_t count, const Int8AddParams& p,
                 int8_t* y) {
    const Constants k = {_mm512_set1_epi64(p.a_zero_point),
                         _mm512_set1_epi64(p.a_multiplier),
                         _mm512_set1_epi64(p.b_zero_point),
                         _mm512_set1_epi64(p.b_multiplier),
                         _mm512_set1_epi64(int64_t{1} << (p.shift - 1)),
                         _mm512_set1_epi64(p.lo - p.zero_point),
                         _mm512_set1_epi64(p.hi - p.zero_point),
                         _mm512_set1_epi64(p.zero_point),
                         _mm_cvtsi32_si128(p.shift)};
    for (int64_t i = 0; i < count; i += 16) {
        const __mmask16 mask =
            count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
        const __m128i va = _mm_maskz_loadu_epi8(mask, a + i);
        const __m128i vb = _mm_maskz_loadu_epi8(mask, b + i);
        const __m128i vy_lo = _mm512_cvtepi64_epi8(add8(va, vb, k));
        const __m128i vy_hi =
            _mm512_cvtepi64_epi8(add8(_mm_srli_si128(va, 8), _mm_srli_si128(vb, 8), k));
        _mm_mask_storeu_epi8(y + i, mask, _mm_unpacklo_epi64(vy_lo, vy_hi));
    }
}

}  // namespace

extern const Int8VaddUkernel kInt8VaddAvx512 = {vadd_avx512};

}  // namespace detail
}  // namespace qtk
