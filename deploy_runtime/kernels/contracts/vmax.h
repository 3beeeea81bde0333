// Elementwise maximum of rows, the vertical pass of kernels/drivers/max_pool2d_rows.cpp: int8
// bytewise; float32 by src/float32_max.h's rule (a NaN wins; of equal values the bitwise AND, so
// +0 over -0). One file per ISA, each compiled with its own flags and called only where
// cpu_supports() its level. The ISA files include only intrinsics and this header (see gemm_int8.h
// for why).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qtk {
namespace detail {

template <typename T>
struct VmaxUkernel {
    // y[i] = max over r < count of rows[r][i], for i < width; count >= 1. No alignment is
    // required; y may be rows[0].
    void (*rows)(const T* const* rows, size_t count, int64_t width, T* y);
};

// A whole output row of a max pool of stride 2 along the row (dilation 1, NCHW), for ISAs whose
// byte permutes take the windows' every other column out of registers: the vertical and the
// horizontal pass and the stride in one call (the three calls of the passes cost about as much as
// their vectors on a 112-column row).
//   y[o] = max over r < count, kx < kernel_w of rows[r][2 o + kx - pad_w], columns outside
//   [0, width) reading the dtype's lowest value, for o < out_w; count >= 1, kernel_w <= 64,
//   0 <= pad_w < kernel_w. Reads no column outside [0, width).
template <typename T>
struct MaxPoolStride2Ukernel {
    void (*row)(const T* const* rows, size_t count, int64_t width, int64_t kernel_w,
                int64_t pad_w, int64_t out_w, T* y);
};

extern const MaxPoolStride2Ukernel<int8_t> kInt8MaxPoolStride2Avx512Vbmi;

extern const VmaxUkernel<int8_t> kInt8VmaxAvx2;
extern const VmaxUkernel<int8_t> kInt8VmaxAvx512;
extern const VmaxUkernel<float> kFloat32VmaxAvx2;
extern const VmaxUkernel<float> kFloat32VmaxAvx512;
extern const VmaxUkernel<int8_t> kInt8VmaxNeon;
extern const VmaxUkernel<float> kFloat32VmaxNeon;

}  // namespace detail
}  // namespace qtk
