// int8 Winograd F(2x2, 3x3) micro-kernel, 6 output channels x 16 tiles, AVX2, the int16 form
// (winograd_int8_f2x3.h): per pair of channels two vectors of 8 tiles and one broadcast pair of U',
// multiplied by vpmaddwd into 12 int32 accumulators. (The float form's FMA does 8 products an
// instruction to vpmaddwd's 16: on an AMD EPYC Zen 3 the float kernel took 1.3-1.7x the time on
// resnet18's 3x3 layers; benchmarks/README.md.)
#include <immintrin.h>

#include <cstring>

#include "../contracts/winograd_int8_f2x3.h"

namespace qtk {
namespace detail {
namespace {

struct Avx2Ops {
    using I = __m256i;
    static constexpr int kLanes = 8;

    static I load_int(const int32_t* p) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    }
    static void store_int(int32_t* p, I v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
    }
    static I add(I a, I b) { return _mm256_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
    static I quarter(I v) { return _mm256_srai_epi32(v, 2); }
    // unpack interleaves within 128-bit halves: [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 a3 b3 | ...].
    static void store_pairs(int32_t* p, I a, I b) {
        const I vlo = _mm256_unpacklo_epi32(a, b), vhi = _mm256_unpackhi_epi32(a, b);
        store_int(p, _mm256_permute2x128_si256(vlo, vhi, 0x20));
        store_int(p + 8, _mm256_permute2x128_si256(vlo, vhi, 0x31));
    }
};

void winograd_f2x3_int16_6x16_avx2(const int16_t* u, const int16_t* v, int64_t words,
                                   int64_t v_tiles, int32_t* y) {
    constexpr int kMr = 6, kVectors = 2, kLanes = 8;
    alignas(32) int32_t m[kWinogradElements][kMr][kVectors * kLanes];
    for (int e = 0; e < kWinogradElements; ++e) {
        const int16_t* ue = u + e * words * kMr * 2;
        const int16_t* ve = v + e * words * v_tiles * 2;
        __m256i vacc[kMr][kVectors];
#pragma GCC unroll 12
        for (int i = 0; i < kMr * kVectors; ++i) {
            vacc[i / kVectors][i % kVectors] = _mm256_setzero_si256();
        }
        for (int64_t w = 0; w < words; ++w) {
            __m256i vv[kVectors];
#pragma GCC unroll 2
            for (int k = 0; k < kVectors; ++k) {
                vv[k] = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(ve + (w * v_tiles + k * kLanes) * 2));
            }
#pragma GCC unroll 6
            for (int r = 0; r < kMr; ++r) {
                int32_t pair;
                std::memcpy(&pair, ue + (w * kMr + r) * 2, 4);
                const __m256i vu = _mm256_set1_epi32(pair);
#pragma GCC unroll 2
                for (int k = 0; k < kVectors; ++k) {
                    vacc[r][k] = _mm256_add_epi32(vacc[r][k], _mm256_madd_epi16(vv[k], vu));
                }
            }
        }
#pragma GCC unroll 12
        for (int i = 0; i < kMr * kVectors; ++i) {
            Avx2Ops::store_int(&m[e][i / kVectors][(i % kVectors) * kLanes],
                               vacc[i / kVectors][i % kVectors]);
        }
    }
    winograd_f2x3_output<kMr, kVectors, Avx2Ops>(&m[0][0][0], y);
}

}  // namespace

extern const WinogradF2x3Int16Ukernel kWinogradF2x3Int16Avx2 = {
    6, 16, winograd_f2x3_int16_6x16_avx2};

}  // namespace detail
}  // namespace qtk
