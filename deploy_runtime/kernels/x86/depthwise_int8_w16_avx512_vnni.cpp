// int8 depthwise conv2d micro-kernels, 16 outputs per vector, AVX-512 VNNI (depthwise_int8.h):
// vpdpwssd multiplies the int16 pairs and adds both products to an int32 lane without saturation.
#include "avx512_intrinsics.h"

#include "depthwise_int8.h"

namespace qtk {
namespace detail {
namespace {

// Lanes [0, count) of a vector of `lanes`, count > 0.
__mmask32 first_lanes(int64_t count, int lanes) {
    return count >= lanes ? __mmask32((uint64_t{1} << lanes) - 1) : __mmask32((1u << count) - 1);
}

void pack_pairs_avx512(const int8_t* x, int64_t count, int64_t stride, int32_t* pairs) {
    if (stride == 2) {  // the pairs are the row sign-extended to int16, in order
        for (int64_t j = 0; j < count; j += 16) {
            const __mmask32 mask = first_lanes(2 * (count - j), 32);
            const __m512i vx = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, x + 2 * j));
            _mm512_mask_storeu_epi16(pairs + j, mask, vx);
        }
        return;
    }
    for (int64_t j = 0; j < count; j += 16) {  // x[j] in the low half, x[j + 1] in the high
        const __mmask16 mask = __mmask16(first_lanes(count - j, 16));
        const __m512i vfirst = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, x + j));
        const __m512i vsecond = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, x + j + 1));
        const __m512i vpairs =
            _mm512_mask_blend_epi16(0xAAAAAAAA, vfirst, _mm512_slli_epi32(vsecond, 16));
        _mm512_mask_storeu_epi32(pairs + j, mask, vpairs);
    }
}

template <int K, int S>
void depthwise_row_avx512_vnni(const int32_t* const* rows, const int32_t* weights, int64_t count,
                               int32_t* acc) {
    constexpr int P = (K + 1) / 2;
    __m512i vw[K][P];
#pragma GCC unroll 5
    for (int ky = 0; ky < K; ++ky) {
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p) {
            vw[ky][p] = _mm512_set1_epi32(weights[ky * P + p]);
        }
    }
    for (int64_t o = 0; o < count; o += 16) {
        // Two accumulators halve the vpdpwssd dependency chain.
        __m512i vacc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ++ky) {
#pragma GCC unroll 3
            for (int p = 0; p < P; ++p) {
                const __m512i vx = _mm512_loadu_si512(rows[ky] + o + 2 * p / S);
                vacc[ky % 2] = _mm512_dpwssd_epi32(vacc[ky % 2], vx, vw[ky][p]);
            }
        }
        _mm512_storeu_si512(acc + o, _mm512_add_epi32(vacc[0], vacc[1]));
    }
}

}  // namespace

extern const Int8DepthwiseUkernel kInt8DepthwiseW16Avx512Vnni = {
    pack_pairs_avx512,
    {{depthwise_row_avx512_vnni<3, 1>, depthwise_row_avx512_vnni<3, 2>},
     {depthwise_row_avx512_vnni<5, 1>, depthwise_row_avx512_vnni<5, 2>}}};

}  // namespace detail
}  // namespace qtk
