// int8 GEMV micro-kernel, 32 output features, AVX2 (gemv_int8.h): features across the lanes, k in
// pairs. Activations (0..255) and weights (-127..127) are widened to int16 and vpmaddwd adds each
// feature's two products into its int32 lane without saturation. (vpmaddubsw would skip the
// widening but saturates its int16 pair sums: 255 * 127 * 2 > 32767.)
#include <immintrin.h>

#include <cstring>

#include "../contracts/gemv_int8.h"

namespace qtk {
namespace detail {
namespace {

void int8_gemv_32c2_avx2(int64_t k_blocks, const int8_t* w, const uint8_t* u, int32_t* c) {
    __m256i vacc[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        vacc[j] = _mm256_setzero_si256();
    }
    for (int64_t b = 0; b < k_blocks; ++b, w += 32 * 2, u += 2) {
        int16_t u2;
        std::memcpy(&u2, u, 2);
        const __m256i vu = _mm256_cvtepu8_epi16(_mm_set1_epi16(u2));  // u0 u1, 8 times
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {  // features 8j..8j+7, each (w0, w1)
            const __m256i vw =
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w) + j));
            vacc[j] = _mm256_add_epi32(vacc[j], _mm256_madd_epi16(vw, vu));
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8 * j), vacc[j]);
    }
}

}  // namespace

extern const Int8GemvUkernel kInt8Gemv32c2Avx2 = {32, 2, int8_gemv_32c2_avx2};

}  // namespace detail
}  // namespace qtk
