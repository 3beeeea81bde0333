// The float32 depthwise conv2d micro-kernel behind conv2d_float32_depthwise_channels.cpp, which
// puts 16 channels in the vector lanes (the plane kernels of depthwise_float32.h put one channel's
// pixels there, which small planes leave mostly empty and strides scatter). One file per ISA,
// compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: one band of output rows [first_row, first_row + rows) of a block of `channels` (1 to
// 16) consecutive channels of one sample, NCHW in and out:
//   y(c, oy, ox) = bounds(bias[c] + sum over ky < kernel_h, kx < kernel_w of
//                         weights[16 (kernel_w ky + kx) + c] x(c, stride_h oy + dilation_h ky,
//                                                             stride_w ox + dilation_w kx))
// summed from bias in the order (ky, kx), one float32 fused multiply-add each, where x(c, u, v) is
// channel c's input padded with zeros (pad_h rows above and below, pad_w columns either side),
// and bounds(v) = min(max(v, lo), hi) passing NaN through (op_kernel.h FloatBounds): the bits of
// the plane kernels. Channel c of the input is read at x + c x_plane, of the output written at
// y + c y_plane (each a whole plane, row-major); nothing else of y is written. weights and bias
// hold 16 lanes, zeros past `channels`. scratch holds scratch_floats(args) floats; no alignment
// is required.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

constexpr int64_t kDepthwiseFloat32Lanes = 16;

struct Float32DepthwiseChannelsBand {
    const float* x;
    int64_t x_plane, in_h, in_w;
    int64_t channels;
    int64_t kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_h, pad_w;
    const float* weights;  // [kernel_h kernel_w][16]
    const float* bias;     // [16]
    float lo, hi;
    int64_t out_w, first_row, rows;
    float* y;
    int64_t y_plane;
    float* scratch;

    // The padded input rows the band reads, channels-last, then its outputs, channels-last.
    int64_t copy_rows() const { return (rows - 1) * stride_h + (kernel_h - 1) * dilation_h + 1; }
    int64_t padded_w() const { return in_w + 2 * pad_w; }
    int64_t scratch_floats() const {
        return (copy_rows() * padded_w() + rows * out_w) * kDepthwiseFloat32Lanes;
    }
};

using Float32DepthwiseChannelsFn = void (*)(const Float32DepthwiseChannelsBand& band);

extern const Float32DepthwiseChannelsFn kFloat32DepthwiseChannelsAvx512;

}  // namespace detail
}  // namespace qtk
