// int8 table lookup (lut_int8.h), AVX-512 VBMI: 64 bytes per step, the tail masked. vpermi2b picks
// a byte from 128 entries (two registers) by the index's low 7 bits: one lookup per half of the
// table, the index's top bit choosing between them.
#include "avx512_intrinsics.h"

#include "../contracts/lut_int8.h"

namespace qtk {
namespace detail {
namespace {

void lut_int8_avx512_vbmi(const int8_t* x, int64_t count, const int8_t* table, int8_t* y) {
    __m512i vquarters[4];  // entries 64 q .. 64 q + 63
    for (int q = 0; q < 4; ++q) {
        vquarters[q] = _mm512_loadu_si512(table + 64 * q);
    }
    const __m512i vsign = _mm512_set1_epi8(-128);
    for (int64_t i = 0; i < count; i += 64) {
        const __mmask64 mask =
            count - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (count - i)) - 1;
        const __m512i vindex = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, x + i), vsign);
        const __m512i vlow = _mm512_permutex2var_epi8(vquarters[0], vindex, vquarters[1]);
        const __m512i vhigh = _mm512_permutex2var_epi8(vquarters[2], vindex, vquarters[3]);
        const __mmask64 in_high = _mm512_movepi8_mask(vindex);  // index >= 128
        _mm512_mask_storeu_epi8(y + i, mask, _mm512_mask_blend_epi8(in_high, vlow, vhigh));
    }
}

}  // namespace

extern const Int8LutUkernel kInt8LutAvx512Vbmi = {lut_int8_avx512_vbmi};

}  // namespace detail
}  // namespace qtk
