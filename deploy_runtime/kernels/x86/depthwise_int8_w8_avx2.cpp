// int8 depthwise conv2d micro-kernels, 8 outputs per vector, AVX2 (depthwise_int8.h): vpmaddwd
// multiplies the int16 pairs and adds both products into an int32 lane without saturation.
#include <immintrin.h>

#include "../contracts/depthwise_int8.h"

namespace qtk {
namespace detail {
namespace {

void pack_pairs_avx2(const int8_t* x, int64_t count, int64_t stride, int32_t* pairs) {
    int64_t j = 0;
    if (stride == 2) {  // the pairs are the row sign-extended to int16, in order
        for (; j + 8 <= count; j += 8) {
            const __m128i vx = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * j));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs + j), _mm256_cvtepi8_epi16(vx));
        }
    } else {  // x[j] in the low half, x[j + 1] in the high
        for (; j + 8 <= count; j += 8) {
            const __m256i vfirst =
                _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + j)));
            const __m256i vsecond =
                _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + j + 1)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs + j),
                                _mm256_blend_epi16(vfirst, _mm256_slli_epi32(vsecond, 16), 0xAA));
        }
    }
    for (; j < count; ++j) {
        pairs[j] = int32_t(uint16_t(x[stride * j])) | int32_t(uint32_t(x[stride * j + 1]) << 16);
    }
}

// The sums of outputs [o, o + 8): two accumulators halve the dependency chain. Inlined into the
// row loop, where GCC would otherwise call it per vector.
template <int K, int S>
[[gnu::always_inline]] inline __m256i depthwise8(const int32_t* const* rows, const __m256i* vweights, int64_t o) {
    constexpr int P = (K + 1) / 2;
    __m256i vacc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 5
    for (int ky = 0; ky < K; ++ky) {
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p) {
            const __m256i vx =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[ky] + o + 2 * p / S));
            vacc[ky % 2] =
                _mm256_add_epi32(vacc[ky % 2], _mm256_madd_epi16(vx, vweights[ky * P + p]));
        }
    }
    return _mm256_add_epi32(vacc[0], vacc[1]);
}

template <int K, int S>
void depthwise_row_avx2(const int32_t* const* rows, const int32_t* weights, int64_t count,
                        int32_t* acc) {
    constexpr int P = (K + 1) / 2;
    // Weights broadcast and row starts read once: the stores to acc could alias them.
    __m256i vweights[K * P];
    for (int i = 0; i < K * P; ++i) {
        vweights[i] = _mm256_set1_epi32(weights[i]);
    }
    const int32_t* row_starts[K];
    for (int ky = 0; ky < K; ++ky) {
        row_starts[ky] = rows[ky];
    }
    int64_t o = 0;
    for (; o + 16 <= count; o += 16) {  // two vectors a step: independent chains
        const __m256i vfirst = depthwise8<K, S>(row_starts, vweights, o);
        const __m256i vsecond = depthwise8<K, S>(row_starts, vweights, o + 8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + o), vfirst);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + o + 8), vsecond);
    }
    for (; o < count; o += 8) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + o),
                            depthwise8<K, S>(row_starts, vweights, o));
    }
}

}  // namespace

extern const Int8DepthwiseUkernel kInt8DepthwiseW8Avx2 = {
    pack_pairs_avx2,
    {{depthwise_row_avx2<3, 1>, depthwise_row_avx2<3, 2>},
     {depthwise_row_avx2<5, 1>, depthwise_row_avx2<5, 2>}}};

}  // namespace detail
}  // namespace qtk
