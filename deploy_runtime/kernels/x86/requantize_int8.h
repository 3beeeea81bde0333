// The epilogue of the x86 int8 kernels: int32 accumulators to int8 by docs/quantization_spec.md
// section 2, vectorized; one file per ISA, each compiled with its own flags and called only where
// cpu_supports() its level.
//
// Contract: y[i] = arith::requantize(acc[i] + offset, multiplier, shift, zero_point, lo, hi), byte
// for byte, for multiplier in [0, 2^31), shift in [1, 62], -128 <= lo <= hi <= 127, and
// acc[i] + offset in int32 (a kernel's partial sum plus its per-channel constant is the spec's
// int32 accumulator, so their int32 sum wraps back to it). No alignment is required.
//
// Both forms are exact in int64 lanes (vpmuldq). For shift n in 33..54 (at AVX-512 also in the
// per-channel form, where a vector's 16 channels all have it) they need only the products' high
// halves: with p = h 2^32 + l (0 <= l < 2^32), (p + 2^(n-1)) >> n = (h + 2^(n-33)) >> (n - 32),
// all in int32 (|h| < 2^30), which saves the int64 shift and clamp; real layers' shifts are 33 and
// more (a scale ratio s_x s_w / s_y below 1/4). Both ISAs also fold the zero point into that
// rounding constant (requantize_int8_avx512.cpp), which holds up to n = 54.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8Output {
    int32_t zero_point, lo, hi;
};

struct Int8RequantizeUkernel {
    // `rows` rows of `count` values of one channel (rows of a conv's output plane), row r at
    // acc + r * acc_stride, into rows * count consecutive bytes at y. One call per block of a
    // channel, so the constants are set up once however short its rows.
    void (*channel)(const int32_t* acc, int64_t acc_stride, int64_t rows, int64_t count,
                    int32_t offset, int32_t multiplier, int32_t shift, const Int8Output& out,
                    int8_t* y);
    // `pixels` rows of one value of each of `count` consecutive channels (a linear's output
    // features, or channels-last conv output pixels), row r at acc + r * acc_stride into
    // y + r * y_stride: offset, multiplier and shift are per channel i, set up once per call.
    void (*channels)(const int32_t* acc, int64_t acc_stride, int64_t pixels, int64_t count,
                     const int32_t* offset, const int32_t* multiplier, const int32_t* shift,
                     const Int8Output& out, int8_t* y, int64_t y_stride);
};

extern const Int8RequantizeUkernel kInt8RequantizeAvx2;
extern const Int8RequantizeUkernel kInt8RequantizeAvx512;

}  // namespace detail
}  // namespace qtk
