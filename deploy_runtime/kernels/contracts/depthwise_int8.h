// The int8 depthwise conv2d micro-kernels behind conv2d_int8_depthwise.cpp (k x k, k = 3 or 5,
// stride s = 1 or 2): one file per ISA, each compiled with its own flags and called only where
// cpu_supports() its level.
//
// Contract. A pair row holds int16 pairs, the first in the low half of each int32:
//   pairs[j] = (x[s j], x[s j + 1]) of one padded int8 input row x      (pack_pairs)
// and one output row of one channel is, exact in int32,
//   acc[o] = sum over ky < k, p < (k + 1) / 2 of rows[ky][o + 2p / s] . weights[ky (k + 1) / 2 + p]
// where weights[..] = (w[ky][2p], w[ky][2p + 1], or 0 past the kernel) in the same layout: the
// pair at o + 2p / s holds the input under taps 2p and 2p + 1 of output o, for either stride, so
// each vpmaddwd lane multiplies two taps (|x w| <= 128 * 127) and adds them in int32 (NEON's ld2
// splits the pairs into the two taps' inputs instead, each multiplied by smlal).
//
// Bounds: row(..., count, acc) reads rows[ky][0, R) with R = round_up(count, kDepthwiseMaxLanes) +
// (k - 1) / s and writes acc[0, round_up(count, kDepthwiseMaxLanes)); pack_pairs(x, count, s,
// pairs) writes pairs[0, count) and reads x[0, s (count - 1) + 2). No alignment is required.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

constexpr int64_t kDepthwiseMaxLanes = 8;  // outputs per vector, at most

using DepthwiseRowFn = void (*)(const int32_t* const* rows, const int32_t* weights, int64_t count,
                                int32_t* acc);

struct Int8DepthwiseUkernel {
    void (*pack_pairs)(const int8_t* x, int64_t count, int64_t stride, int32_t* pairs);
    DepthwiseRowFn row[2][2];  // [k == 5][s == 2]
};

extern const Int8DepthwiseUkernel kInt8DepthwiseW8Avx2;
extern const Int8DepthwiseUkernel kInt8DepthwiseW16Neon;

}  // namespace detail
}  // namespace qtk
