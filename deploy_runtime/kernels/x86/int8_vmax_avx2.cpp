// Bytewise int8 row maximum (int8_vmax.h), AVX2: 32 bytes per vector, the tail through a buffer.
#include <immintrin.h>

#include <cstring>

#include "int8_vmax.h"

namespace qtk {
namespace detail {
namespace {

__m256i max_at(const int8_t* const* rows, size_t count, int64_t i) {
    __m256i vmax = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[0] + i));
    for (size_t r = 1; r < count; ++r) {
        vmax = _mm256_max_epi8(vmax,
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + i)));
    }
    return vmax;
}

void vmax_rows_avx2(const int8_t* const* rows, size_t count, int64_t width, int8_t* y) {
    int64_t i = 0;
    for (; i + 32 <= width; i += 32) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), max_at(rows, count, i));
    }
    if (i < width) {
        const size_t tail = static_cast<size_t>(width - i);
        int8_t vtail[32];
        std::memcpy(vtail, rows[0] + i, tail);
        __m256i vmax = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vtail));
        for (size_t r = 1; r < count; ++r) {
            std::memcpy(vtail, rows[r] + i, tail);
            vmax = _mm256_max_epi8(vmax, _mm256_loadu_si256(reinterpret_cast<__m256i*>(vtail)));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(vtail), vmax);
        std::memcpy(y + i, vtail, tail);
    }
}

}  // namespace

extern const Int8VmaxUkernel kInt8VmaxAvx2 = {vmax_rows_avx2};

}  // namespace detail
}  // namespace qtk
