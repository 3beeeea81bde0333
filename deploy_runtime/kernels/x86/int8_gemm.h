// The int8 GEMM micro-kernels behind the x86 conv2d (conv2d_int8_gemm.cpp): one file per ISA, each
// compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: c[r][j] = sum over q < quads, i < 4 of a[q][r][i] * b[q][j][i], exact in int32, with
//   a  int8 weights, packed [quads][mr][4]: 4 consecutive k of one output channel;
//   b  uint8 activations, packed [quads][nr][4]: the same 4 k of one output pixel;
//   c  int32 [mr][nr], row-major.
// No alignment is required. The caller guarantees |every partial sum| < 2^31.
//
// The ISA files include only intrinsics and this header: an inline function or template
// instantiated there with AVX-512 flags could be the copy the linker keeps for every caller.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8GemmUkernel {
    int mr;  // output channels per tile
    int nr;  // output pixels per tile, a multiple of 16
    void (*run)(int64_t quads, const int8_t* a, const uint8_t* b, int32_t* c);
};

extern const Int8GemmUkernel kInt8Gemm2x16c4Avx2;
extern const Int8GemmUkernel kInt8Gemm4x16c4AvxVnni;
extern const Int8GemmUkernel kInt8Gemm8x32c4Avx512Vnni;

// Multiply-accumulates per second one core sustains with vpdpbusd, timed for `seconds`.
double int8_peak_macs_per_second_avx512_vnni(double seconds);

}  // namespace detail
}  // namespace qtk
