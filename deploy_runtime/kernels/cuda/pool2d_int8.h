// int8 max and average pooling on CUDA, NCHW4 in and out (docs/cuda.md): one thread per output
// byte (each_byte.cuh). Spec 6: the window's maximum, padding never winning; the average
// z + round_half_away(sum (q - z) / d) with PyTorch's divisor d (divisor_override, else the window
// clipped to the padded input with count_include_pad, else its in-bounds count). The output size,
// ceil_mode's included, is the caller's (out_h, out_w): every window holds an in-bounds element.
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

struct Pool2dNchw4Params {
    const int8_t* x;  // NCHW4 bytes: [batch][ceil(channels / 4)][height][width][4]
    int8_t* y;        // NCHW4 bytes: [batch][ceil(channels / 4)][out_h][out_w][4]
    int32_t batch, channels, height, width, out_h, out_w;
    Window2d window;
    bool average, count_include_pad;
    int64_t divisor_override;  // 0: none
    int32_t zero_point;        // the input's and output's (average only)

    QTK_HOST_DEVICE int64_t output_bytes() const {
        return int64_t{batch} * ((channels + 3) / 4) * out_h * out_w * 4;
    }
};

struct Pool2dOutput {
    Pool2dNchw4Params p;
    QTK_HOST_DEVICE void operator()(int64_t e) const;
};

QTK_HOST_DEVICE inline void Pool2dOutput::operator()(int64_t e) const {
    const int32_t plane = p.out_h * p.out_w;
    const int64_t quad_plane = e / 4 / plane;  // n * quads + channel quad
    const int32_t at = static_cast<int32_t>(e / 4 % plane), oy = at / p.out_w, ox = at % p.out_w;
    const int8_t* x = p.x + quad_plane * p.height * p.width * 4 + e % 4;
    const Window2d& window = p.window;
    int32_t max = arith::kInt8Min;
    int64_t sum = 0, count = 0;
    for (int32_t ky = 0; ky < window.kernel_h; ++ky) {
        const int32_t iy = window.input_row(oy, ky);
        for (int32_t kx = 0; kx < window.kernel_w; ++kx) {
            const int32_t ix = window.input_column(ox, kx);
            if (iy >= 0 && iy < p.height && ix >= 0 && ix < p.width) {
                const int32_t q = x[(int64_t{iy} * p.width + ix) * 4];
                max = q > max ? q : max;
                sum += q - p.zero_point;
                ++count;
            }
        }
    }
    if (!p.average) {
        p.y[e] = static_cast<int8_t>(max);
        return;
    }
    int64_t divisor = count;
    if (p.divisor_override != 0) {
        divisor = p.divisor_override;
    } else if (p.count_include_pad) {  // average pools have no dilation: the window is k wide
        const int32_t top = window.input_row(oy, 0), left = window.input_column(ox, 0);
        const int32_t bottom = top + window.kernel_h, right = left + window.kernel_w;
        const int32_t padded_h = p.height + window.pad_h, padded_w = p.width + window.pad_w;
        divisor = int64_t{(bottom < padded_h ? bottom : padded_h) - top} *
                  ((right < padded_w ? right : padded_w) - left);
    }
    p.y[e] = arith::average(sum, divisor, p.zero_point);
}

inline void run_pool2d_on_host(const Pool2dNchw4Params& p) {
    run_each_byte_on_host(Pool2dOutput{p}, p.output_bytes());
}

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in pool2d_int8.cu, built where QTK_CUDA is on.
int launch_pool2d(const Pool2dNchw4Params& p, void* stream);

}  // namespace cuda
}  // namespace qtk
