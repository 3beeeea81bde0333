// A max pool's output row at stride 2 (vmax.h's MaxPoolStride2Ukernel), AVX-512 VBMI: 32 outputs a
// step from 128 input columns in two registers (the kernel's rows' maximum, columns outside the row
// masked to -128), each window column kx picked for all 32 windows by one two-source byte permute
// (vpermt2b, columns 2 j + kx).
#include "avx512_intrinsics.h"

#include "../contracts/vmax.h"

namespace qtk {
namespace detail {
namespace {

// Lanes [lo, hi) of 64, clipped to it.
__mmask64 lanes(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > 64 ? 64 : hi;
    if (hi <= lo) {
        return 0;
    }
    const __mmask64 below_hi = hi >= 64 ? ~__mmask64{0} : (__mmask64{1} << hi) - 1;
    return below_hi & ~((__mmask64{1} << lo) - 1);
}

void max_pool_row(const int8_t* const* rows, size_t count, int64_t width, int64_t kernel_w,
                  int64_t pad_w, int64_t out_w, int8_t* y) {
    // 2 j + kx wraps past 127 for lanes j >= 32 only, which are not stored
    const __m512i veven = _mm512_set_epi8(
        126, 124, 122, 120, 118, 116, 114, 112, 110, 108, 106, 104, 102, 100, 98, 96, 94, 92, 90,
        88, 86, 84, 82, 80, 78, 76, 74, 72, 70, 68, 66, 64, 62, 60, 58, 56, 54, 52, 50, 48, 46, 44,
        42, 40, 38, 36, 34, 32, 30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i vone = _mm512_set1_epi8(1);
    const __m512i vlowest = _mm512_set1_epi8(-128);
    for (int64_t o0 = 0; o0 < out_w; o0 += 32) {
        const int64_t c0 = 2 * o0 - pad_w;  // column of the 128 in registers' first
        const __mmask64 m0 = lanes(-c0, width - c0), m1 = lanes(-c0 - 64, width - c0 - 64);
        __m512i v0 = vlowest, v1 = vlowest;
        for (size_t r = 0; r < count; ++r) {
            // masked lanes are neither read nor faulted on: the address may precede the row
            const int8_t* x = rows[r] + c0;
            v0 = _mm512_mask_max_epi8(v0, m0, v0, _mm512_maskz_loadu_epi8(m0, x));
            v1 = _mm512_mask_max_epi8(v1, m1, v1, _mm512_maskz_loadu_epi8(m1, x + 64));
        }
        // two columns a step, so the permutes overlap (the maximum's chain is half as long)
        __m512i vmax = _mm512_permutex2var_epi8(v0, veven, v1);
        for (int64_t kx = 1; kx < kernel_w; kx += 2) {
            const __m512i vidx = _mm512_add_epi8(veven, _mm512_set1_epi8(static_cast<char>(kx)));
            __m512i vpair = _mm512_permutex2var_epi8(v0, vidx, v1);
            if (kx + 1 < kernel_w) {
                vpair = _mm512_max_epi8(
                    vpair, _mm512_permutex2var_epi8(v0, _mm512_add_epi8(vidx, vone), v1));
            }
            vmax = _mm512_max_epi8(vmax, vpair);
        }
        _mm512_mask_storeu_epi8(y + o0, lanes(0, out_w - o0 < 32 ? out_w - o0 : 32), vmax);
    }
}

}  // namespace

extern const MaxPoolStride2Ukernel<int8_t> kInt8MaxPoolStride2Avx512Vbmi = {max_pool_row};

}  // namespace detail
}  // namespace qtk
