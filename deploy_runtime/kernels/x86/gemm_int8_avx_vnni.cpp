// int8 GEMM micro-kernel, 4 output channels x 16 pixels, AVX-VNNI (gemm_int8.h): the VEX-encoded
// vpdpbusd on 256-bit vectors (Alder Lake and later), same exact uint8 x int8 -> int32 sums as the
// AVX-512 form.
#include <immintrin.h>

#include <cstring>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

void int8_gemm_4x16c4_avx_vnni(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride) {
    __m256i vacc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
        vacc[r][0] = vacc[r][1] = _mm256_setzero_si256();
    }
    const auto multiply_quad = [&](const uint8_t* quad) {
        const __m256i vb0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad));
        const __m256i vb1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + 32));
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            int32_t w;
            std::memcpy(&w, a + 4 * r, 4);
            const __m256i vw = _mm256_set1_epi32(w);
            vacc[r][0] = _mm256_dpbusd_avx_epi32(vacc[r][0], vb0, vw);
            vacc[r][1] = _mm256_dpbusd_avx_epi32(vacc[r][1], vb1, vw);
        }
        a += 4 * 4;
    };
    walk_quads(b, multiply_quad);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + c_stride * r), vacc[r][0]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + c_stride * r + 8), vacc[r][1]);
    }
}

}  // namespace

extern const Int8GemmUkernel kInt8Gemm4x16c4AvxVnni = {4, 16, int8_gemm_4x16c4_avx_vnni};

}  // namespace detail
}  // namespace qtk
