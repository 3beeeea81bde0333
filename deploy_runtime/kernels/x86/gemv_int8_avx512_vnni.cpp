// int8 GEMV micro-kernel, 64 output features, AVX-512 VNNI (gemv_int8.h): features across the
// lanes, the sample's 4 activations broadcast; vpdpbusd adds the 4 uint8 x int8 products to an
// int32 lane without saturation, so the sum is exact.
#include <immintrin.h>

#include <cstring>

#include "../contracts/gemv_int8.h"

namespace qtk {
namespace detail {
namespace {

void int8_gemv_64c4_avx512_vnni(int64_t k_blocks, const int8_t* w, const uint8_t* u, int32_t* c) {
    __m512i vacc[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        vacc[j] = _mm512_setzero_si512();
    }
    for (int64_t b = 0; b < k_blocks; ++b, w += 64 * 4, u += 4) {
        int32_t u4;
        std::memcpy(&u4, u, 4);
        const __m512i vu = _mm512_set1_epi32(u4);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            vacc[j] = _mm512_dpbusd_epi32(vacc[j], vu, _mm512_loadu_si512(w + 64 * j));
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        _mm512_storeu_si512(c + 16 * j, vacc[j]);
    }
}

}  // namespace

extern const Int8GemvUkernel kInt8Gemv64c4Avx512Vnni = {64, 4, int8_gemv_64c4_avx512_vnni};

}  // namespace detail
}  // namespace qtk
