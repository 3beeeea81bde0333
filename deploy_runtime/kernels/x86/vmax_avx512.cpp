// Row maximum (vmax.h), AVX-512 BW: 64 int8 or 16 float32 per vector, the tail masked.
#include "avx512_intrinsics.h"

#include "../contracts/vmax.h"

namespace qtk {
namespace detail {
namespace {

void vmax_rows_avx512(const int8_t* const* rows, size_t count, int64_t width, int8_t* y) {
    for (int64_t i = 0; i < width; i += 64) {
        const __mmask64 mask =
            width - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (width - i)) - 1;
        __m512i vmax = _mm512_maskz_loadu_epi8(mask, rows[0] + i);
        for (size_t r = 1; r < count; ++r) {
            vmax = _mm512_max_epi8(vmax, _mm512_maskz_loadu_epi8(mask, rows[r] + i));
        }
        _mm512_mask_storeu_epi8(y + i, mask, vmax);
    }
}

// float32_max of src/float32_max.h, lane by lane.
__m512 float32_max(__m512 best, __m512 x) {
    __m512 larger = _mm512_max_ps(x, best);  // x where x > best; else best (equal, or a NaN)
    const __m512 both = _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_castps_si512(best)));
    larger = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, best, _CMP_EQ_OQ), larger, both);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), larger, x);
}

void vmax_rows_float32_avx512(const float* const* rows, size_t count, int64_t width, float* y) {
    for (int64_t i = 0; i < width; i += 16) {
        const __mmask16 mask =
            width - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (width - i)) - 1);
        __m512 vmax = _mm512_maskz_loadu_ps(mask, rows[0] + i);
        for (size_t r = 1; r < count; ++r) {
            vmax = float32_max(vmax, _mm512_maskz_loadu_ps(mask, rows[r] + i));
        }
        _mm512_mask_storeu_ps(y + i, mask, vmax);
    }
}

}  // namespace

extern const VmaxUkernel<int8_t> kInt8VmaxAvx512 = {vmax_rows_avx512};
extern const VmaxUkernel<float> kFloat32VmaxAvx512 = {vmax_rows_float32_avx512};

}  // namespace detail
}  // namespace qtk
