// int8 conv2d on CUDA as an implicit GEMM with dp4a (sm_61 and later): the tile code, written once
// as host-device functions. The GPU kernel (conv2d_int8_dp4a.cu) runs them with __syncthreads
// between the phases; run_conv2d_dp4a_on_host() runs the same functions for every thread of every
// block on the CPU, one phase at a time, so the indexing and the arithmetic are tested without a
// GPU (tests/test_cuda_host.cpp, byte for byte against the CPU reference conv).
//
// Layouts (NCHW4, MegEngine's): activations [N][C4][H][W][4] int8, C4 = ceil(C / 4), channel c
// in quad c / 4, byte c % 4 (bytes past C are read against zero weights, so any value serves);
// weights [quads][O] int32 words, quad k = tap * C4 + c4 (tap = ky * kernel_w + kx) holding output
// channel o's weights of input channels 4 c4 .. 4 c4 + 3 at that tap (zero past C). The GEMM:
// M = O output channels, N = batch * out_h * out_w pixels, K = taps * C4 quads.
//
// Arithmetic (spec 4): acc = bias[o] + sum (x - zx) w over the window's inside positions. A padded
// position reads zx in each byte, so it adds (zx - zx) w = 0; the tiles sum raw x w with dp4a
// from folded_bias[o] = bias[o] - zx sum w[o]. That sum is taken modulo 2^32 (dp4a's int32
// adds wrap, and the host's dot4 does the same in uint32), which gives acc exactly, since acc
// itself lies in int32 (the loader's accumulator check). The epilogue is arith::requantize.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "qtk/arithmetic.h"

namespace qtk {
namespace cuda {

struct Conv2dDp4aParams {
    const int32_t* x;            // NCHW4 words: [batch][c_quads][height][width]
    const int32_t* w;            // [quads()][out_channels]
    const int32_t* folded_bias;  // [out_channels]
    const int32_t* multiplier;   // [out_channels]
    const int32_t* shift;        // [out_channels]
    int8_t* y;                   // NCHW4 bytes: [batch][ceil(out_channels / 4)][out_h][out_w][4]
    int32_t padding_word;        // zx in each of the 4 bytes
    int32_t y_zero_point, lo, hi;
    int32_t batch, c_quads, height, width;
    int32_t out_channels, out_h, out_w;
    int32_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;

    QTK_HOST_DEVICE int32_t quads() const { return kernel_h * kernel_w * c_quads; }
    QTK_HOST_DEVICE int32_t pixels() const { return batch * out_h * out_w; }
};

// A block computes 32 output channels x 64 pixels, stepping K 8 quads at a time through shared
// memory; each of its 128 threads owns 4 channels x 4 pixels.
constexpr int kDp4aTileChannels = 32, kDp4aTilePixels = 64, kDp4aTileQuads = 8;
constexpr int kDp4aThreads = 128;
constexpr int kDp4aThreadChannels = 4, kDp4aThreadPixels = 4;
static_assert(kDp4aTileChannels * kDp4aTilePixels ==
                  kDp4aThreads * kDp4aThreadChannels * kDp4aThreadPixels,
              "the threads cover the tile");

struct Conv2dDp4aShared {
    int32_t w[kDp4aTileQuads][kDp4aTileChannels];
    int32_t x[kDp4aTileQuads][kDp4aTilePixels];
};

struct Conv2dDp4aAcc {
    int32_t v[kDp4aThreadChannels][kDp4aThreadPixels];
};

// c + the four signed byte products of a and b, wrapping as dp4a does.
QTK_HOST_DEVICE inline int32_t dot4(int32_t a, int32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    uint32_t sum = static_cast<uint32_t>(c);
    for (int i = 0; i < 4; ++i) {
        const int32_t ai = static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i));
        const int32_t bi = static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i));
        sum += static_cast<uint32_t>(ai * bi);
    }
    return static_cast<int32_t>(sum);
#endif
}

// Phase 1: thread `thread` of block (channel_block, pixel_block) copies its share of the weight
// and activation tiles of quads [q0, q0 + 8) to shared memory: zero past the quads, the channels
// and the pixels, the padding word at a padded position.
QTK_HOST_DEVICE inline void load_dp4a_tiles(const Conv2dDp4aParams& p, int channel_block,
                                            int pixel_block, int thread, int32_t q0,
                                            Conv2dDp4aShared& s) {
    const int32_t quads = p.quads(), pixels = p.pixels();
    for (int e = thread; e < kDp4aTileQuads * kDp4aTileChannels; e += kDp4aThreads) {
        const int q = e / kDp4aTileChannels, c = e % kDp4aTileChannels;
        const int32_t k = q0 + q, o = channel_block * kDp4aTileChannels + c;
        s.w[q][c] = k < quads && o < p.out_channels ? p.w[int64_t{k} * p.out_channels + o] : 0;
    }
    for (int e = thread; e < kDp4aTileQuads * kDp4aTilePixels; e += kDp4aThreads) {
        const int q = e / kDp4aTilePixels, j = e % kDp4aTilePixels;
        const int32_t k = q0 + q, pixel = pixel_block * kDp4aTilePixels + j;
        int32_t word = 0;
        if (k < quads && pixel < pixels) {
            const int32_t tap = k / p.c_quads, c4 = k % p.c_quads;
            const int32_t n = pixel / (p.out_h * p.out_w), at = pixel % (p.out_h * p.out_w);
            const int32_t iy =
                at / p.out_w * p.stride_h - p.pad_h + tap / p.kernel_w * p.dilation_h;
            const int32_t ix =
                at % p.out_w * p.stride_w - p.pad_w + tap % p.kernel_w * p.dilation_w;
            const bool inside = iy >= 0 && iy < p.height && ix >= 0 && ix < p.width;
            word = inside ? p.x[((int64_t{n} * p.c_quads + c4) * p.height + iy) * p.width + ix]
                          : p.padding_word;
        }
        s.x[q][j] = word;
    }
}

// Phase 2: the thread's 4 x 4 outputs take the 8 quads in shared memory.
QTK_HOST_DEVICE inline void multiply_dp4a_tiles(const Conv2dDp4aShared& s, int thread,
                                                Conv2dDp4aAcc& acc) {
    const int c0 = thread % (kDp4aTileChannels / kDp4aThreadChannels) * kDp4aThreadChannels;
    const int j0 = thread / (kDp4aTileChannels / kDp4aThreadChannels) * kDp4aThreadPixels;
    for (int q = 0; q < kDp4aTileQuads; ++q) {
        for (int i = 0; i < kDp4aThreadChannels; ++i) {
            for (int j = 0; j < kDp4aThreadPixels; ++j) {
                acc.v[i][j] = dot4(s.w[q][c0 + i], s.x[q][j0 + j], acc.v[i][j]);
            }
        }
    }
}

// Phase 3: the epilogue, each of the thread's outputs inside the output requantized and stored.
QTK_HOST_DEVICE inline void store_dp4a_tile(const Conv2dDp4aParams& p, int channel_block,
                                            int pixel_block, int thread,
                                            const Conv2dDp4aAcc& acc) {
    const int c0 = thread % (kDp4aTileChannels / kDp4aThreadChannels) * kDp4aThreadChannels;
    const int j0 = thread / (kDp4aTileChannels / kDp4aThreadChannels) * kDp4aThreadPixels;
    const int32_t plane = p.out_h * p.out_w, out_quads = (p.out_channels + 3) / 4;
    for (int i = 0; i < kDp4aThreadChannels; ++i) {
        const int32_t o = channel_block * kDp4aTileChannels + c0 + i;
        for (int j = 0; j < kDp4aThreadPixels; ++j) {
            const int32_t pixel = pixel_block * kDp4aTilePixels + j0 + j;
            if (o >= p.out_channels || pixel >= p.pixels()) {
                continue;
            }
            const int32_t sum = static_cast<int32_t>(static_cast<uint32_t>(acc.v[i][j]) +
                                                     static_cast<uint32_t>(p.folded_bias[o]));
            const int32_t n = pixel / plane, at = pixel % plane;
            p.y[((int64_t{n} * out_quads + o / 4) * plane + at) * 4 + o % 4] = arith::requantize(
                sum, p.multiplier[o], p.shift[o], p.y_zero_point, p.lo, p.hi);
        }
    }
}

inline int32_t dp4a_channel_blocks(const Conv2dDp4aParams& p) {
    return (p.out_channels + kDp4aTileChannels - 1) / kDp4aTileChannels;
}
inline int32_t dp4a_pixel_blocks(const Conv2dDp4aParams& p) {
    return (p.pixels() + kDp4aTilePixels - 1) / kDp4aTilePixels;
}

// The GPU kernel's schedule on the CPU: per block, every thread's loads, then every thread's
// products (what __syncthreads separates on the GPU), K tile by K tile, then every thread's
// epilogue.
inline void run_conv2d_dp4a_on_host(const Conv2dDp4aParams& p) {
    std::vector<Conv2dDp4aAcc> acc(kDp4aThreads);
    Conv2dDp4aShared shared;
    for (int32_t cb = 0; cb < dp4a_channel_blocks(p); ++cb) {
        for (int32_t pb = 0; pb < dp4a_pixel_blocks(p); ++pb) {
            std::fill(acc.begin(), acc.end(), Conv2dDp4aAcc{});
            for (int32_t q0 = 0; q0 < p.quads(); q0 += kDp4aTileQuads) {
                for (int t = 0; t < kDp4aThreads; ++t) {
                    load_dp4a_tiles(p, cb, pb, t, q0, shared);
                }
                for (int t = 0; t < kDp4aThreads; ++t) {
                    multiply_dp4a_tiles(shared, t, acc[size_t(t)]);
                }
            }
            for (int t = 0; t < kDp4aThreads; ++t) {
                store_dp4a_tile(p, cb, pb, t, acc[size_t(t)]);
            }
        }
    }
}

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in conv2d_int8_dp4a.cu, built where QTK_CUDA is on.
int launch_conv2d_dp4a(const Conv2dDp4aParams& p, void* stream);

// ---- host-side packing into the kernel's layouts ------------------------------------------------

inline int32_t pack_quad(const int8_t bytes[4]) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) {
        word |= uint32_t(uint8_t(bytes[i])) << (8 * i);
    }
    return static_cast<int32_t>(word);
}

// NCHW int8 [n][c][h][w] -> NCHW4 words, the bytes past c set to `fill`.
inline std::vector<int32_t> to_nchw4(const int8_t* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                     int8_t fill = 0) {
    const int64_t quads = (c + 3) / 4, plane = h * w;
    std::vector<int32_t> out(size_t(n * quads * plane));
    for (int64_t b = 0; b < n; ++b) {
        for (int64_t q = 0; q < quads; ++q) {
            for (int64_t i = 0; i < plane; ++i) {
                int8_t bytes[4];
                for (int64_t k = 0; k < 4; ++k) {
                    const int64_t ch = 4 * q + k;
                    bytes[k] = ch < c ? x[(b * c + ch) * plane + i] : fill;
                }
                out[size_t((b * quads + q) * plane + i)] = pack_quad(bytes);
            }
        }
    }
    return out;
}

// NCHW4 bytes [n][ceil(c / 4)][h][w][4] -> NCHW int8 [n][c][h][w].
inline std::vector<int8_t> from_nchw4(const int8_t* y, int64_t n, int64_t c, int64_t h,
                                      int64_t w) {
    const int64_t quads = (c + 3) / 4, plane = h * w;
    std::vector<int8_t> out(size_t(n * c * plane));
    for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t i = 0; i < plane; ++i) {
                out[size_t((b * c + ch) * plane + i)] = y[((b * quads + ch / 4) * plane + i) * 4 +
                                                          ch % 4];
            }
        }
    }
    return out;
}

// Weights [o][c][kh][kw] int8 -> the kernel's [taps * C4][o] words.
inline std::vector<int32_t> pack_dp4a_weights(const int8_t* weight, int64_t o, int64_t c,
                                              int64_t kh, int64_t kw) {
    const int64_t quads = (c + 3) / 4, taps = kh * kw;
    std::vector<int32_t> out(size_t(taps * quads * o));
    for (int64_t tap = 0; tap < taps; ++tap) {
        for (int64_t q = 0; q < quads; ++q) {
            for (int64_t oc = 0; oc < o; ++oc) {
                int8_t bytes[4];
                for (int64_t k = 0; k < 4; ++k) {
                    const int64_t ch = 4 * q + k;
                    bytes[k] = ch < c ? weight[(oc * c + ch) * taps + tap] : int8_t{0};
                }
                out[size_t((tap * quads + q) * o + oc)] = pack_quad(bytes);
            }
        }
    }
    return out;
}

// bias[o] - zx sum w[o], modulo 2^32 (see the top of the file).
inline std::vector<int32_t> fold_dp4a_bias(const int32_t* bias, const int8_t* weight, int64_t o,
                                           int64_t products_per_output, int32_t zx) {
    std::vector<int32_t> out(static_cast<size_t>(o));
    for (int64_t oc = 0; oc < o; ++oc) {
        int64_t sum = 0;
        for (int64_t i = 0; i < products_per_output; ++i) {
            sum += weight[oc * products_per_output + i];
        }
        out[size_t(oc)] = static_cast<int32_t>(static_cast<uint32_t>(bias[oc]) -
                                               static_cast<uint32_t>(int64_t{zx} * sum));
    }
    return out;
}

}  // namespace cuda
}  // namespace qtk
