// int8 add of two tensors of one shape on CUDA (spec 3's rescaled sum, one rounding step), in any
// layout both share (NCHW4 between the GPU's convolutions): one thread per byte (each_byte.cuh).
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

struct AddParams {
    const int8_t* a;
    const int8_t* b;
    int8_t* y;
    int64_t count;  // bytes of each
    int32_t a_zero_point, a_multiplier, b_zero_point, b_multiplier, shift;
    int32_t zero_point, lo, hi;  // the output's
};

struct AddOutput {
    AddParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        p.y[e] = arith::rescale_add(p.a[e], p.a_zero_point, p.a_multiplier, p.b[e], p.b_zero_point,
                                    p.b_multiplier, p.shift, p.zero_point, p.lo, p.hi);
    }
};

inline void run_add_on_host(const AddParams& p) { run_each_byte_on_host(AddOutput{p}, p.count); }

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in add_int8.cu, built where QTK_CUDA is on.
int launch_add(const AddParams& p, void* stream);

}  // namespace cuda
}  // namespace qtk
