// The micro-kernels of the int8 Winograd F(2x2, 3x3) conv (conv2d_int8_winograd.cpp), exact by the
// bounds of docs/winograd.md; one file per ISA, each compiled with its own flags and called only
// where cpu_supports() its level. Two forms, by what multiplies fastest at the ISA:
//
// Float (AVX-512: 16-lane FMAs), for one tile of mr output channels and nr Winograd tiles (4x4
// input -> 2x2 output):
//   u  float [16][channels][mr]: the scaled weight transform U' = G' g G'^T (|U'| <= 1143);
//   v  float [16][channels][v_tiles]: the input transform V = B^T d B of d = x - z (|V| <= 1020),
//      the call's nr tiles first in each row;
//   y  int32 [mr][2][2 nr]: the two output rows of each channel, tile j's pixels at 2j and 2j + 1,
//      y = (A^T M A) / 4 with M = sum over channels of U' V: the conv's sum of (x - z) w.
// Float sums restart every `chunk` channels, whose partial sums the caller keeps within 2^24 in
// magnitude (winograd_f2x3_chunk_channels), and go to int32 there; int32 sums may wrap, the
// result is exact when |4 y| < 2^31 (the caller's fits()). No alignment is required.
//
// Int16 (AVX2: vpmaddwd multiplies 16 int16 pairs into int32 lanes, twice the products of an
// 8-lane FMA): the same y from U' and V as int16 (both fit), two channels to a 32-bit word:
//   u  int16 [16][words][mr][2], v int16 [16][words][v_tiles][2], words = ceil(channels / 2):
//      channels 2 w and 2 w + 1 of one output channel or tile side by side (an odd count's last
//      word padded with zero weights);
// all sums in int32: a pair of products is at most 2 * 1143 * 1020 in magnitude, and wrapping
// sums are exact as above.
//
// In both forms an element's channels lie as 32-bit words: a float, or a pair of int16.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why):
// winograd_f2x3_tile is a template that each file instantiates with its own vector operations,
// a type local to that file, so no instantiation built with AVX-512 flags is shared.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

constexpr int kWinogradElements = 16;  // of a transformed 4x4 tile, row-major

struct WinogradF2x3Ukernel {
    using Element = float;
    static constexpr int kChannelsPerWord = 1;
    int mr;  // output channels per call
    int nr;  // tiles per call, a multiple of the vector width
    void (*run)(const float* u, const float* v, int64_t channels, int64_t v_tiles, int64_t chunk,
                int32_t* y);
};

struct WinogradF2x3Int16Ukernel {
    using Element = int16_t;
    static constexpr int kChannelsPerWord = 2;
    int mr;  // output channels per call
    int nr;  // tiles per call, a multiple of the vector width
    void (*run)(const int16_t* u, const int16_t* v, int64_t words, int64_t v_tiles, int32_t* y);
};

extern const WinogradF2x3Int16Ukernel kWinogradF2x3Int16Avx2;
extern const WinogradF2x3Ukernel kWinogradF2x3Avx512;

// The longest run of channels whose float sums of U' V stay exact (|partial sum| <= 2^24) given the
// layer's largest |U'| and its input zero point; at least 1. Defined in conv2d_int8_winograd.cpp.
int64_t winograd_f2x3_chunk_channels(int64_t max_abs_u, int32_t input_zero_point);

// y = A^T M A / 4 of m [16][kMr][kNr] (int32 sums of U' V), A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]:
// first down the 4 rows of M, then along the columns. Ops: the ISA's int32 vector I with
// load_int, add, sub, quarter (arithmetic shift right by 2) and store_pairs (a0 b0 a1 b1 ... to
// 2 * kLanes int32).
template <int kMr, int kVectors, typename Ops>
void winograd_f2x3_output(const int32_t* m, int32_t* y) {
    using I = typename Ops::I;
    constexpr int kLanes = Ops::kLanes, kNr = kVectors * kLanes;
    const auto at = [m](int e, int r, int o) { return m + (e * kMr + r) * kNr + o; };
    for (int r = 0; r < kMr; ++r) {
        for (int k = 0; k < kVectors; ++k) {
            I vs0[4], vs1[4];  // column j of A^T M
            for (int j = 0; j < 4; ++j) {
                const int o = k * kLanes;
                const I vm0 = Ops::load_int(at(j, r, o)), vm1 = Ops::load_int(at(4 + j, r, o));
                const I vm2 = Ops::load_int(at(8 + j, r, o)), vm3 = Ops::load_int(at(12 + j, r, o));
                vs0[j] = Ops::add(Ops::add(vm0, vm1), vm2);
                vs1[j] = Ops::sub(Ops::sub(vm1, vm2), vm3);
            }
            int32_t* row0 = y + (2 * r) * 2 * kNr + 2 * k * kLanes;
            int32_t* row1 = row0 + 2 * kNr;
            Ops::store_pairs(row0, Ops::quarter(Ops::add(Ops::add(vs0[0], vs0[1]), vs0[2])),
                             Ops::quarter(Ops::sub(Ops::sub(vs0[1], vs0[2]), vs0[3])));
            Ops::store_pairs(row1, Ops::quarter(Ops::add(Ops::add(vs1[0], vs1[1]), vs1[2])),
                             Ops::quarter(Ops::sub(Ops::sub(vs1[1], vs1[2]), vs1[3])));
        }
    }
}

// The float contract above for mr = kMr, nr = kVectors * Ops::kLanes. Ops: as
// winograd_f2x3_output's, and the float vector F with zero, load, broadcast_fma (acc + *scalar *
// v), to_int (exact for integers) and store_int.
template <int kMr, int kVectors, typename Ops>
void winograd_f2x3_tile(const float* u, const float* v, int64_t channels, int64_t v_tiles,
                        int64_t chunk, int32_t* y) {
    using F = typename Ops::F;
    using I = typename Ops::I;
    constexpr int kLanes = Ops::kLanes, kNr = kVectors * kLanes;
    alignas(64) int32_t m[kWinogradElements][kMr][kNr];
    for (int e = 0; e < kWinogradElements; ++e) {
        const float* ue = u + e * channels * kMr;
        const float* ve = v + e * channels * v_tiles;
        for (int64_t c0 = 0; c0 < channels; c0 += chunk) {
            F vacc[kMr][kVectors];
#pragma GCC unroll 16
            for (int i = 0; i < kMr * kVectors; ++i) {
                vacc[i / kVectors][i % kVectors] = Ops::zero();
            }
            const int64_t c1 = channels - c0 < chunk ? channels : c0 + chunk;
            for (int64_t c = c0; c < c1; ++c) {
                F vv[kVectors];
#pragma GCC unroll 4
                for (int k = 0; k < kVectors; ++k) {
                    vv[k] = Ops::load(ve + c * v_tiles + k * kLanes);
                }
#pragma GCC unroll 16
                for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 4
                    for (int k = 0; k < kVectors; ++k) {
                        vacc[r][k] = Ops::broadcast_fma(ue + c * kMr + r, vv[k], vacc[r][k]);
                    }
                }
            }
#pragma GCC unroll 16
            for (int i = 0; i < kMr * kVectors; ++i) {
                int32_t* out = &m[e][i / kVectors][(i % kVectors) * kLanes];
                const I vsum = Ops::to_int(vacc[i / kVectors][i % kVectors]);
                Ops::store_int(out, c0 == 0 ? vsum : Ops::add(Ops::load_int(out), vsum));
            }
        }
    }
    winograd_f2x3_output<kMr, kVectors, Ops>(&m[0][0][0], y);
}

}  // namespace detail
}  // namespace qtk
