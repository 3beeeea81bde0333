// int8 Winograd F(2x2, 3x3) micro-kernel, 8 output channels x 32 tiles, AVX-512
// (winograd_int8_f2x3.h): 16 float accumulators of 16 lanes, each U' broadcast from memory into its
// FMA.
#include "avx512_intrinsics.h"
#include "../contracts/winograd_int8_f2x3.h"

namespace qtk {
namespace detail {
namespace {

struct Avx512Ops {
    using F = __m512;
    using I = __m512i;
    static constexpr int kLanes = 16;

    static F zero() { return _mm512_setzero_ps(); }
    static F load(const float* p) { return _mm512_loadu_ps(p); }
    static F broadcast_fma(const float* scalar, F v, F acc) {
        return _mm512_fmadd_ps(_mm512_set1_ps(*scalar), v, acc);
    }
    static I to_int(F v) { return _mm512_cvtps_epi32(v); }
    static I load_int(const int32_t* p) { return _mm512_loadu_si512(p); }
    static void store_int(int32_t* p, I v) { _mm512_storeu_si512(p, v); }
    static I add(I a, I b) { return _mm512_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
    static I quarter(I v) { return _mm512_srai_epi32(v, 2); }
    static void store_pairs(int32_t* p, I a, I b) {
        const I vfirst = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const I vsecond = _mm512_add_epi32(vfirst, _mm512_set1_epi32(8));
        _mm512_storeu_si512(p, _mm512_permutex2var_epi32(a, vfirst, b));
        _mm512_storeu_si512(p + 16, _mm512_permutex2var_epi32(a, vsecond, b));
    }
};

void winograd_f2x3_8x32_avx512(const float* u, const float* v, int64_t channels, int64_t v_tiles,
                               int64_t chunk, int32_t* y) {
    winograd_f2x3_tile<8, 2, Avx512Ops>(u, v, channels, v_tiles, chunk, y);
}

}  // namespace

extern const WinogradF2x3Ukernel kWinogradF2x3Avx512 = {8, 32, winograd_f2x3_8x32_avx512};

}  // namespace detail
}  // namespace qtk
