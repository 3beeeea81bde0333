// The channels-last GEMM's window gather (gemm_int8.h's Int8WindowGather), AVX-512 VBMI: per
// 64-byte chunk of the output, 16 bytes of each kernel row in the 128-bit lanes of two registers
// and one two-table byte permute (vpermt2b) by the chunk's pattern.
#include "avx512_intrinsics.h"

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

__m128i row_bytes(const int8_t* const* row, int64_t r, int64_t rows, int64_t at) {
    return r < rows ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[r] + at))
                    : _mm_setzero_si128();
}

void gather(const int8_t* const* row, int64_t pixels, const Int8WindowGather& plan,
            int8_t* out) {
    const int64_t pixel_bytes = plan.rows * plan.channels;
    const int64_t chunks = (pixels * pixel_bytes + 63) / 64;
    for (int64_t i = 0, pattern = 0; i < chunks; ++i) {
        const int64_t at = 64 * i / pixel_bytes * plan.channels;  // the chunk's first pixel's
        __m512i low = _mm512_castsi128_si512(row_bytes(row, 0, plan.rows, at));
        low = _mm512_inserti32x4(low, row_bytes(row, 1, plan.rows, at), 1);
        low = _mm512_inserti32x4(low, row_bytes(row, 2, plan.rows, at), 2);
        low = _mm512_inserti32x4(low, row_bytes(row, 3, plan.rows, at), 3);
        __m512i high = _mm512_castsi128_si512(row_bytes(row, 4, plan.rows, at));
        high = _mm512_inserti32x4(high, row_bytes(row, 5, plan.rows, at), 1);
        high = _mm512_inserti32x4(high, row_bytes(row, 6, plan.rows, at), 2);
        high = _mm512_inserti32x4(high, row_bytes(row, 7, plan.rows, at), 3);
        const __m512i picks = _mm512_loadu_si512(plan.picks + 64 * pattern);
        _mm512_storeu_si512(out + 64 * i, _mm512_permutex2var_epi8(low, picks, high));
        if (++pattern == pixel_bytes) {
            pattern = 0;
        }
    }
}

}  // namespace

extern const Int8WindowGatherFn kInt8WindowGatherAvx512Vbmi = gather;

}  // namespace detail
}  // namespace qtk
