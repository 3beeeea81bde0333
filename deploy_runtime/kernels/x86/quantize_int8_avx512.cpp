// float32 -> int8 quantization (int8_quantize.h), AVX-512 F: 16 values per vector, the tail masked.
#include "avx512_intrinsics.h"

#include "int8_quantize.h"

namespace qtk {
namespace detail {
namespace {

void quantize_avx512(const float* x, int64_t count, float inv_scale, int32_t zero_point,
                     int8_t* y) {
    const Int8QuantizePlan plan = int8_quantize_plan(inv_scale, zero_point);
    const __m512 vinv = _mm512_set1_ps(plan.inv_scale);
    const __m512 vlo = _mm512_set1_ps(plan.lo);
    const __m512 vhi = _mm512_set1_ps(plan.hi);
    const __m512i vzero_point = _mm512_set1_epi32(plan.zero_point);
    for (int64_t i = 0; i < count; i += 16) {
        const __mmask16 mask =
            count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
        const __m512 vr = _mm512_roundscale_ps(
            _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), vinv),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // NaN lanes to 0, then the clamp (max / min of ordered values: no NaN is left).
        const __m512 vordered = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(vr, vr, _CMP_ORD_Q), vr);
        const __m512 vclamped = _mm512_min_ps(_mm512_max_ps(vordered, vlo), vhi);
        const __m512i vq = _mm512_add_epi32(_mm512_cvtps_epi32(vclamped), vzero_point);
        _mm512_mask_cvtepi32_storeu_epi8(y + i, mask, vq);
    }
}

}  // namespace

extern const Int8QuantizeUkernel kInt8QuantizeAvx512 = {quantize_avx512};

}  // namespace detail
}  // namespace qtk
