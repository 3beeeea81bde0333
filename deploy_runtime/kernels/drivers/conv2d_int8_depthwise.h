// What the int8 depthwise conv2d drivers share: the geometry they compute and the per-channel
// accumulator constant. conv2d_int8_depthwise.cpp (a vector of output pixels of one channel)
// explains the constant (AVX2 and NEON); conv2d_int8_depthwise_channels.cpp vectorizes over the
// channels of one pixel instead (AVX2); conv2d_int8_depthwise_nhwc.cpp (AVX-512 VNNI) fits the same
// geometry with a constant of its own. Built with the baseline flags.
#pragma once

#include <vector>

#include "conv2d.h"

namespace qtk {
namespace detail {

// Depthwise (groups = input = output channels), 3x3 or 5x5, stride 1 or 2, dilation 1.
inline bool fits_depthwise(const Conv2dParams& p) {
    return p.group_in_channels == 1 && p.out_channels == p.groups && p.kernel_h == p.kernel_w &&
           (p.kernel_h == 3 || p.kernel_h == 5) && p.stride_h == p.stride_w &&
           (p.stride_h == 1 || p.stride_h == 2) && p.dilation_h == 1 && p.dilation_w == 1;
}

// Per output channel: bias - z * sum(w), which turns a sum of x w over every tap, padded taps
// reading x = z, into the spec's accumulator sum (x - z) w + bias.
inline std::vector<int32_t> depthwise_acc_init(const Conv2dInt8Constants& k,
                                               const Conv2dParams& p) {
    const int64_t taps = p.kernel_h * p.kernel_w;
    std::vector<int32_t> init(size_t(p.out_channels));
    for (int64_t c = 0; c < p.out_channels; ++c) {
        int32_t sum = 0;
        for (int64_t t = 0; t < taps; ++t) {
            sum += k.weight[c * taps + t];
        }
        init[size_t(c)] = k.bias[size_t(c)] - k.input_zero_point * sum;
    }
    return init;
}

}  // namespace detail
}  // namespace qtk
