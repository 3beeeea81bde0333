// Row maximum (vmax.h), AVX2: 32 int8 per vector, the tail through a buffer; 8 float32, the tail
// masked.
#include <immintrin.h>

#include <cstring>

#include "../contracts/vmax.h"

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

// float32_max of src/float32_max.h, lane by lane.
__m256 float32_max(__m256 best, __m256 x) {
    __m256 larger = _mm256_max_ps(x, best);  // x where x > best; else best (equal, or a NaN)
    larger = _mm256_blendv_ps(larger, _mm256_and_ps(x, best), _mm256_cmp_ps(x, best, _CMP_EQ_OQ));
    return _mm256_blendv_ps(larger, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// Full vectors by plain loads and stores; the tail through masks (slow on older AMD cores).
void vmax_rows_float32_avx2(const float* const* rows, size_t count, int64_t width, float* y) {
    int64_t i = 0;
    for (; i + 8 <= width; i += 8) {
        __m256 vmax = _mm256_loadu_ps(rows[0] + i);
        for (size_t r = 1; r < count; ++r) {
            vmax = float32_max(vmax, _mm256_loadu_ps(rows[r] + i));
        }
        _mm256_storeu_ps(y + i, vmax);
    }
    if (i < width) {
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(width - i)),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 vmax = _mm256_maskload_ps(rows[0] + i, mask);
        for (size_t r = 1; r < count; ++r) {
            vmax = float32_max(vmax, _mm256_maskload_ps(rows[r] + i, mask));
        }
        _mm256_maskstore_ps(y + i, mask, vmax);
    }
}

}  // namespace

extern const VmaxUkernel<int8_t> kInt8VmaxAvx2 = {vmax_rows_avx2};
extern const VmaxUkernel<float> kFloat32VmaxAvx2 = {vmax_rows_float32_avx2};

}  // namespace detail
}  // namespace qtk
