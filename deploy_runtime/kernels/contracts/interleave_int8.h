// The int8 permute's image step (kernels/drivers/permute.cpp): the 2 to 4 channel planes of an
// image into pixels, `pixels` at a time, where an ISA has a step wider than the driver's portable
// 16; one file per ISA, compiled with its own flags and called only where cpu_supports() its
// level. The ISA files include only intrinsics and this header (see gemm_int8.h for why).
//
// Contract: y[r * C + c] = x[c * x_stride + r] for r < pixels, c < C, run[C - 2] for C = 2, 3, 4;
// exactly C * pixels bytes written, no alignment required.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8InterleaveUkernel {
    int64_t pixels;
    void (*run[3])(const uint8_t* x, int64_t x_stride, uint8_t* y);
};

extern const Int8InterleaveUkernel kInt8InterleaveAvx512Vbmi;

}  // namespace detail
}  // namespace qtk
