// The channels-last (NHWC) int8 depthwise conv2d micro-kernel behind
// conv2d_int8_depthwise_nhwc.cpp: R consecutive output rows of one block of 64 channels, k x k
// (k = 3 or 5), stride s = 1 or 2, from the int8 input to the requantized int8 output, no int32
// plane in between; and the byte transpose that serves NCHW layers through it. One file per ISA,
// compiled with its own flags and called only where cpu_supports() its level.
//
// The products. vpdpbusd multiplies 4 unsigned bytes by 4 signed bytes and adds the 4 products to
// an int32 lane, exactly. A lane holds one channel; its 4 bytes are 4 consecutive input rows of one
// column (quad g: rows 4 g .. 4 g + 3 of the s (R - 1) + k that the R output rows read), as
// u = x + 128 = x ^ 0x80. Output row r (0 <= r < R) weighs input row i of the quads by
// w[i - s r][kx], 0 outside the kernel, so one interleaving of the rows serves all R output rows:
// R = 2 at k = 3, s = 1 (4 rows, one quad), 4 at k = 5, s = 1 and 2 at k = 5, s = 2 (8 rows, two
// quads), 1 at k = 3, s = 2. sum u w = sum x w + 128 sum w, so the accumulators start at
// init = bias - (z + 128) sum w (z: the input zero point, which a padded tap reads), the spec's
// accumulator sum (x - z) w + bias at the end. |sum u w| <= 25 * 255 * 127: no int32 step wraps.
//
// The channel order. The micro-kernel interleaves the 4 rows' bytes of 64 channels with byte then
// word unpacks, which work within 128-bit lanes: vector q (0..3), 128-bit lane l, dword i holds
// channel 16 l + 4 q + i. Per-channel arrays come in that order ("permuted": entry 16 q + 4 l + i);
// the saturating packs of the requantized vectors undo it (requantize_int8_avx512.h), so the
// output bytes are in channel order.
//
// Pairs. A block of at most 32 channels (a layer's only or last block) would leave lanes 2 and 3
// empty; it holds two pixels instead: 128-bit lanes 0 and 1 the 32 channels of output pixel 2 P,
// lanes 2 and 3 those of pixel 2 P + 1, which read the columns s further. The per-channel arrays
// then hold at entry e the channel of entry e % 32 (lanes 2 and 3 repeat lanes 0 and 1).
#pragma once

#include <cstdint>

#include "requantize_int8.h"

namespace qtk {
namespace detail {

constexpr int64_t kDepthwiseNhwcBlock = 64;  // channels per block

// The channel at permuted entry e (16 q + 4 l + i) of a block (of each pixel of a block of pairs).
constexpr int64_t depthwise_nhwc_channel(int64_t e, bool pairs) {
    return (16 * (e % 16 / 4) + 4 * (e / 16) + e % 4) % (pairs ? 32 : 64);
}

// Output rows per call (R) and quads of input rows (G) at kernel k, stride s.
constexpr int64_t depthwise_nhwc_rows(int64_t k, int64_t s) {
    return s == 1 ? (k == 3 ? 2 : 4) : (k == 3 ? 1 : 2);
}
constexpr int64_t depthwise_nhwc_quads(int64_t k, int64_t s) {
    return (s * (depthwise_nhwc_rows(k, s) - 1) + k + 3) / 4;
}
constexpr int64_t kDepthwiseNhwcMaxQuads = 2;

// Output rows oy .. oy + out_rows - 1 of one block. Column ix of input row i (of the quads) is at
// rows[i] + pixel_strides[i] ix for 0 <= ix < in_w; the columns left and right of it read the zero
// point. A padding row (or one past the input rows the output rows read) points at 64 zero-point
// bytes with pixel stride 0.
struct DepthwiseNhwcRows {
    const int8_t* rows[4 * kDepthwiseNhwcMaxQuads];  // input row s oy + i - pad_h, block channel 0
    int64_t pixel_strides[4 * kDepthwiseNhwcMaxQuads];
    int64_t in_w, pad_w, out_w, stride;
    int64_t valid;  // channels in the block, 1..64 (..32 in pairs): the others read 0, not stored
    bool pairs;     // two pixels per vector (above), valid <= 32
    int32_t zero_point;  // the input's
    // [R][G][k][64 permuted channels][4]: byte b of channel e's dword for output row r, quad g and
    // column kx is w[4 g + b - s r][kx] (0 outside the kernel).
    const int8_t* weights;
    const int32_t* init;        // [64] permuted: bias - (z + 128) sum w; 0 past valid
    const int32_t* multiplier;  // [64] permuted; 0 past valid
    const int32_t* shift;       // [64] permuted; 33 past valid
    const Int8Output* out;
    int64_t out_rows;  // 1..R
    int8_t* y;         // output pixel 0 of row oy, at the block's first channel
    int64_t y_stride, y_row_stride;  // between pixels, between rows
};

using DepthwiseNhwcRowsFn = void (*)(const DepthwiseNhwcRows& rows);

struct Int8DepthwiseNhwcUkernel {
    DepthwiseNhwcRowsFn rows[2][2];  // [k == 5][s == 2]
    // dst[c dst_stride + r] = src[r src_stride + c] for r < rows, c < cols: channel planes into
    // channels-last rows and back, for the NCHW layout.
    void (*transpose)(const int8_t* src, int64_t src_stride, int64_t rows, int64_t cols,
                      int8_t* dst, int64_t dst_stride);
};

extern const Int8DepthwiseNhwcUkernel kInt8DepthwiseNhwcC64Avx512Vnni;

}  // namespace detail
}  // namespace qtk
