// int8 depthwise conv2d on CUDA (groups = in channels = out channels), NCHW4 in and out
// (conv2d_int8_nchw4.h; docs/cuda.md): one thread per output byte (each_byte.cuh), in the output's
// byte order, so a warp's stores are consecutive. A depthwise window sums over taps of one channel,
// not over channels, so there is no GEMM to tile: each thread reads its window (neighbours share it
// through the cache) and requantizes.
//
// Arithmetic (spec 4): acc = bias[c] + sum over the window's inside taps of (x - zx) w, exact in
// int32 (the loader's accumulator check), then arith::requantize.
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

struct DepthwiseNchw4Params {
    const int8_t* x;         // NCHW4 bytes: [batch][ceil(channels / 4)][height][width][4]
    const int8_t* w;         // [channels][kernel_h][kernel_w]
    const int32_t* bias;     // [channels]
    const int32_t* multiplier;
    const int32_t* shift;
    int8_t* y;               // NCHW4 bytes: [batch][ceil(channels / 4)][out_h][out_w][4]
    int32_t x_zero_point, y_zero_point, lo, hi;
    int32_t batch, channels, height, width, out_h, out_w;
    Window2d window;

    // Output bytes, the padding bytes of the last channel quad included (they are left alone).
    QTK_HOST_DEVICE int64_t output_bytes() const {
        return int64_t{batch} * ((channels + 3) / 4) * out_h * out_w * 4;
    }
};

// The thread of output byte `e` (in NCHW4 order): its output, if the byte is a channel's.
struct DepthwiseOutput {
    DepthwiseNchw4Params p;
    QTK_HOST_DEVICE void operator()(int64_t e) const;
};

QTK_HOST_DEVICE inline void DepthwiseOutput::operator()(int64_t e) const {
    const int32_t quads = (p.channels + 3) / 4;
    const Nchw4Position y = nchw4_position(e, quads, p.out_h * p.out_w);
    const int32_t c = y.c;
    if (c >= p.channels) {
        return;
    }
    const int32_t oy = y.at / p.out_w, ox = y.at % p.out_w;
    const int8_t* x = p.x + nchw4_offset(y.n, c, 0, quads, p.height * p.width);
    const Window2d& window = p.window;
    const int8_t* w = p.w + int64_t{c} * window.kernel_h * window.kernel_w;
    int32_t acc = p.bias[c];
    for (int32_t ky = 0; ky < window.kernel_h; ++ky) {
        const int32_t iy = window.input_row(oy, ky);
        if (iy < 0 || iy >= p.height) {
            continue;
        }
        for (int32_t kx = 0; kx < window.kernel_w; ++kx) {
            const int32_t ix = window.input_column(ox, kx);
            if (ix >= 0 && ix < p.width) {
                acc += (int32_t{x[(int64_t{iy} * p.width + ix) * 4]} - p.x_zero_point) *
                       w[ky * window.kernel_w + kx];
            }
        }
    }
    p.y[e] = arith::requantize(acc, p.multiplier[c], p.shift[c], p.y_zero_point, p.lo, p.hi);
}

inline void run_depthwise_on_host(const DepthwiseNchw4Params& p) {
    run_each_byte_on_host(DepthwiseOutput{p}, p.output_bytes());
}

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in conv2d_int8_depthwise.cu, built where QTK_CUDA is on.
int launch_depthwise(const DepthwiseNchw4Params& p, void* stream);

}  // namespace cuda
}  // namespace qtk
