// Binary popcount micro-kernel, AVX-512 with VPOPCNTDQ (the avx512_vbmi level's Ice Lake
// additions): 4 pixels x 32 output channels, one 64-bit weight word per channel in each of four
// zmm, the pixel's word broadcast and xor'ed against them, vpopcntq, 16 accumulators.
#include <immintrin.h>

#include "../contracts/popcount_binary.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kPixels = 4, kBlocks = 4;  // kBlocks zmm of 8 channels

void run(const uint64_t* const* pixel, const int64_t* tap_offset, int64_t taps, int64_t words,
         const uint64_t* w, int32_t* counts) {
    // The loops over pixels and blocks unrolled (GCC would not), so the accumulators stay in
    // registers.
    __m512i acc[kPixels][kBlocks];
#pragma GCC unroll 4
    for (int p = 0; p < kPixels; ++p) {
#pragma GCC unroll 4
        for (int b = 0; b < kBlocks; ++b) {
            acc[p][b] = _mm512_setzero_si512();
        }
    }
    for (int64_t t = 0; t < taps; ++t) {
        const int64_t offset = tap_offset[t];
        for (int64_t j = 0; j < words; ++j, w += 8 * kBlocks) {
            __m512i wb[kBlocks];
#pragma GCC unroll 4
            for (int b = 0; b < kBlocks; ++b) {
                wb[b] = _mm512_loadu_si512(w + 8 * b);
            }
#pragma GCC unroll 4
            for (int p = 0; p < kPixels; ++p) {
                const __m512i x = _mm512_set1_epi64(static_cast<long long>(pixel[p][offset + j]));
#pragma GCC unroll 4
                for (int b = 0; b < kBlocks; ++b) {
                    acc[p][b] = _mm512_add_epi64(
                        acc[p][b], _mm512_popcnt_epi64(_mm512_xor_si512(x, wb[b])));
                }
            }
        }
    }
    for (int p = 0; p < kPixels; ++p) {
        for (int b = 0; b < kBlocks; ++b) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(counts + p * 8 * kBlocks + 8 * b),
                                _mm512_maskz_cvtepi64_epi32(0xff, acc[p][b]));
        }
    }
}

}  // namespace

extern const BinaryPopcountUkernel kBinaryPopcount4x32Avx512Vbmi = {kPixels, 8 * kBlocks, run};

}  // namespace detail
}  // namespace qtk
