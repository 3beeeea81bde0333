// int8 conv2d on CUDA as an implicit GEMM with dp4a (sm_61 and later), in the NCHW4 layouts of
// conv2d_int8_nchw4.h. The GPU kernel (conv2d_int8_dp4a.cu) runs the phases below with
// __syncthreads between them; run_conv2d_dp4a_on_host() runs the same functions for every thread
// of every block on the CPU, one phase at a time (docs/cuda.md).
#pragma once

#include <vector>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

// Each of the block's 128 threads owns 4 output channels x 4 pixels of the tile.
constexpr int kDp4aThreadChannels = 4, kDp4aThreadPixels = 4;
static_assert(kTileChannels * kTilePixels ==
                  kBlockThreads * kDp4aThreadChannels * kDp4aThreadPixels,
              "the threads cover the tile");

struct Dp4aAcc {
    int32_t v[kDp4aThreadChannels][kDp4aThreadPixels];
};

// c + the four signed byte products of a and b, wrapping as dp4a does.
QTK_HOST_DEVICE inline int32_t dot4(int32_t a, int32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; ++i) {
        c = wrapping_add(c, signed_byte(a, i) * signed_byte(b, i));
    }
    return c;
#endif
}

// The tile position of the thread's first channel and pixel.
QTK_HOST_DEVICE inline int dp4a_channel(int thread) {
    return thread % (kTileChannels / kDp4aThreadChannels) * kDp4aThreadChannels;
}
QTK_HOST_DEVICE inline int dp4a_pixel(int thread) {
    return thread / (kTileChannels / kDp4aThreadChannels) * kDp4aThreadPixels;
}

// Phase 2: the thread's outputs take the 8 quads in shared memory.
QTK_HOST_DEVICE inline void multiply_dp4a(const Conv2dNchw4Tile& s, int thread, Dp4aAcc& acc) {
    const int c0 = dp4a_channel(thread), j0 = dp4a_pixel(thread);
    for (int q = 0; q < kTileQuads; ++q) {
        for (int i = 0; i < kDp4aThreadChannels; ++i) {
            for (int j = 0; j < kDp4aThreadPixels; ++j) {
                acc.v[i][j] = dot4(s.w[q][c0 + i], s.x[q][j0 + j], acc.v[i][j]);
            }
        }
    }
}

// Phase 3: the epilogue of the thread's outputs.
QTK_HOST_DEVICE inline void store_dp4a(const Conv2dNchw4Params& p, int channel_block,
                                       int pixel_block, int thread, const Dp4aAcc& acc) {
    for (int i = 0; i < kDp4aThreadChannels; ++i) {
        for (int j = 0; j < kDp4aThreadPixels; ++j) {
            store_conv2d_output(p, channel_block * kTileChannels + dp4a_channel(thread) + i,
                                pixel_block * kTilePixels + dp4a_pixel(thread) + j, acc.v[i][j]);
        }
    }
}

// The GPU kernel's schedule on the CPU: per block, every thread's loads, then every thread's
// products (what __syncthreads separates on the GPU), K tile by K tile, then every thread's
// epilogue.
inline void run_conv2d_dp4a_on_host(const Conv2dNchw4Params& p) {
    std::vector<Dp4aAcc> acc(kBlockThreads);
    Conv2dNchw4Tile tile;
    for (int32_t cb = 0; cb < channel_blocks(p); ++cb) {
        for (int32_t pb = 0; pb < pixel_blocks(p); ++pb) {
            std::fill(acc.begin(), acc.end(), Dp4aAcc{});
            for (int32_t q0 = 0; q0 < p.quads(); q0 += kTileQuads) {
                for (int t = 0; t < kBlockThreads; ++t) {
                    load_conv2d_tile(p, cb, pixel_origin(p, pb, t), t, q0, tile);
                }
                for (int t = 0; t < kBlockThreads; ++t) {
                    multiply_dp4a(tile, t, acc[size_t(t)]);
                }
            }
            for (int t = 0; t < kBlockThreads; ++t) {
                store_dp4a(p, cb, pb, t, acc[size_t(t)]);
            }
        }
    }
}

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in conv2d_int8_dp4a.cu, built where QTK_CUDA is on.
int launch_conv2d_dp4a(const Conv2dNchw4Params& p, void* stream);

}  // namespace cuda
}  // namespace qtk
