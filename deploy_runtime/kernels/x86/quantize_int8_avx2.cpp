// float32 -> int8 quantization (int8_quantize.h), AVX2: 8 values per vector, the tail masked
// (a masked load only there: it is slow on older AMD cores).
#include <immintrin.h>

#include "int8_quantize.h"

namespace qtk {
namespace detail {
namespace {

void quantize_avx2(const float* x, int64_t count, float inv_scale, int32_t zero_point,
                   int8_t* y) {
    const Int8QuantizePlan plan = int8_quantize_plan(inv_scale, zero_point);
    const __m256 vinv = _mm256_set1_ps(plan.inv_scale);
    const __m256 vlo = _mm256_set1_ps(plan.lo);
    const __m256 vhi = _mm256_set1_ps(plan.hi);
    const __m256i vzero_point = _mm256_set1_epi32(plan.zero_point);
    const __m256i vlane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t i = 0; i < count; i += 8) {
        const int lanes = count - i >= 8 ? 8 : int(count - i);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), vlane);
        const __m256 vx = lanes == 8 ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, mask);
        const __m256 vr = _mm256_round_ps(_mm256_mul_ps(vx, vinv),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // NaN lanes to 0, then the clamp (max / min of ordered values: no NaN is left).
        const __m256 vordered = _mm256_and_ps(vr, _mm256_cmp_ps(vr, vr, _CMP_ORD_Q));
        const __m256 vclamped = _mm256_min_ps(_mm256_max_ps(vordered, vlo), vhi);
        const __m256i vq = _mm256_add_epi32(_mm256_cvtps_epi32(vclamped), vzero_point);
        // int32 -> int8: every value is in [-128, 127], so the saturating packs are exact.
        const __m128i v16 = _mm_packs_epi32(_mm256_castsi256_si128(vq),
                                            _mm256_extracti128_si256(vq, 1));
        const __m128i v8 = _mm_packs_epi16(v16, v16);
        if (lanes == 8) {
            _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), v8);
        } else {
            alignas(16) int8_t bytes[16];
            _mm_store_si128(reinterpret_cast<__m128i*>(bytes), v8);
            for (int j = 0; j < lanes; ++j) {
                y[i + j] = bytes[j];
            }
        }
    }
}

}  // namespace

extern const Int8QuantizeUkernel kInt8QuantizeAvx2 = {quantize_avx2};

}  // namespace detail
}  // namespace qtk
