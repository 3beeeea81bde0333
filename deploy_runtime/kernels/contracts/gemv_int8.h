// The int8 GEMV micro-kernels behind the linear (linear_int8_gemv.cpp): one file per ISA, each
// compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: c[j] = sum over b < k_blocks, i < kr of w[b][j][i] * u[kr b + i], exact in int32, with
//   w  int8 weights, packed [k_blocks][nr][kr]: kr consecutive k of one output feature;
//   u  the activations of one sample, [k_blocks * kr]: uint8 x + 128 for a micro-kernel with
//      x_offset 128 (x86), int8 x for x_offset 0 (aarch64's signed products), as in gemm_int8.h;
//   c  int32 [nr].
// No alignment is required. The caller guarantees |every partial sum| < 2^31.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8GemvUkernel {
    int nr;  // output features per call
    int kr;  // k per packed group: 4 for vpdpbusd, 2 for vpmaddwd
    void (*run)(int64_t k_blocks, const int8_t* w, const uint8_t* u, int32_t* c);
    int32_t x_offset = 128;  // what u adds to x: 128 or 0
};

extern const Int8GemvUkernel kInt8Gemv32c2Avx2;
extern const Int8GemvUkernel kInt8Gemv64c4Avx512Vnni;
extern const Int8GemvUkernel kInt8Gemv16c4Neon;
extern const Int8GemvUkernel kInt8Gemv16c4Dotprod;

}  // namespace detail
}  // namespace qtk
