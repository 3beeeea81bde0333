// The int8 conv2d tensor-core kernel on the GPU: the phases of conv2d_int8_mma.h, which the CPU
// tests run warp by warp, here run by a block's threads with __syncthreads between them.
#include <cuda_runtime.h>

#include "conv2d_int8_mma.h"

namespace qtk {
namespace cuda {
namespace {

__global__ void __launch_bounds__(kBlockThreads) conv2d_int8_mma(Conv2dNchw4Params p) {
    __shared__ Conv2dNchw4Tile tile;
    MmaAcc acc = {};
    const int channel_block = blockIdx.y, pixel_block = blockIdx.x, thread = threadIdx.x;
    const PixelOrigin origin = pixel_origin(p, pixel_block, thread);
    const int warp = thread / kWarpLanes, lane = thread % kWarpLanes;
    for (int32_t q0 = 0; q0 < p.quads(); q0 += kTileQuads) {
        load_conv2d_tile(p, channel_block, origin, thread, q0, tile);
        __syncthreads();
#pragma unroll
        for (int mma_tile = 0; mma_tile < kMmaTilesPerWarp; ++mma_tile) {
            mma_m16n8k32(acc.c[mma_tile], mma_fragments(tile, warp, lane, mma_tile));
        }
        __syncthreads();
    }
    store_mma(p, channel_block, pixel_block, thread, acc);
}

}  // namespace

int launch_conv2d_mma(const Conv2dNchw4Params& p, void* stream) {
    const dim3 grid(pixel_blocks(p), channel_blocks(p));
    conv2d_int8_mma<<<grid, kBlockThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace qtk
