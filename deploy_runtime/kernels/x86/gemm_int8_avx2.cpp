// int8 GEMM micro-kernel, 2 output channels x 16 pixels, AVX2 (gemm_int8.h). Exact without VNNI:
// activations are widened to int16 (0..255) and weights to int16 (-127..127), and vpmaddwd adds
// pairs of int16 products into int32 lanes without saturation. (vpmaddubsw would be one step
// shorter but saturates its int16 pair sums: 255 * 127 * 2 > 32767.)
#include <immintrin.h>

#include <cstring>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

// Four pixels' (k0 k1 | k2 k3) pair sums -> one int32 per pixel: lanes [p0 p1 p2 p3 p4 p5 p6 p7]
// from v03 (pixels 0-3) and v47 (pixels 4-7).
__m256i sum_pairs(__m256i v03, __m256i v47) {
    // hadd gives [p0 p1 p4 p5 | p2 p3 p6 p7]; put the 64-bit halves in order.
    return _mm256_permute4x64_epi64(_mm256_hadd_epi32(v03, v47), _MM_SHUFFLE(3, 1, 2, 0));
}

void int8_gemm_2x16c4_avx2(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride) {
    // vacc[r][j]: pixels 4j..4j+3 of row r, two lanes per pixel (k0 k1 and k2 k3).
    __m256i vacc[2][4];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
        vacc[i / 4][i % 4] = _mm256_setzero_si256();
    }
    const auto multiply_quad = [&](const uint8_t* quad) {
        __m256i vb[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            vb[j] = _mm256_cvtepu8_epi16(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(quad) + j));
        }
#pragma GCC unroll 2
        for (int r = 0; r < 2; ++r) {
            int32_t w;
            std::memcpy(&w, a + 4 * r, 4);
            const __m256i vw = _mm256_cvtepi8_epi16(_mm_set1_epi32(w));  // w0 w1 w2 w3, 4 times
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                vacc[r][j] = _mm256_add_epi32(vacc[r][j], _mm256_madd_epi16(vb[j], vw));
            }
        }
        a += 2 * 4;
    };
    walk_quads(b, multiply_quad);
#pragma GCC unroll 2
    for (int r = 0; r < 2; ++r) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + c_stride * r),
                            sum_pairs(vacc[r][0], vacc[r][1]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + c_stride * r + 8),
                            sum_pairs(vacc[r][2], vacc[r][3]));
    }
}

}  // namespace

extern const Int8GemmUkernel kInt8Gemm2x16c4Avx2 = {2, 16, int8_gemm_2x16c4_avx2};

int64_t int8_peak_chains_avx2(int64_t rounds) {
    constexpr int kChains = 8;
    constexpr int64_t kMacsPerInstruction = 16;  // 8 lanes x 2 products
    __m256i acc[kChains];
    for (int i = 0; i < kChains; ++i) {
        acc[i] = _mm256_set1_epi32(i);
    }
    // Eight distinct products a round (two a by four b), re-read each round: a loop-invariant
    // vpmaddwd would be computed once.
    __m256i a[2] = {_mm256_set1_epi16(1), _mm256_set1_epi16(2)};
    const __m256i b[4] = {_mm256_set1_epi16(-1), _mm256_set1_epi16(3), _mm256_set1_epi16(-5),
                          _mm256_set1_epi16(7)};
    for (int64_t r = 0; r < rounds; ++r) {
        asm volatile("" : "+x"(a[0]), "+x"(a[1]));
#pragma GCC unroll 8
        for (int i = 0; i < kChains; ++i) {
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(a[i / 4], b[i % 4]));
        }
    }
    __m256i sum = acc[0];
    for (int i = 1; i < kChains; ++i) {
        sum = _mm256_add_epi32(sum, acc[i]);
    }
    volatile int32_t sink = _mm256_extract_epi32(sum, 0);  // keeps the chains alive
    (void)sink;
    return rounds * kChains * kMacsPerInstruction;
}

}  // namespace detail
}  // namespace qtk
