// The float32 GEMM micro-kernels behind conv2d_float32_gemm.cpp: one file per ISA, each compiled
// with its own flags and called only where cpu_supports() its level.
//
// Contract: for r < rows (<= mr) and j < cols (1 <= cols <= nr), with B row k at b_k,
//   c[r * c_stride + j] = bounds(start + sum over k < k_count of a[k mr + r] * b_k[j])
// summed from start in the order of k, each step one float32 fused multiply-add, and
// bounds(v) = min(max(v, lo), hi) with NaN passing through (op_kernel.h FloatBounds). start is
// bias[r], or where bias is null c's own value: the unbounded partial sum of a call over the
// earlier k (lo = -inf, hi = +inf), so that splitting K keeps every bit. a is packed [k_count][mr]
// and bias [mr] (zeros past the real rows); b_k is read only at j < cols. `run` finds B rows at
// b + b_offsets[k] (the conv's taps, read in place from its input planes); `run_strided` at
// b + k b_stride (a packed operand). Nothing else of c is written. Each output's sum depends on its
// own row and column alone, so tiling and threads never change a bit.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

// The same sums with the roles swapped, for planes too small to fill nr pixel columns (a 7x7 plane
// is 49 of 64): output channels are the vector lanes and `pixels` (<= pixel_rows) pixels the rows.
// For p < pixels and j < channels (<= 8 oc_tiles, oc_tiles <= 4; the A tiles of mr = 8 as packed
// for `run`, w_tile_stride floats apart),
//   c[j * c_stride + p] = bounds(bias[j] + sum over k < k_count of
//                                w[(j / 8) w_tile_stride + 8 k + j % 8]
//                                * x[x_offsets[k] + pixel_offsets[p]])
// in the order of k, one fused multiply-add each: the bits of `run`. bias is read at 32 lanes.
// Nothing else of c is written.
using Float32GemmPixelsFn = void (*)(int64_t k_count, const float* w, int64_t w_tile_stride,
                                     int64_t oc_tiles, const float* x, const int64_t* x_offsets,
                                     const int64_t* pixel_offsets, int64_t pixels,
                                     const float* bias, float lo, float hi, int64_t channels,
                                     float* c, int64_t c_stride);

struct Float32GemmUkernel {
    int mr;  // output channels per tile
    int nr;  // output pixels per tile
    void (*run)(int64_t k_count, const float* a, const float* b, const int64_t* b_offsets,
                const float* bias, float lo, float hi, int64_t rows, int64_t cols, float* c,
                int64_t c_stride);
    void (*run_strided)(int64_t k_count, const float* a, const float* b, int64_t b_stride,
                        const float* bias, float lo, float hi, int64_t rows, int64_t cols,
                        float* c, int64_t c_stride);
    Float32GemmPixelsFn run_pixels = nullptr;  // where mr is 8
    int pixel_rows = 0;
};

extern const Float32GemmUkernel kFloat32Gemm6x16Avx2;
extern const Float32GemmUkernel kFloat32Gemm8x32Avx512;

}  // namespace detail
}  // namespace qtk
