// The padded input planes of the GEMM convs (conv2d_int8_gemm.cpp, conv2d_float32_gemm.cpp): where
// a conv pads, each input channel plane is copied once into a plane with pad_h rows and pad_w
// columns of `fill` around it (the int8 input zero point, or 0.0f), so that every im2col row is a
// plain copy with no bounds checks. Built with the baseline flags.
#pragma once

#include <algorithm>
#include <cstring>

#include "conv2d.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

inline bool pads(const Conv2dParams& p) { return p.pad_h != 0 || p.pad_w != 0; }

// Elements of all padded planes of an input of shape [N, C, H, W]; 0 where the conv does not pad.
inline int64_t padded_input_elements(const Conv2dParams& p, const Shape& x_shape) {
    return pads(p) ? x_shape[0] * x_shape[1] * (x_shape[2] + 2 * p.pad_h) *
                         (x_shape[3] + 2 * p.pad_w)
                   : 0;
}

// Every channel plane of x into its padded plane in dst ([N * C][H + 2 pad_h][W + 2 pad_w]).
template <typename T>
void pad_planes(const T* x, const Shape& x_shape, const Conv2dParams& p, T fill, T* dst,
                ThreadPool& pool) {
    const int64_t height = x_shape[2], width = x_shape[3];
    const int64_t padded_w = width + 2 * p.pad_w;
    const int64_t padded_plane = (height + 2 * p.pad_h) * padded_w;
    pool.parallel_for(x_shape[0] * x_shape[1], [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
            const T* plane = x + c * height * width;
            T* out = dst + c * padded_plane;
            std::fill_n(out, p.pad_h * padded_w, fill);
            out += p.pad_h * padded_w;
            for (int64_t iy = 0; iy < height; ++iy, out += padded_w) {
                std::fill_n(out, p.pad_w, fill);
                std::memcpy(out + p.pad_w, plane + iy * width, size_t(width) * sizeof(T));
                std::fill_n(out + p.pad_w + width, p.pad_w, fill);
            }
            std::fill_n(out, p.pad_h * padded_w, fill);
        }
    });
}

}  // namespace detail
}  // namespace qtk
