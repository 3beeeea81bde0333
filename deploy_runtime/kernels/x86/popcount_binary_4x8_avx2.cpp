// Binary popcount micro-kernel, AVX2: 4 pixels x 8 output channels, two ymm of four 64-bit weight
// words, the pixel's word broadcast and xor'ed against them. AVX2 has no popcount instruction:
// each byte's bits are counted by a 16-entry table of the nibbles (vpshufb), and vpsadbw sums a
// lane's 8 bytes into its 64-bit lane (Mula, Kurz and Lemire 2018).
#include <immintrin.h>

#include "../contracts/popcount_binary.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kPixels = 4, kBlocks = 2;  // kBlocks ymm of 4 channels

inline __m256i popcount_lanes(__m256i v, __m256i table, __m256i low_nibbles) {
    const __m256i low = _mm256_shuffle_epi8(table, _mm256_and_si256(v, low_nibbles));
    const __m256i high =
        _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibbles));
    return _mm256_sad_epu8(_mm256_add_epi8(low, high), _mm256_setzero_si256());
}

void run(const uint64_t* const* pixel, const int64_t* tap_offset, int64_t taps, int64_t words,
         const uint64_t* w, int32_t products, int scale, const int32_t* const* missed,
         int32_t* sums, int64_t sums_stride) {
    const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1,
                                           2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i low_nibbles = _mm256_set1_epi8(0x0f);
    __m256i acc[kPixels][kBlocks];
#pragma GCC unroll 4
    for (int p = 0; p < kPixels; ++p) {
#pragma GCC unroll 2
        for (int b = 0; b < kBlocks; ++b) {
            acc[p][b] = _mm256_setzero_si256();
        }
    }
    for (int64_t t = 0; t < taps; ++t) {
        const int64_t offset = tap_offset[t];
        for (int64_t j = 0; j < words; ++j, w += 4 * kBlocks) {
            const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
            const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 4));
#pragma GCC unroll 4
            for (int p = 0; p < kPixels; ++p) {
                const __m256i x = _mm256_set1_epi64x(static_cast<long long>(pixel[p][offset + j]));
                acc[p][0] = _mm256_add_epi64(
                    acc[p][0], popcount_lanes(_mm256_xor_si256(x, w0), table, low_nibbles));
                acc[p][1] = _mm256_add_epi64(
                    acc[p][1], popcount_lanes(_mm256_xor_si256(x, w1), table, low_nibbles));
            }
        }
    }
    for (int p = 0; p < kPixels; ++p) {
        long long counts[4 * kBlocks];
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(counts), acc[p][0]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(counts + 4), acc[p][1]);
        for (int o = 0; o < 4 * kBlocks; ++o) {
            const int32_t sum = products - 2 * static_cast<int32_t>(counts[o]);
            sums[o * sums_stride + p] = static_cast<int32_t>(uint32_t(sum) << scale) -
                                        (missed != nullptr ? missed[p][o] : 0);
        }
    }
}

}  // namespace

extern const BinaryPopcountUkernel kBinaryPopcount4x8Avx2 = {kPixels, 4 * kBlocks, run, nullptr};

// The peak of AVX2's nibble-table popcount on one core: 8 independent chains of xor, the two table
// lookups and byte adds on registers, 256 binary products per chain step. Each byte counts at most
// 8 a step, so the bytes are summed into 64-bit lanes (vpsadbw) every 31 steps, before they could
// pass 255: the best this form runs (the micro-kernel above sums every step).
int64_t binary_peak_chains_avx2(int64_t rounds) {
    constexpr int kChains = 8, kStepsPerSum = 31;
    const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1,
                                           2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i low_nibbles = _mm256_set1_epi8(0x0f);
    // Eight distinct words a step (four x by two w), re-read each step: a loop-invariant lookup
    // would be computed once.
    __m256i x[4], bytes[kChains], total = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
        x[i] = _mm256_set1_epi64x(0x0123456789abcdefLL * (i + 1));
    }
    const __m256i w[2] = {_mm256_set1_epi64x(0x5555555555555555LL),
                          _mm256_set1_epi64x(0x3333333333333333LL)};
    for (int64_t r = 0; r < rounds; r += kStepsPerSum) {
#pragma GCC unroll 8
        for (int i = 0; i < kChains; ++i) {
            bytes[i] = _mm256_setzero_si256();
        }
        for (int step = 0; step < kStepsPerSum; ++step) {
            asm volatile("" : "+x"(x[0]), "+x"(x[1]), "+x"(x[2]), "+x"(x[3]));
#pragma GCC unroll 8
            for (int i = 0; i < kChains; ++i) {
                const __m256i v = _mm256_xor_si256(x[i % 4], w[i / 4]);
                bytes[i] = _mm256_add_epi8(
                    bytes[i], _mm256_shuffle_epi8(table, _mm256_and_si256(v, low_nibbles)));
                bytes[i] = _mm256_add_epi8(
                    bytes[i], _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4),
                                                                          low_nibbles)));
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < kChains; ++i) {
            total = _mm256_add_epi64(total, _mm256_sad_epu8(bytes[i], _mm256_setzero_si256()));
        }
    }
    volatile long long sink = _mm256_extract_epi64(total, 0);  // keeps the chains alive
    (void)sink;
    return (rounds + kStepsPerSum - 1) / kStepsPerSum * kStepsPerSum * kChains * 256;
}

}  // namespace detail
}  // namespace qtk
