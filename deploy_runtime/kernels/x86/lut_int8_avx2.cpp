// int8 table lookup (lut_int8.h), AVX2: 32 bytes per step, the tail through a buffer.
#include <immintrin.h>

#include <cstring>

#include "../contracts/lut_int8.h"

namespace qtk {
namespace detail {
namespace {

void lut_int8_avx2(const int8_t* x, int64_t count, const int8_t* table, int8_t* y) {
    __m256i vrows[16];  // row r's 16 entries in both 128-bit lanes
    for (int r = 0; r < 16; ++r) {
        vrows[r] = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * r)));
    }
    const __m256i vsign = _mm256_set1_epi8(-128), vnibble = _mm256_set1_epi8(0x0F);
    const auto lookup32 = [&](const int8_t* in, int8_t* out) {
        const __m256i vindex = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)), vsign);
        const __m256i vcolumn = _mm256_and_si256(vindex, vnibble);
        const __m256i vrow = _mm256_and_si256(_mm256_srli_epi16(vindex, 4), vnibble);
        __m256i vy = _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
            const __m256i vin_row = _mm256_cmpeq_epi8(vrow, _mm256_set1_epi8(char(r)));
            vy = _mm256_blendv_epi8(vy, _mm256_shuffle_epi8(vrows[r], vcolumn), vin_row);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), vy);
    };
    int64_t i = 0;
    for (; i + 32 <= count; i += 32) {
        lookup32(x + i, y + i);
    }
    if (i < count) {
        int8_t in[32] = {}, out[32];
        std::memcpy(in, x + i, size_t(count - i));
        lookup32(in, out);
        std::memcpy(y + i, out, size_t(count - i));
    }
}

}  // namespace

extern const Int8LutUkernel kInt8LutAvx2 = {lut_int8_avx2};

}  // namespace detail
}  // namespace qtk
