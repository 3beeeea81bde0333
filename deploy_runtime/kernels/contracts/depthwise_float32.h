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

// 3x3, dilation 1, stride s = 1 or 2: one channel's plane,
//   out[oy out_w + ox] = bounds(bias + sum over ky, kx < 3 of
//                               weights[3 ky + kx] * x(s oy + ky, s ox + kx))
// for oy < out_h, ox < out_w, where x(u, c) is padded input row u, column c; summed as above (from
// bias, in the order (ky, kx), one fused multiply-add each): the bits of the row kernel. x is the
// input plane itself, padding rows read from `zeros` and padding columns as masked-off lanes
// (pad_w <= stride; wider padding at stride 1 reads a zero-padded copy, conv2d_phase_planes.h,
// with pad 0).
// Output rows that read a padded row share its loads (4 rows: 18 loads a column of vectors at
// stride 1, against the row kernel's 36; loads are what bound it).
struct Float32Depthwise3x3Args {
    const float* in;            // the input plane, or its zero-padded copy
    int64_t in_pitch;           // floats between rows
    int64_t height, width;      // rows and columns of `in`
    int64_t stride, pad_h, pad_w;
    const float* zeros;         // width zeros, read for rows above and below the input
    const float* weights;       // 9
    float bias, lo, hi;
    int64_t out_h, out_w;
    float* out;
};
using Float32Depthwise3x3Fn = void (*)(const Float32Depthwise3x3Args& args);

extern const Float32Depthwise3x3Fn kFloat32Depthwise3x3Avx512;

}  // namespace detail
}  // namespace qtk
