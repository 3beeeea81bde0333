// The permute's image step (interleave_int8.h), AVX-512 VBMI: 64 pixels, each of the C output
// vectors one two-table byte permute of channels 0 and 1 (vpermt2b), channels 2 and 3 merged by a
// masked permute of their own.
#include "avx512_intrinsics.h"

#include "../contracts/interleave_int8.h"

namespace qtk {
namespace detail {
namespace {

// Per output vector k, byte b (pixel p = (64 k + b) / C, channel c = (64 k + b) % C): the index
// p + 64 (c % 2) into the channel pair holding c, and in `upper` the bytes of channels 2 and 3.
template <int C>
struct Picks {
    uint8_t index[C][64];
    uint64_t upper[C];
};

template <int C>
constexpr Picks<C> picks() {
    Picks<C> p{};
    for (int k = 0; k < C; ++k) {
        p.upper[k] = 0;
        for (int b = 0; b < 64; ++b) {
            const int j = 64 * k + b, pixel = j / C, channel = j % C;
            p.index[k][b] = static_cast<uint8_t>(pixel + 64 * (channel % 2));
            p.upper[k] |= uint64_t{channel >= 2} << b;
        }
    }
    return p;
}

template <int C>
void interleave64(const uint8_t* x, int64_t x_stride, uint8_t* y) {
    alignas(64) static constexpr Picks<C> kPicks = picks<C>();
    __m512i plane[4];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
        plane[c] = _mm512_loadu_si512(x + c * x_stride);
    }
#pragma GCC unroll 4
    for (int k = 0; k < C; ++k) {
        const __m512i index = _mm512_load_si512(kPicks.index[k]);
        __m512i v = _mm512_permutex2var_epi8(plane[0], index, plane[1]);
        if constexpr (C == 3) {
            v = _mm512_mask_permutexvar_epi8(v, kPicks.upper[k], index, plane[2]);
        } else if constexpr (C == 4) {
            v = _mm512_mask_blend_epi8(kPicks.upper[k], v,
                                       _mm512_permutex2var_epi8(plane[2], index, plane[3]));
        }
        _mm512_storeu_si512(y + 64 * k, v);
    }
}

}  // namespace

extern const Int8InterleaveUkernel kInt8InterleaveAvx512Vbmi = {
    64, {interleave64<2>, interleave64<3>, interleave64<4>}};

}  // namespace detail
}  // namespace qtk
