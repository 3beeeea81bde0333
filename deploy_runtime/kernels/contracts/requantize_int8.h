// The epilogue of the optimized int8 kernels: int32 accumulators to int8 by
// docs/quantization_spec.md section 2, vectorized; one file per ISA, each compiled with its own flags and called only where
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
// all in int32 (|h| < 2^30), which saves the int64 shift and clamp; real int8 layers' shifts are 33
// and more (a scale ratio s_x s_w / s_y below 1/4). Binary convs' are lower (sums of signs, scale
// ratios near 1): they scale their small sums up into the form's range
// (conv2d_binary_popcount.cpp). Both ISAs also fold the zero point z into that
// rounding constant: (h + 2^(n-33) + z 2^(n-32)) >> (n - 32) = ((h + 2^(n-33)) >> (n - 32)) + z,
// as z 2^(n-32) is a multiple of the divisor, and the sum stays below 2^30 + 2^21 + 2^29 < 2^31 in
// magnitude for n <= 54 (|h| <= 2^30, |z| <= 128). The constant is (2 z + 1) 2^(n-33).
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why), and take every
// constant derived from z, lo and hi from Int8Output, which baseline code builds
// (kernels/drivers/int8_plans.cpp), so both ISAs consume one derivation.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

// The high-half form's range of shifts n, and the product bits it drops.
constexpr int32_t kHighHalfMinShift = 33, kHighHalfMaxShift = 54, kHighHalfDroppedBits = 32;

// The output's zero point and clamp, and what both forms derive from them (a plain-data plan: the
// constructor is defined out of line, in baseline code).
struct Int8Output {
    Int8Output(int32_t zero_point, int32_t lo, int32_t hi);

    int32_t zero_point, lo, hi;
    int64_t lo_from_zero_point, hi_from_zero_point;  // the int64 form clamps before adding z
    // 2 z + 1: the high-half form's rounding constant at shift n is round_odd 2^(n-33).
    int32_t round_odd;
};

// The high-half form's constants of 16 channels, as a vector form that requantizes its own
// accumulators loads them (a plain-data plan, built once per layer in baseline code): the
// accumulators' offset, M, the odd channels' M at the even lanes (vpmuldq reads only those),
// the rounding constant with z folded in, and n - 32.
struct Int8HighHalfBlock {
    int32_t offset[16], multiplier[16], multiplier_odd[16], round[16], shift[16];
};

// Fills ceil(count / 16) blocks for channels [0, count) (lanes past count requantize 0 and are
// not meant to be stored), or returns false where a channel's shift lies outside 33..54 (but for a
// zero multiplier's, which any shift serves). The multipliers may be negative (|M| < 2^31: a fused
// PReLU's negative side, spec 22): the form's identity holds for products of either sign.
bool int8_high_half_blocks(const int32_t* offset, const int32_t* multiplier, const int32_t* shift,
                           int64_t count, const Int8Output& out, Int8HighHalfBlock* blocks);

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
    // The same two by spec 22's sign rule (a fused PReLU): a value v = acc + offset below zero
    // takes (negative_multiplier, negative_shift), |negative_multiplier| < 2^31, the others
    // (multiplier, shift): y = arith::requantize_by_sign(v, ...). Null where the ISA has none (the
    // caller then requantizes value by value).
    void (*channel_by_sign)(const int32_t* acc, int64_t acc_stride, int64_t rows, int64_t count,
                            int32_t offset, int32_t multiplier, int32_t shift,
                            int32_t negative_multiplier, int32_t negative_shift,
                            const Int8Output& out, int8_t* y) = nullptr;
    void (*channels_by_sign)(const int32_t* acc, int64_t acc_stride, int64_t pixels,
                             int64_t count, const int32_t* offset, const int32_t* multiplier,
                             const int32_t* shift, const int32_t* negative_multiplier,
                             const int32_t* negative_shift, const Int8Output& out, int8_t* y,
                             int64_t y_stride) = nullptr;
};

extern const Int8RequantizeUkernel kInt8RequantizeAvx2;
extern const Int8RequantizeUkernel kInt8RequantizeAvx512;
extern const Int8RequantizeUkernel kInt8RequantizeNeon;

}  // namespace detail
}  // namespace qtk
