// Bytewise maximum of int8 rows, the vertical pass of max_pool2d_int8_rows
// (kernels/fast/max_pool2d_int8_rows.cpp); one file per ISA, each compiled with its own flags and
// called only where cpu_supports() its level. The ISA files include only intrinsics and this header
// (see int8_gemm.h for why).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qtk {
namespace detail {

struct Int8VmaxUkernel {
    // y[i] = max over r < count of rows[r][i], for i < width; count >= 1. No alignment is
    // required; y may be rows[0].
    void (*rows)(const int8_t* const* rows, size_t count, int64_t width, int8_t* y);
};

extern const Int8VmaxUkernel kInt8VmaxAvx2;
extern const Int8VmaxUkernel kInt8VmaxAvx512;

}  // namespace detail
}  // namespace qtk
