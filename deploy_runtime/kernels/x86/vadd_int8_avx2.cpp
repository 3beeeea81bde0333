// int8 add (vadd_int8.h), AVX2: 4 elements per int64 vector, 8 per step; the tail through a
// buffer. AVX2 lacks the int64 arithmetic shift and min/max: the shift is a logical one on the
// one's complement of negative lanes (floor(v / 2^n) = ~(~v >> n) for v < 0), the clamp a compare
// and blend (as in requantize_int8_avx2.cpp).
#include <immintrin.h>

#include <cstring>

#include "../contracts/vadd_int8.h"

namespace qtk {
namespace detail {
namespace {

struct Constants {
    __m256i a_zero_point, a_multiplier, b_zero_point, b_multiplier, round, lo, hi, zero_point;
    __m128i shift;
};

// 4 int8 values of a and of b (the low 4 bytes of each) to 4 output values in int64 lanes.
__m256i add4(__m128i va, __m128i vb, const Constants& k) {
    const __m256i vprod_a = _mm256_mul_epi32(
        _mm256_sub_epi64(_mm256_cvtepi8_epi64(va), k.a_zero_point), k.a_multiplier);
    const __m256i vprod_b = _mm256_mul_epi32(
        _mm256_sub_epi64(_mm256_cvtepi8_epi64(vb), k.b_zero_point), k.b_multiplier);
    const __m256i vsum = _mm256_add_epi64(_mm256_add_epi64(vprod_a, vprod_b), k.round);
    const __m256i vsign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), vsum);
    __m256i v = _mm256_xor_si256(_mm256_srl_epi64(_mm256_xor_si256(vsum, vsign), k.shift), vsign);
    v = _mm256_blendv_epi8(v, k.lo, _mm256_cmpgt_epi64(k.lo, v));
    v = _mm256_blendv_epi8(v, k.hi, _mm256_cmpgt_epi64(v, k.hi));
    return _mm256_add_epi64(v, k.zero_point);
}

// 8 values from 8 bytes of a and of b.
__m128i add8(__m128i va, __m128i vb, const Constants& k) {
    const __m256i vlow32 = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    const __m256i vy0 = _mm256_permutevar8x32_epi32(add4(va, vb, k), vlow32);
    const __m256i vy1 = _mm256_permutevar8x32_epi32(
        add4(_mm_srli_si128(va, 4), _mm_srli_si128(vb, 4), k), vlow32);
    // Already in [-128, 127]: the saturating packs only narrow.
    const __m128i vy16 = _mm_packs_epi32(_mm256_castsi256_si128(vy0), _mm256_castsi256_si128(vy1));
    return _mm_packs_epi16(vy16, vy16);
}

void vadd_avx2(const int8_t* a, const int8_t* b, int64_t count, const Int8AddParams& p,
               int8_t* y) {
    const Constants k = {_mm256_set1_epi64x(p.a_zero_point),
                         _mm256_set1_epi64x(p.a_multiplier),
                         _mm256_set1_epi64x(p.b_zero_point),
                         _mm256_set1_epi64x(p.b_multiplier),
                         _mm256_set1_epi64x(p.round),
                         _mm256_set1_epi64x(p.lo_from_zero_point),
                         _mm256_set1_epi64x(p.hi_from_zero_point),
                         _mm256_set1_epi64x(p.zero_point),
                         _mm_cvtsi32_si128(p.shift)};
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        const __m128i vy = add8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i)),
                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + i)), k);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), vy);
    }
    if (i < count) {
        const size_t tail = static_cast<size_t>(count - i);
        int8_t a_tail[16] = {}, b_tail[16] = {}, y_tail[16];
        std::memcpy(a_tail, a + i, tail);
        std::memcpy(b_tail, b + i, tail);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y_tail),
                         add8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a_tail)),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b_tail)), k));
        std::memcpy(y + i, y_tail, tail);
    }
}

}  // namespace

extern const Int8VaddUkernel kInt8VaddAvx2 = {vadd_avx2};

}  // namespace detail
}  // namespace qtk
