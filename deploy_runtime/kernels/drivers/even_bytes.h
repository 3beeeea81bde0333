// y[i] = x[2 i]: the stride-2 gather of the im2col rows (conv2d_int8_gemm.cpp) and of max-pool
// windows (max_pool2d_rows.cpp), 16 outputs a step from 32 bytes (SSE2 on x86-64, NEON on
// aarch64: each one's baseline). Built with the baseline flags by both callers.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace qtk {
namespace detail {

// Writes y[i] for i below the returned count, at most `count` and short of it by up to 16: every
// step reads 32 bytes, all before x[2 count - 1]. The caller finishes the rest.
inline int64_t copy_even_bytes(const int8_t* x, int64_t count, int8_t* y) {
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128i vlow = _mm_set1_epi16(0xFF);
    for (; i + 16 < count; i += 16) {
        const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i));
        const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i + 16));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                         _mm_packus_epi16(_mm_and_si128(va, vlow), _mm_and_si128(vb, vlow)));
    }
#elif defined(__ARM_NEON)
    for (; i + 16 < count; i += 16) {
        vst1q_s8(y + i, vld2q_s8(x + 2 * i).val[0]);
    }
#else
    (void)x, (void)y, (void)count;
#endif
    return i;
}

}  // namespace detail
}  // namespace qtk
