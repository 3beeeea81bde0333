// Channel data movement on CUDA, NCHW4 in and out: output channel c is input channel
// channel_of[c], the bytes unchanged (the CPU's split along channels, and the permute of a channel
// shuffle). One thread per output byte (each_byte.cuh); the bytes of the last quad past the output
// channels are written 0.
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

struct GatherChannelsParams {
    const int8_t* x;            // NCHW4 bytes: [batch][ceil(x_channels / 4)][plane][4]
    int8_t* y;                  // NCHW4 bytes: [batch][ceil(y_channels / 4)][plane][4]
    const int32_t* channel_of;  // [y_channels], each below x_channels
    int32_t batch, x_channels, y_channels, plane;

    QTK_HOST_DEVICE int64_t output_bytes() const {
        return int64_t{batch} * ((y_channels + 3) / 4) * plane * 4;
    }
};

struct GatherChannelsOutput {
    GatherChannelsParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        const Nchw4Position y = nchw4_position(e, (p.y_channels + 3) / 4, p.plane);
        if (y.c >= p.y_channels) {
            p.y[e] = 0;
            return;
        }
        p.y[e] = p.x[nchw4_offset(y.n, p.channel_of[y.c], y.at, (p.x_channels + 3) / 4, p.plane)];
    }
};

inline void run_gather_channels_on_host(const GatherChannelsParams& p) {
    run_each_byte_on_host(GatherChannelsOutput{p}, p.output_bytes());
}

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in gather_channels_int8.cu, built where QTK_CUDA is on.
int launch_gather_channels(const GatherChannelsParams& p, void* stream);

}  // namespace cuda
}  // namespace qtk
