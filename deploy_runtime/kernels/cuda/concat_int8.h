// int8 concatenation along channels on CUDA, NCHW4 in and out (docs/cuda.md): one thread per
// output byte (each_byte.cuh) finds its input and channel, and rescales the byte on its own
// (spec 3: M = 2^30, n = 30 where an input has the output's parameters, an exact copy). An input's
// channels need not fill whole quads: its channel c lands in the output's quad (offset + c) / 4.
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

constexpr int kConcatMaxInputs = 8;  // the params travel by value to the kernel

struct ConcatInput {
    const int8_t* x;  // NCHW4 bytes: [batch][ceil(channels / 4)][plane][4]
    int32_t channels, zero_point, multiplier, shift;
};

struct ConcatParams {
    ConcatInput inputs[kConcatMaxInputs];
    int32_t input_count;
    int8_t* y;  // NCHW4 bytes: [batch][ceil(out channels / 4)][plane][4]
    int32_t batch, plane;
    int32_t zero_point;  // the output's

    QTK_HOST_DEVICE int32_t out_channels() const {
        int32_t channels = 0;
        for (int32_t i = 0; i < input_count; ++i) {
            channels += inputs[i].channels;
        }
        return channels;
    }
    QTK_HOST_DEVICE int64_t output_bytes() const {
        return int64_t{batch} * ((out_channels() + 3) / 4) * plane * 4;
    }
};

struct ConcatOutput {
    ConcatParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        Nchw4Position y = nchw4_position(e, (p.out_channels() + 3) / 4, p.plane);
        for (int32_t i = 0; i < p.input_count; ++i) {
            const ConcatInput& in = p.inputs[i];
            if (y.c < in.channels) {
                const int8_t q = in.x[nchw4_offset(y.n, y.c, y.at, (in.channels + 3) / 4, p.plane)];
                p.y[e] = arith::rescale(q, in.zero_point, in.multiplier, in.shift, p.zero_point);
                return;
            }
            y.c -= in.channels;
        }
    }
};

inline void run_concat_on_host(const ConcatParams& p) {
    run_each_byte_on_host(ConcatOutput{p}, p.output_bytes());
}

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in concat_int8.cu, built where QTK_CUDA is on.
int launch_concat(const ConcatParams& p, void* stream);

}  // namespace cuda
}  // namespace qtk
