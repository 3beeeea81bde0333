// The graph's NCHW int8 tensors to and from the NCHW4 layout of the CUDA kernels, on the device
// (a DeviceSession's inputs and outputs): one thread per output byte (each_byte.cuh). NCHW4's
// bytes past the channels in the last quad are written 0.
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

struct LayoutParams {
    const int8_t* x;
    int8_t* y;
    int32_t batch, channels, plane;  // [N, C, H W]; [N, C] is a plane of 1

    QTK_HOST_DEVICE int64_t nchw_bytes() const { return int64_t{batch} * channels * plane; }
    QTK_HOST_DEVICE int64_t nchw4_bytes() const {
        return int64_t{batch} * ((channels + 3) / 4) * plane * 4;
    }
};

// y (NCHW4) from x (NCHW).
struct ToNchw4Output {
    LayoutParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        const int32_t quads = (p.channels + 3) / 4;
        const int64_t at = e / 4 % p.plane, quad = e / 4 / p.plane % quads;
        const int64_t n = e / 4 / p.plane / quads, c = 4 * quad + e % 4;
        p.y[e] = c < p.channels ? p.x[(n * p.channels + c) * p.plane + at] : int8_t{0};
    }
};

// y (NCHW) from x (NCHW4).
struct FromNchw4Output {
    LayoutParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        const int32_t quads = (p.channels + 3) / 4;
        const int64_t at = e % p.plane, c = e / p.plane % p.channels;
        const int64_t n = e / p.plane / p.channels;
        p.y[e] = p.x[((n * quads + c / 4) * p.plane + at) * 4 + c % 4];
    }
};

inline void run_to_nchw4_on_host(const LayoutParams& p) {
    run_each_byte_on_host(ToNchw4Output{p}, p.nchw4_bytes());
}
inline void run_from_nchw4_on_host(const LayoutParams& p) {
    run_each_byte_on_host(FromNchw4Output{p}, p.nchw_bytes());
}

// Launch the GPU kernels on `stream` (a cudaStream_t; null: the default stream); return their
// cudaError_t (0: launched). Defined in layout_int8.cu, built where QTK_CUDA is on.
int launch_to_nchw4(const LayoutParams& p, void* stream);
int launch_from_nchw4(const LayoutParams& p, void* stream);

}  // namespace cuda
}  // namespace qtk
