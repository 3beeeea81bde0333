// The float32 depthwise conv2d row micro-kernels behind conv2d_float32_depthwise.cpp: one file per
// ISA, each compiled with its own flags and called only where cpu_supports() its level.
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

}  // namespace detail
}  // namespace qtk
