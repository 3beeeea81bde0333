// int8 conv2d on CUDA tensor cores (sm_80 and later): the implicit GEMM of conv2d_int8_nchw4.h,
// its K steps of 32 bytes each one mma.sync.m16n8k32 int8 per warp and 8-pixel column. The block
// tile and the phase that stages it in shared memory are the dp4a kernel's; what differs is who
// multiplies what: the block's 4 warps each own 16 output channels x 32 pixels (4 mma tiles of
// 16 x 8), and an mma is a warp's collective instruction, its operands spread over the 32 lanes'
// registers in the fragment layout of the PTX ISA ("Matrix Fragments for mma.m16n8k32", integer
// types). With g = lane / 4 and t = lane % 4:
//   A (16 x 32, row): a0 = A[g][4t .. 4t+3], a1 = A[g+8][4t ..], a2 = A[g][16+4t ..],
//                     a3 = A[g+8][16+4t ..]    (4 bytes of K in each register, lowest first)
//   B (32 x 8, col):  b0 = B[4t .. 4t+3][g], b1 = B[16+4t ..][g]
//   C, D (16 x 8):    c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
// A word of the shared tile holds 4 bytes of K of one channel (A: quad q of channel o) or one pixel
// (B), so each register is one word: a0 = w[t][m0 + g], b0 = x[t][n0 + g] and so on.
//
// On the CPU (run_conv2d_mma_on_host) the lanes' fragments come from the same functions, and
// mma_m16n8k32_on_host() computes the instruction's definition, D = C + A B with A and B rebuilt
// from the 32 lanes' registers by the layout above and D scattered back by it, its int32 adds
// wrapping (no .satfinite): a fragment put in the wrong lane or register gives wrong bytes.
#pragma once

#include <vector>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

constexpr int kWarpLanes = 32;
constexpr int kMmaM = 16, kMmaN = 8, kMmaKQuads = 8;  // K = 32 bytes = 8 quads: one tile step
constexpr int kMmaWarpChannels = 16, kMmaWarpPixels = 32;
constexpr int kMmaTilesPerWarp = kMmaWarpPixels / kMmaN;  // along the pixels
static_assert(kMmaKQuads == kTileQuads, "one mma K step per shared tile");
static_assert((kTileChannels / kMmaWarpChannels) * (kTilePixels / kMmaWarpPixels) * kWarpLanes ==
                  kBlockThreads,
              "the block's warps cover the tile");

struct MmaFragments {
    int32_t a[4], b[2];
};

struct MmaAcc {
    int32_t c[kMmaTilesPerWarp][4];
};

// The warp's first channel and pixel in the block tile.
QTK_HOST_DEVICE inline int mma_warp_channel(int warp) {
    return warp % (kTileChannels / kMmaWarpChannels) * kMmaWarpChannels;
}
QTK_HOST_DEVICE inline int mma_warp_pixel(int warp) {
    return warp / (kTileChannels / kMmaWarpChannels) * kMmaWarpPixels;
}

// Lane `lane`'s registers for the warp's mma tile `tile` (pixels n0 .. n0 + 7) of the K step in
// shared memory.
QTK_HOST_DEVICE inline MmaFragments mma_fragments(const Conv2dNchw4Tile& s, int warp, int lane,
                                                  int tile) {
    const int g = lane / 4, t = lane % 4;
    const int m0 = mma_warp_channel(warp), n0 = mma_warp_pixel(warp) + tile * kMmaN;
    return {{s.w[t][m0 + g], s.w[t][m0 + g + 8], s.w[4 + t][m0 + g], s.w[4 + t][m0 + g + 8]},
            {s.x[t][n0 + g], s.x[4 + t][n0 + g]}};
}

// The (row, column) of the warp's mma tile that register r of lane `lane`'s D holds.
QTK_HOST_DEVICE inline int mma_d_row(int lane, int r) { return lane / 4 + (r >= 2 ? 8 : 0); }
QTK_HOST_DEVICE inline int mma_d_column(int lane, int r) { return lane % 4 * 2 + (r & 1); }

#ifdef __CUDACC__
__device__ inline void mma_m16n8k32(int32_t (&c)[4], const MmaFragments& f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(f.a[0]), "r"(f.a[1]), "r"(f.a[2]), "r"(f.a[3]), "r"(f.b[0]), "r"(f.b[1]));
#else
    (void)c;
    (void)f;
    __trap();  // an architecture without int8 mma: the caller launches this on sm_80+ only
#endif
}
#endif

// The instruction's definition for a whole warp: lanes' fragments f[32], accumulators c[32][4].
inline void mma_m16n8k32_on_host(const MmaFragments (&f)[kWarpLanes],
                                 int32_t (&c)[kWarpLanes][4]) {
    int32_t a[kMmaM][4 * kMmaKQuads], b[4 * kMmaKQuads][kMmaN];
    for (int lane = 0; lane < kWarpLanes; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; ++i) {
            a[g][4 * t + i] = signed_byte(f[lane].a[0], i);
            a[g + 8][4 * t + i] = signed_byte(f[lane].a[1], i);
            a[g][16 + 4 * t + i] = signed_byte(f[lane].a[2], i);
            a[g + 8][16 + 4 * t + i] = signed_byte(f[lane].a[3], i);
            b[4 * t + i][g] = signed_byte(f[lane].b[0], i);
            b[16 + 4 * t + i][g] = signed_byte(f[lane].b[1], i);
        }
    }
    for (int lane = 0; lane < kWarpLanes; ++lane) {
        for (int r = 0; r < 4; ++r) {  // the layout as the PTX ISA states it, not the kernel's
            const int row = lane / 4 + 8 * (r / 2), column = 2 * (lane % 4) + r % 2;
            for (int k = 0; k < 4 * kMmaKQuads; ++k) {
                c[lane][r] = wrapping_add(c[lane][r], a[row][k] * b[k][column]);
            }
        }
    }
}

// Phase 3: the epilogue of the thread's outputs.
QTK_HOST_DEVICE inline void store_mma(const Conv2dNchw4Params& p, int channel_block,
                                      int pixel_block, int thread, const MmaAcc& acc) {
    const int warp = thread / kWarpLanes, lane = thread % kWarpLanes;
    for (int tile = 0; tile < kMmaTilesPerWarp; ++tile) {
        for (int r = 0; r < 4; ++r) {
            store_conv2d_output(
                p, channel_block * kTileChannels + mma_warp_channel(warp) + mma_d_row(lane, r),
                pixel_block * kTilePixels + mma_warp_pixel(warp) + tile * kMmaN +
                    mma_d_column(lane, r),
                acc.c[tile][r]);
        }
    }
}

// The GPU kernel's schedule on the CPU: per block and K step, every thread's loads (phase 1),
// then each warp's mma tiles, its lanes' fragments gathered and the instruction computed for all
// of them; at the end every thread's epilogue.
inline void run_conv2d_mma_on_host(const Conv2dNchw4Params& p) {
    constexpr int kWarps = kBlockThreads / kWarpLanes;
    std::vector<MmaAcc> acc(kBlockThreads);
    Conv2dNchw4Tile tile;
    for (int32_t cb = 0; cb < channel_blocks(p); ++cb) {
        for (int32_t pb = 0; pb < pixel_blocks(p); ++pb) {
            std::fill(acc.begin(), acc.end(), MmaAcc{});
            for (int32_t q0 = 0; q0 < p.quads(); q0 += kTileQuads) {
                for (int t = 0; t < kBlockThreads; ++t) {
                    load_conv2d_tile(p, cb, pixel_origin(p, pb, t), t, q0, tile);
                }
                for (int warp = 0; warp < kWarps; ++warp) {
                    for (int mma_tile = 0; mma_tile < kMmaTilesPerWarp; ++mma_tile) {
                        MmaFragments f[kWarpLanes];
                        int32_t c[kWarpLanes][4];
                        for (int lane = 0; lane < kWarpLanes; ++lane) {
                            f[lane] = mma_fragments(tile, warp, lane, mma_tile);
                            std::copy(acc[size_t(warp * kWarpLanes + lane)].c[mma_tile],
                                      acc[size_t(warp * kWarpLanes + lane)].c[mma_tile] + 4,
                                      c[lane]);
                        }
                        mma_m16n8k32_on_host(f, c);
                        for (int lane = 0; lane < kWarpLanes; ++lane) {
                            std::copy(c[lane], c[lane] + 4,
                                      acc[size_t(warp * kWarpLanes + lane)].c[mma_tile]);
                        }
                    }
                }
            }
            for (int t = 0; t < kBlockThreads; ++t) {
                store_mma(p, cb, pb, t, acc[size_t(t)]);
            }
        }
    }
}

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in conv2d_int8_mma.cu, built where QTK_CUDA is on; it runs
// on sm_80 and later only (the caller checks the device's compute capability).
int launch_conv2d_mma(const Conv2dNchw4Params& p, void* stream);

}  // namespace cuda
}  // namespace qtk
