// The int8 GEMV micro-kernels behind the x86 linear (linear_int8_gemv.cpp): one file per ISA, each
// compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: c[j] = sum over b < k_blocks, i < kr of w[b][j][i] * u[kr b + i], exact in int32, with
//   w  int8 weights, packed [k_blocks][nr][kr]: kr consecutive k of one output feature;
//   u  uint8 activations of one sample, [k_blocks * kr];
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
};

extern const Int8GemvUkernel kInt8Gemv32c2Avx2;
extern const Int8GemvUkernel kInt8Gemv64c4Avx512Vnni;

}  // namespace detail
}  // namespace qtk
