// int8 table lookup (lut_int8.h), AVX-512 BW: 64 bytes per step, the tail masked.
#include "avx512_intrinsics.h"

#include "../contracts/lut_int8.h"

namespace qtk {
namespace detail {
namespace {

void lut_int8_avx512(const int8_t* x, int64_t count, const int8_t* table, int8_t* y) {
    __m512i vrows[16];  // row r's 16 entries in every 128-bit lane
    for (int r = 0; r < 16; ++r) {
        vrows[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
            table + 16 * r)));
    }
    const __m512i vsign = _mm512_set1_epi8(-128), vnibble = _mm512_set1_epi8(0x0F);
    for (int64_t i = 0; i < count; i += 64) {
        const __mmask64 mask =
            count - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (count - i)) - 1;
        const __m512i vindex = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, x + i), vsign);
        const __m512i vcolumn = _mm512_and_si512(vindex, vnibble);
        const __m512i vrow = _mm512_and_si512(_mm512_srli_epi16(vindex, 4), vnibble);
        __m512i vy = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
            const __mmask64 in_row = _mm512_cmpeq_epi8_mask(vrow, _mm512_set1_epi8(char(r)));
            vy = _mm512_mask_shuffle_epi8(vy, in_row, vrows[r], vcolumn);
        }
        _mm512_mask_storeu_epi8(y + i, mask, vy);
    }
}

}  // namespace

extern const Int8LutUkernel kInt8LutAvx512 = {lut_int8_avx512};

}  // namespace detail
}  // namespace qtk
