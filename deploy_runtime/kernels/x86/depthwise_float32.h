// The float32 depthwise conv2d micro-kernels behind conv2d_float32_depthwise.cpp: one file per ISA,
// each compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: one output row of one channel,
//   out[j] = bounds(bias + sum over t < taps of weights[t] * rows[t][j])   for j < count
// summed from bias in the order of t, each step one float32 fused multiply-add, with bounds(v) =
// min(max(v, lo), hi) passing NaN through (op_kernel.h FloatBounds). rows[t] is what tap t reads
// for output 0, the next outputs' inputs following it contiguously (the driver splits strided rows
// into phases); each is read only at [0, count). No alignment is required.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

using Float32DepthwiseRowFn = void (*)(const float* const* rows, const float* weights,
                                       int64_t taps, float bias, float lo, float hi, int64_t count,
                                       float* out);

extern const Float32DepthwiseRowFn kFloat32DepthwiseRowAvx2;
extern const Float32DepthwiseRowFn kFloat32DepthwiseRowAvx512;

// 3x3, dilation 1, stride s = 1 or 2, on the phase planes of conv2d_phase_planes.h (phase
// (py, px) at in + (s py + px) plane, rows in_pitch apart): a block of output rows of one channel,
//   out[r out_pitch + j] = bounds(bias + sum over ky, kx < 3 of
//                                 weights[3 ky + kx] * x(s r + ky, s j + kx))
// for r < rows, j < count, where x(u, c) is padded input row u, column c, which phase
// (u % s, c % s) holds at its row u / s, column c / s; summed as above (from bias, in the order
// (ky, kx), one fused multiply-add each): the bits of the row kernel over the same phases. Reads
// only what those taps read. The output rows that read a padded row share its loads (4 rows: 18
// loads a column of vectors at stride 1, 27 at stride 2, against the row kernel's 36; loads are
// what bound it).
using Float32Depthwise3x3Fn = void (*)(const float* in, int64_t in_pitch, int64_t plane,
                                       int64_t stride, const float* weights, float bias, float lo,
                                       float hi, int64_t count, int64_t rows, float* out,
                                       int64_t out_pitch);

extern const Float32Depthwise3x3Fn kFloat32Depthwise3x3Avx512;

}  // namespace detail
}  // namespace qtk
