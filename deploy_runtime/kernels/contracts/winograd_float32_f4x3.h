// The transforms of the float32 Winograd F(4x4, 3x3) conv (conv2d_float32_winograd.cpp), one file
// per ISA, each compiled with its own flags and called only where cpu_supports() its level. The
// products between them are the float32 GEMM micro-kernels (gemm_float32.h), one per transform
// element. Lavin & Gray's matrices, interpolation points 0, +-1, +-2, infinity:
//
//   B^T = [[4,  0, -5,  0, 1, 0],      A^T = [[1, 1,  1, 1,  1, 0],
//          [0, -4, -4,  1, 1, 0],             [0, 1, -1, 2, -2, 0],
//          [0,  4, -4, -1, 1, 0],             [0, 1,  1, 4,  4, 0],
//          [0, -2, -1,  2, 1, 0],             [0, 1, -1, 8, -8, 1]]
//          [0,  2, -1, -2, 1, 0],
//          [0,  4,  0, -5, 0, 1]]
//
// Every 1-D pass below sends each term through at most 2 roundings (input) or 3 (output), the
// counts docs/winograd.md's error bound takes; keep them so when changing an expression.
//
// Contracts, for `count` tiles of one tile row, computed kLanes tiles a vector (so up to
// kLanes - 1 tiles past `count` are read and written too; the caller leaves room):
//   input:  d is the zero-padded input plane split into 4 column phases: input column 4 t + b of
//           row a of tile t is d[a * row_stride + (b % 4) * phase_stride + t + b / 4];
//           v[e * element_stride + t] = (B^T d B)[e / 6][e % 6] for e < 36.
//   output: m[e * element_stride + t] is the tile's transformed sum M (6x6);
//           y[i * y_stride + 4 t + j] = bounds(bias + (A^T M A)[i][j]) for i, j < 4, with
//           bounds(v) = min(max(v, lo), hi) passing NaN through (op_kernel.h FloatBounds).
// No alignment is required.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why): the templates
// are instantiated with a vector-operations type local to each file.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

constexpr int kWinogradF4x3Elements = 36;  // of a transformed 6x6 tile, row-major
constexpr int kWinogradF4x3MaxLanes = 16;  // the widest vector of tiles (AVX-512)

struct WinogradF4x3Transforms {
    void (*input)(const float* d, int64_t row_stride, int64_t phase_stride, int64_t count,
                  float* v, int64_t element_stride);
    void (*output)(const float* m, int64_t element_stride, int64_t count, float bias, float lo,
                   float hi, float* y, int64_t y_stride);
};

extern const WinogradF4x3Transforms kWinogradF4x3Avx2;
extern const WinogradF4x3Transforms kWinogradF4x3Avx512;

// The contracts above. Ops: the ISA's float vector F, kLanes, load, store, add, sub, set1,
// fmadd (a b + c, one rounding), min, max and store_quads (a0 b0 c0 d0 a1 b1 ... to 4 kLanes
// floats).
template <typename Ops>
struct WinogradF4x3 {
    using F = typename Ops::F;

    // out = B^T in, a term through at most 2 roundings (4 x and 2 x are exact).
    static void input_1d(const F in[6], F out[6]) {
        const F v4 = Ops::set1(4.0f), vm4 = Ops::set1(-4.0f), vm5 = Ops::set1(-5.0f);
        const F v2 = Ops::set1(2.0f);
        const F vd42 = Ops::sub(in[4], in[2]);
        out[0] = Ops::fmadd(vm5, in[2], Ops::fmadd(v4, in[0], in[4]));
        out[1] = Ops::fmadd(vm4, Ops::add(in[1], in[2]), Ops::add(in[3], in[4]));
        out[2] = Ops::fmadd(v4, Ops::sub(in[1], in[2]), Ops::sub(in[4], in[3]));
        out[3] = Ops::fmadd(v2, Ops::sub(in[3], in[1]), vd42);
        out[4] = Ops::fmadd(v2, Ops::sub(in[1], in[3]), vd42);
        out[5] = Ops::fmadd(vm5, in[3], Ops::fmadd(v4, in[1], in[5]));
    }

    // out = A^T in, a term through at most 3 roundings.
    static void output_1d(const F in[6], F out[4]) {
        const F vs12 = Ops::add(in[1], in[2]), vd12 = Ops::sub(in[1], in[2]);
        const F vs34 = Ops::add(in[3], in[4]), vd34 = Ops::sub(in[3], in[4]);
        out[0] = Ops::add(Ops::add(in[0], vs12), vs34);
        out[1] = Ops::fmadd(Ops::set1(2.0f), vd34, vd12);
        out[2] = Ops::fmadd(Ops::set1(4.0f), vs34, vs12);
        out[3] = Ops::add(Ops::fmadd(Ops::set1(8.0f), vd34, vd12), in[5]);
    }

    static void input(const float* d, int64_t row_stride, int64_t phase_stride, int64_t count,
                      float* v, int64_t element_stride) {
        for (int64_t t = 0; t < count; t += Ops::kLanes) {
            F vdb[6][6];  // d B, row by row
            for (int a = 0; a < 6; ++a) {
                const float* row = d + a * row_stride + t;
                F vrow[6];
                for (int b = 0; b < 6; ++b) {
                    vrow[b] = Ops::load(row + (b % 4) * phase_stride + b / 4);
                }
                input_1d(vrow, vdb[a]);
            }
            for (int q = 0; q < 6; ++q) {
                F vcol[6], vout[6];
                for (int a = 0; a < 6; ++a) {
                    vcol[a] = vdb[a][q];
                }
                input_1d(vcol, vout);
                for (int p = 0; p < 6; ++p) {
                    Ops::store(v + (6 * p + q) * element_stride + t, vout[p]);
                }
            }
        }
    }

    static void output(const float* m, int64_t element_stride, int64_t count, float bias,
                       float lo, float hi, float* y, int64_t y_stride) {
        const F vbias = Ops::set1(bias), vlo = Ops::set1(lo), vhi = Ops::set1(hi);
        for (int64_t t = 0; t < count; t += Ops::kLanes) {
            F vam[4][6];  // A^T M, column by column
            for (int q = 0; q < 6; ++q) {
                F vcol[6], vout[4];
                for (int p = 0; p < 6; ++p) {
                    vcol[p] = Ops::load(m + (6 * p + q) * element_stride + t);
                }
                output_1d(vcol, vout);
                for (int i = 0; i < 4; ++i) {
                    vam[i][q] = vout[i];
                }
            }
            for (int i = 0; i < 4; ++i) {
                F vy[4];
                output_1d(vam[i], vy);
                // max(lo, v) then min(hi, v): each returns v where v is NaN.
                for (int j = 0; j < 4; ++j) {
                    vy[j] = Ops::min(vhi, Ops::max(vlo, Ops::add(vy[j], vbias)));
                }
                Ops::store_quads(y + i * y_stride + 4 * t, vy[0], vy[1], vy[2], vy[3]);
            }
        }
    }
};

}  // namespace detail
}  // namespace qtk
