// The int8 depthwise conv2d micro-kernels behind conv2d_int8_depthwise_channels.cpp, which
// vectorizes over the L channels of one pixel (L = lanes: 8 for AVX2; k x k,
// k = 3 or 5, stride s = 1 or 2): one file per ISA, each compiled with its own flags and called
// only where cpu_supports() its level.
//
// Layouts. A pixel row holds, for each column j, the L channels' values as int32: row[L j + c].
// The input is sign-extended int8; the weights are int16 pairs (w, 0) (w in the low half), so one
// vpmaddwd lane multiplies x by w (the high half of x, 0 or -1, meets the 0) and the
// sum stays in int32: |sum x w| <= 25 * 128 * 127, exact.
//
//   transpose_in(channel_rows, count, row): row[L j + c] = channel_rows[c][j] for j < count,
//       c < L, channel_rows[c] == nullptr reading as 0; writes row[0, L round_up(count, 16)) and
//       reads channel_rows[c][0, count).
//   row[k == 5][s == 2](rows, weights, count, acc): for o < count, c < L,
//       acc[L o + c] = sum over ky, kx < k of rows[ky][L (s o + kx) + c] w[L (k ky + kx) + c]
//       (w = weights), reading rows[ky][0, L (s (count - 1) + k)) and writing acc[0, L count).
//   transpose_out(acc, stride, planes): planes[stride c + j] = acc[L j + c] for j, c < L.
//
// No alignment is required. The ISA files include only intrinsics and this header (see
// gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

constexpr int64_t kDepthwiseChannelsMaxLanes = 8;

using DepthwiseChannelsRowFn = void (*)(const int32_t* const* rows, const int32_t* weights,
                                        int64_t count, int32_t* acc);

struct Int8DepthwiseChannelsUkernel {
    int64_t lanes;  // L: channels per vector
    void (*transpose_in)(const int8_t* const* channel_rows, int64_t count, int32_t* row);
    DepthwiseChannelsRowFn row[2][2];  // [k == 5][s == 2]
    void (*transpose_out)(const int32_t* acc, int64_t stride, int32_t* planes);
};

extern const Int8DepthwiseChannelsUkernel kInt8DepthwiseC8Avx2;

}  // namespace detail
}  // namespace qtk
