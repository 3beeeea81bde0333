// The int8 conv2d dp4a kernel on the GPU: the tile functions of conv2d_int8_dp4a.h, which the CPU
// tests run thread by thread, here run by a block's threads with __syncthreads between phases.
#include <cuda_runtime.h>

#include "conv2d_int8_dp4a.h"

namespace qtk {
namespace cuda {
namespace {

__global__ void __launch_bounds__(kDp4aThreads) conv2d_int8_dp4a(Conv2dDp4aParams p) {
    __shared__ Conv2dDp4aShared shared;
    Conv2dDp4aAcc acc = {};
    const int channel_block = blockIdx.y, pixel_block = blockIdx.x, thread = threadIdx.x;
    for (int32_t q0 = 0; q0 < p.quads(); q0 += kDp4aTileQuads) {
        load_dp4a_tiles(p, channel_block, pixel_block, thread, q0, shared);
        __syncthreads();
        multiply_dp4a_tiles(shared, thread, acc);
        __syncthreads();
    }
    store_dp4a_tile(p, channel_block, pixel_block, thread, acc);
}

}  // namespace

int launch_conv2d_dp4a(const Conv2dDp4aParams& p, void* stream) {
    const dim3 grid(dp4a_pixel_blocks(p), dp4a_channel_blocks(p));
    conv2d_int8_dp4a<<<grid, kDp4aThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace qtk
