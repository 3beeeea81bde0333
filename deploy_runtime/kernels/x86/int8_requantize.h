// The epilogue of the x86 int8 kernels: int32 accumulators to int8 by docs/quantization_spec.md
// section 2, vectorized; one file per ISA, each compiled with its own flags and called only where
// cpu_supports() its level.
//
// Contract: y[i] = arith::requantize(acc[i] + offset, multiplier, shift, zero_point, lo, hi), byte
// for byte, for multiplier in [0, 2^31), shift in [1, 62], -128 <= lo <= hi <= 127, and
// acc[i] + offset in int32 (a kernel's partial sum plus its per-channel constant is the spec's
// int32 accumulator, so their int32 sum wraps back to it). No alignment is required.
//
// The ISA files include only intrinsics and this header (see int8_gemm.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8Output {
    int32_t zero_point, lo, hi;
};

struct Int8RequantizeUkernel {
    // `count` values of one channel (a row of a conv's output plane).
    void (*channel)(const int32_t* acc, int64_t count, int32_t offset, int32_t multiplier,
                    int32_t shift, const Int8Output& out, int8_t* y);
    // One value of each of `count` consecutive channels (a linear's output features): offset,
    // multiplier and shift are per i.
    void (*channels)(const int32_t* acc, int64_t count, const int32_t* offset,
                     const int32_t* multiplier, const int32_t* shift, const Int8Output& out,
                     int8_t* y);
};

extern const Int8RequantizeUkernel kInt8RequantizeAvx2;
extern const Int8RequantizeUkernel kInt8RequantizeAvx512;

}  // namespace detail
}  // namespace qtk
