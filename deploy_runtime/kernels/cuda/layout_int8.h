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
        const Nchw4Position x = nchw4_position(e, (p.channels + 3) / 4, p.plane);
        p.y[e] = x.c < p.channels ? p.x[(x.n * p.channels + x.c) * p.plane + x.at] : int8_t{0};
    }
};

// y (NCHW) from x (NCHW4).
struct FromNchw4Output {
    LayoutParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        const int32_t at = static_cast<int32_t>(e % p.plane);
        const int32_t c = static_cast<int32_t>(e / p.plane % p.channels);
        p.y[e] = p.x[nchw4_offset(e / p.plane / p.channels, c, at, (p.channels + 3) / 4, p.plane)];
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
