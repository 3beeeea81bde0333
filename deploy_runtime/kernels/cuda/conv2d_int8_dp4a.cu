// The int8 conv2d dp4a kernel on the GPU: the phases of conv2d_int8_dp4a.h, which the CPU tests
// run thread by thread, here run by a block's threads with __syncthreads between them.
#include <cuda_runtime.h>

#include "conv2d_int8_dp4a.h"

namespace qtk {
namespace cuda {
namespace {

__global__ void __launch_bounds__(kBlockThreads) conv2d_int8_dp4a(Conv2dNchw4Params p) {
    __shared__ Conv2dNchw4Tile tile;
    Dp4aAcc acc = {};
    const int channel_block = blockIdx.y, pixel_block = blockIdx.x, thread = threadIdx.x;
    const PixelOrigin origin = pixel_origin(p, pixel_block, thread);
    for (int32_t q0 = 0; q0 < p.quads(); q0 += kTileQuads) {
        load_conv2d_tile(p, channel_block, origin, thread, q0, tile);
        __syncthreads();
        multiply_dp4a(tile, thread, acc);
        __syncthreads();
    }
    store_dp4a(p, channel_block, pixel_block, thread, acc);
}

}  // namespace

int launch_conv2d_dp4a(const Conv2dNchw4Params& p, void* stream) {
    const dim3 grid(pixel_blocks(p), channel_blocks(p));
    conv2d_int8_dp4a<<<grid, kBlockThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace qtk
