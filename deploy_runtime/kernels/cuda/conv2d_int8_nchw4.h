// What the CUDA int8 conv2d kernels share (conv2d_int8_dp4a.h, conv2d_int8_mma.h; docs/cuda.md):
// the NCHW4 layouts and their packing, the implicit GEMM's block tile and the phase that stages it
// in shared memory, and the epilogue of one output. All of it is host-device code, so the CPU
// tests run it thread by thread (tests/test_cuda_host.cpp).
//
// Layouts (NCHW4, MegEngine's): activations [N][C4][H][W][4] int8, C4 = ceil(C / 4), channel c
// in quad c / 4, byte c % 4 (bytes past C are read against zero weights, so any value serves);
// weights [quads][O] int32 words, quad k = tap * C4 + c4 (tap = ky * kernel_w + kx) holding output
// channel o's weights of input channels 4 c4 .. 4 c4 + 3 at that tap (zero past C). The GEMM:
// M = O output channels, N = batch * out_h * out_w pixels, K = taps * C4 quads.
//
// Arithmetic (spec 4): acc = bias[o] + sum (x - zx) w over the window's inside positions. A padded
// position reads zx in each byte, so it adds (zx - zx) w = 0; the kernels sum raw x w from
// folded_bias[o] = bias[o] - zx sum w[o]. That sum is taken modulo 2^32 (dp4a's and mma's int32
// adds wrap, and so do their host twins, in uint32), which gives acc exactly, since acc itself
// lies in int32 (the loader's accumulator check). The epilogue is arith::requantize.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "qtk/arithmetic.h"

namespace qtk {
namespace cuda {

// Byte e of an NCHW4 tensor of `quads` channel quads and `plane` pixels holds sample n's channel
// c at pixel `at` (c may be past the tensor's channels, in its last quad); nchw4_offset inverts it.
struct Nchw4Position {
    int64_t n;
    int32_t c, at;
};
QTK_HOST_DEVICE inline Nchw4Position nchw4_position(int64_t e, int32_t quads, int32_t plane) {
    const int64_t pixel = e / 4;
    return {pixel / plane / quads,
            static_cast<int32_t>(pixel / plane % quads) * 4 + static_cast<int32_t>(e % 4),
            static_cast<int32_t>(pixel % plane)};
}
QTK_HOST_DEVICE inline int64_t nchw4_offset(int64_t n, int32_t c, int32_t at, int32_t quads,
                                            int32_t plane) {
    return ((n * quads + c / 4) * plane + at) * 4 + c % 4;
}

// A sliding window's geometry (PyTorch's: stride, padding, dilation), shared by the convolutions
// and the pools: output row oy's tap ky reads input row input_row(oy, ky), and likewise columns.
struct Window2d {
    int32_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;

    QTK_HOST_DEVICE int32_t input_row(int32_t oy, int32_t ky) const {
        return oy * stride_h - pad_h + ky * dilation_h;
    }
    QTK_HOST_DEVICE int32_t input_column(int32_t ox, int32_t kx) const {
        return ox * stride_w - pad_w + kx * dilation_w;
    }
};

struct Conv2dNchw4Params {
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
    Window2d window;

    QTK_HOST_DEVICE int32_t quads() const { return window.kernel_h * window.kernel_w * c_quads; }
    QTK_HOST_DEVICE int32_t pixels() const { return batch * out_h * out_w; }
};

// A block computes 32 output channels x 64 pixels with 128 threads, stepping K 8 quads (32
// channels' bytes: one mma's K) at a time through shared memory.
constexpr int kTileChannels = 32, kTilePixels = 64, kTileQuads = 8, kBlockThreads = 128;

struct Conv2dNchw4Tile {
    int32_t w[kTileQuads][kTileChannels];
    int32_t x[kTileQuads][kTilePixels];
};

inline int32_t channel_blocks(const Conv2dNchw4Params& p) {
    return (p.out_channels + kTileChannels - 1) / kTileChannels;
}
inline int32_t pixel_blocks(const Conv2dNchw4Params& p) {
    return (p.pixels() + kTilePixels - 1) / kTilePixels;
}

// Every activation word a thread stages is for the same tile pixel, thread % kTilePixels, so the
// pixel's decoding (batch image, first input row and column) is done once per block, not per word
// and K step: the staging is issue-bound (its index arithmetic outweighs the multiplies).
static_assert(kBlockThreads % kTilePixels == 0, "a thread stages one pixel's words");

struct PixelOrigin {
    int64_t image;   // word offset of the pixel's batch image in x
    int32_t iy0, ix0;  // the input row and column of its window's tap (0, 0)
    bool valid;        // a pixel of the output (the last block's tail is not)
};

QTK_HOST_DEVICE inline PixelOrigin pixel_origin(const Conv2dNchw4Params& p, int pixel_block,
                                                int thread) {
    const int32_t pixel = pixel_block * kTilePixels + thread % kTilePixels;
    const int32_t plane = p.out_h * p.out_w, n = pixel / plane, at = pixel % plane;
    return {int64_t{n} * p.c_quads * p.height * p.width, p.window.input_row(at / p.out_w, 0),
            p.window.input_column(at % p.out_w, 0), pixel < p.pixels()};
}

// Phase 1: thread `thread` of block (channel_block, the pixel block of `origin`) copies its share
// of the weight and activation tiles of quads [q0, q0 + 8) to shared memory: zero past the quads,
// the channels and the pixels, the padding word at a padded position.
QTK_HOST_DEVICE inline void load_conv2d_tile(const Conv2dNchw4Params& p, int channel_block,
                                             const PixelOrigin& origin, int thread, int32_t q0,
                                             Conv2dNchw4Tile& s) {
    const int32_t quads = p.quads();
    for (int e = thread; e < kTileQuads * kTileChannels; e += kBlockThreads) {
        const int q = e / kTileChannels, c = e % kTileChannels;
        const int32_t k = q0 + q, o = channel_block * kTileChannels + c;
        s.w[q][c] = k < quads && o < p.out_channels ? p.w[int64_t{k} * p.out_channels + o] : 0;
    }
    const int j = thread % kTilePixels;
    for (int q = thread / kTilePixels; q < kTileQuads; q += kBlockThreads / kTilePixels) {
        const int32_t k = q0 + q;
        int32_t word = 0;
        if (k < quads && origin.valid) {
            const int32_t tap = k / p.c_quads, c4 = k % p.c_quads;
            const int32_t iy = origin.iy0 + tap / p.window.kernel_w * p.window.dilation_h;
            const int32_t ix = origin.ix0 + tap % p.window.kernel_w * p.window.dilation_w;
            const bool inside = iy >= 0 && iy < p.height && ix >= 0 && ix < p.width;
            word = inside ? p.x[origin.image + (int64_t{c4} * p.height + iy) * p.width + ix]
                          : p.padding_word;
        }
        s.x[q][j] = word;
    }
}

// The epilogue of output (channel o, pixel) from its raw sum, where both lie inside the output.
QTK_HOST_DEVICE inline void store_conv2d_output(const Conv2dNchw4Params& p, int32_t o,
                                                int32_t pixel, int32_t raw_sum) {
    if (o >= p.out_channels || pixel >= p.pixels()) {
        return;
    }
    const int32_t acc = static_cast<int32_t>(static_cast<uint32_t>(raw_sum) +
                                             static_cast<uint32_t>(p.folded_bias[o]));
    const int32_t plane = p.out_h * p.out_w, out_quads = (p.out_channels + 3) / 4;
    p.y[nchw4_offset(pixel / plane, o, pixel % plane, out_quads, plane)] =
        arith::requantize(acc, p.multiplier[o], p.shift[o], p.y_zero_point, p.lo, p.hi);
}

// The one-thread-per-output-byte kernels (each_byte.cuh) on the CPU: every thread in turn.
template <typename Op>
inline void run_each_byte_on_host(const Op& op, int64_t count) {
    for (int64_t e = 0; e < count; ++e) {
        op(e);
    }
}

// The unsigned wrap of int32 adds, for the host twins of dp4a and mma.
inline int32_t wrapping_add(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// Byte i (0 = lowest) of a word, as the signed value the GPU's int8 instructions read.
QTK_HOST_DEVICE inline int32_t signed_byte(int32_t word, int i) {
    return static_cast<int8_t>(static_cast<uint32_t>(word) >> (8 * i));
}

// ---- host-side packing into the kernels' layouts ------------------------------------------------

inline int32_t pack_quad(const int8_t bytes[4]) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) {
        word |= uint32_t(uint8_t(bytes[i])) << (8 * i);
    }
    return static_cast<int32_t>(word);
}

// Weights [o][c][kh][kw] int8 -> the kernels' [taps * C4][o] words.
inline std::vector<int32_t> pack_nchw4_weights(const int8_t* weight, int64_t o, int64_t c,
                                               int64_t kh, int64_t kw) {
    const int64_t quads = (c + 3) / 4, taps = kh * kw;
    std::vector<int32_t> out(static_cast<size_t>(taps * quads * o));
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
inline std::vector<int32_t> fold_nchw4_bias(const int32_t* bias, const int8_t* weight, int64_t o,
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
