// The binary convolution micro-kernels behind conv2d_binary (conv2d_binary_popcount.cpp): one file
// per ISA, each compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: sums[o * sums_stride + p] = (products - 2 count[p][o]) 2^scale - missed[p][o], with
//   count[p][o] = sum over taps t < taps, words j < words of
//                 popcount(pixel[p][tap_offset[t] + j] xor w[t][j][o]),
// for p < pixels, o < channels (the sum of spec 24 where padded bits read +1), with
//   pixel  `pixels` pointers into a bit image of 64-bit words (bit 1 for -1, spec 24), each the
//          receptive field's first word of one output pixel;
//   w      the weight bits of `channels` output channels, packed [taps][words][channels];
//   sums   int32, a row of `pixels` values per output channel, sums_stride apart (the layout in
//          which the epilogue requantizes a channel's output row);
//   scale  where the caller's requantization wants the sums scaled (at most what keeps them in
//          int32; 0 else);
//   missed null (read as 0), or per pixel a row of `channels` values to subtract: the weights
//          of the taps a window that passes the input misses (pad_value 0), scaled alike.
// No alignment is required. A count is at most 64 * taps * words, far inside int32.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

#include "requantize_int8.h"

namespace qtk {
namespace detail {

struct BinaryPopcountUkernel {
    int pixels;    // output pixels per call, at most 8
    int channels;  // output channels per call
    void (*run)(const uint64_t* const* pixel, const int64_t* tap_offset, int64_t taps,
                int64_t words, const uint64_t* w, int32_t products, int scale,
                const int32_t* const* missed, int32_t* sums, int64_t sums_stride);
    // The packing of an int8 activation's signs into the bit image, 64 channels by 64 pixels:
    //   words[i] bit c = (x[c * channel_stride + i] < thresholds[c]), for i < pixels,
    // c < channels (<= 64), thresholds in [-128, 128] (-128: never, 128: always), the bits from
    // `channels` on 0. Null where the driver's portable packing serves.
    void (*pack)(const int8_t* x, int64_t channel_stride, int64_t channels, int64_t pixels,
                 const int32_t* thresholds, uint64_t* words);
};

// The row micro-kernel: `pixels` consecutive output pixels of a row (stride_w 1) in the lanes of
// a register, against `channels` output channels, requantized in registers and stored as int8
// (no sums written and read back, no transpose): where a layer's every shift, scaled, takes the
// high-half form (requantize_int8.h). It reads a word-planar bit image (each 64-channel word of
// every pixel in a plane of its own), so the tile's pixels' words lie side by side.
//
// Contract: for p < valid (<= pixels), o < outputs (<= channels),
//   count[p][o] = sum over t < taps, j < words of popcount(x[tap_offset[t] + j * word_stride + p]
//                 xor w[(t * words + j) * w_stride + o]),
//   S = (products - 2 count[p][o]) 2^scale - (missed ? missed[o * pixels + p] : 0),
//   y[o * y_stride + p] = clamp(((S + offset_o) M_o + 2^(n_o - 1)) >> n_o + z, lo, hi)
// with block k of `requant` holding channels 2k (lanes 0..7) and 2k + 1 (lanes 8..15), each
// channel's constants in 8 lanes (int8_high_half_blocks over channels repeated 8 times), and
// out's z, lo and hi. It reads x up to pixels - 1 words past a tap's word, whatever `valid`, and
// `channels` words of each row of w (zero past the layer's channels).
struct BinaryRowUkernel {
    int pixels;    // output pixels per call
    int channels;  // output channels per call, even
    void (*run)(const uint64_t* x, const int64_t* tap_offset, int64_t taps, int64_t words,
                int64_t word_stride, const uint64_t* w, int64_t w_stride, int32_t products,
                int scale, const int32_t* missed, const Int8HighHalfBlock* requant,
                const Int8Output& out, int64_t valid, int64_t outputs, int8_t* y,
                int64_t y_stride);
};

extern const BinaryPopcountUkernel kBinaryPopcount4x32Avx512Vbmi;
extern const BinaryRowUkernel kBinaryPopcountRow8x16Avx512Vbmi;
extern const BinaryPopcountUkernel kBinaryPopcount4x8Avx2;
extern const BinaryPopcountUkernel kBinaryPopcount4x8Neon;

}  // namespace detail
}  // namespace qtk
