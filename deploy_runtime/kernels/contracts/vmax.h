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

extern const VmaxUkernel<int8_t> kInt8VmaxAvx2;
extern const VmaxUkernel<int8_t> kInt8VmaxAvx512;
extern const VmaxUkernel<float> kFloat32VmaxAvx2;
extern const VmaxUkernel<float> kFloat32VmaxAvx512;
extern const VmaxUkernel<int8_t> kInt8VmaxNeon;
extern const VmaxUkernel<float> kFloat32VmaxNeon;

}  // namespace detail
}  // namespace qtk
