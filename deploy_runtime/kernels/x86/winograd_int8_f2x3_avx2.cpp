// int8 Winograd F(2x2, 3x3) micro-kernel, 6 output channels x 16 tiles, AVX2 + FMA
// (winograd_int8_f2x3.h): 12 float accumulators of 8 lanes, two tile vectors and one broadcast U'.
#include <immintrin.h>

#include "../contracts/winograd_int8_f2x3.h"

namespace qtk {
namespace detail {
namespace {

struct Avx2Ops {
    using F = __m256;
    using I = __m256i;
    static constexpr int kLanes = 8;

    static F zero() { return _mm256_setzero_ps(); }
    static F load(const float* p) { return _mm256_loadu_ps(p); }
    static F broadcast_fma(const float* scalar, F v, F acc) {
        return _mm256_fmadd_ps(_mm256_broadcast_ss(scalar), v, acc);
    }
    static I to_int(F v) { return _mm256_cvtps_epi32(v); }
    static I load_int(const int32_t* p) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    }
    static void store_int(int32_t* p, I v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
    }
    static I add(I a, I b) { return _mm256_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
    static I quarter(I v) { return _mm256_srai_epi32(v, 2); }
    // unpack interleaves within 128-bit halves: [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 a3 b3 | ...].
    static void store_pairs(int32_t* p, I a, I b) {
        const I vlo = _mm256_unpacklo_epi32(a, b), vhi = _mm256_unpackhi_epi32(a, b);
        store_int(p, _mm256_permute2x128_si256(vlo, vhi, 0x20));
        store_int(p + 8, _mm256_permute2x128_si256(vlo, vhi, 0x31));
    }
};

void winograd_f2x3_6x16_avx2(const float* u, const float* v, int64_t channels, int64_t v_tiles,
                             int64_t chunk, int32_t* y) {
    winograd_f2x3_tile<6, 2, Avx2Ops>(u, v, channels, v_tiles, chunk, y);
}

}  // namespace

extern const WinogradF2x3Ukernel kWinogradF2x3Avx2 = {6, 16, winograd_f2x3_6x16_avx2};

}  // namespace detail
}  // namespace qtk
