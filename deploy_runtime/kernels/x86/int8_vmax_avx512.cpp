// Bytewise int8 row maximum (int8_vmax.h), AVX-512 BW: 64 bytes per vector, the tail masked.
#include <immintrin.h>

#include "int8_vmax.h"

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

}  // namespace

extern const Int8VmaxUkernel kInt8VmaxAvx512 = {vmax_rows_avx512};

}  // namespace detail
}  // namespace qtk
