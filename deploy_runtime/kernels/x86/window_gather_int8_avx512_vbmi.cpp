// The channels-last GEMM's window gather (gemm_int8.h's Int8WindowGather), AVX-512 VBMI: per
// 64-byte chunk of the output, row_bytes of each kernel row side by side in two registers (16 bytes
// a 128-bit lane for 5 to 8 rows, 32 a 256-bit half for 3 or 4, 64 a register for 2) and one
// two-table byte permute (vpermt2b) by the chunk's pattern.
#include "avx512_intrinsics.h"

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

// The 64 bytes of table rows [first, first + 64 / kRowBytes): kRowBytes of each from byte `at`
// on, zeros for rows past `rows`.
template <int kRowBytes>
__m512i table(const int8_t* const* row, int64_t first, int64_t rows, int64_t at) {
    const auto has = [&](int64_t r) { return first + r < rows; };
    if constexpr (kRowBytes == 64) {
        return has(0) ? _mm512_loadu_si512(row[first] + at) : _mm512_setzero_si512();
    } else if constexpr (kRowBytes == 32) {
        const auto half = [&](int64_t r) {
            if (!has(r)) {
                return _mm256_setzero_si256();
            }
            return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[first + r] + at));
        };
        return _mm512_inserti64x4(_mm512_castsi256_si512(half(0)), half(1), 1);
    } else {
        static_assert(kRowBytes == 16);
        const auto lane = [&](int64_t r) {
            if (!has(r)) {
                return _mm_setzero_si128();
            }
            return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[first + r] + at));
        };
        __m512i t = _mm512_castsi128_si512(lane(0));
        t = _mm512_inserti32x4(t, lane(1), 1);
        t = _mm512_inserti32x4(t, lane(2), 2);
        return _mm512_inserti32x4(t, lane(3), 3);
    }
}

template <int kRowBytes>
void gather_rows(const int8_t* const* row, int64_t pixels, const Int8WindowGather& plan,
                 int8_t* out) {
    constexpr int64_t kRowsPerTable = 64 / kRowBytes;
    const int64_t pixel_bytes = plan.rows * plan.channels;
    const int64_t chunks = (pixels * pixel_bytes + 63) / 64;
    for (int64_t i = 0, pattern = 0; i < chunks; ++i) {
        const int64_t at = 64 * i / pixel_bytes * plan.channels;  // the chunk's first pixel's
        const __m512i low = table<kRowBytes>(row, 0, plan.rows, at);
        const __m512i high = table<kRowBytes>(row, kRowsPerTable, plan.rows, at);
        const __m512i picks = _mm512_loadu_si512(plan.picks + 64 * pattern);
        _mm512_storeu_si512(out + 64 * i, _mm512_permutex2var_epi8(low, picks, high));
        if (++pattern == pixel_bytes) {
            pattern = 0;
        }
    }
}

void gather(const int8_t* const* row, int64_t pixels, const Int8WindowGather& plan,
            int8_t* out) {
    switch (int8_window_gather_row_bytes(plan.rows)) {
        case 64:
            return gather_rows<64>(row, pixels, plan, out);
        case 32:
            return gather_rows<32>(row, pixels, plan, out);
        default:
            return gather_rows<16>(row, pixels, plan, out);
    }
}

}  // namespace

extern const Int8WindowGatherFn kInt8WindowGatherAvx512Vbmi = gather;

}  // namespace detail
}  // namespace qtk
