// int8 multiply on CUDA, NCHW4 in and out (the CPU's mul op: y = requantize((a - z_a) (b - z_b),
// M, n), spec 2 on the product): one thread per byte (each_byte.cuh). Either operand may hold one
// value per sample and channel ([N, C, 1, 1], a squeeze-excite scale), broadcast over the other's
// plane; otherwise both have y's shape.
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

struct MulParams {
    const int8_t* a;
    const int8_t* b;
    int8_t* y;
    int64_t count;  // bytes of y: [batch][ceil(C / 4)][plane][4]
    int32_t plane;  // pixels of y's plane
    bool a_per_channel, b_per_channel;  // [N, C, 1, 1] NCHW4: [batch][ceil(C / 4)][4]
    int32_t a_zero_point, b_zero_point, multiplier, shift;
    int32_t zero_point, lo, hi;  // the output's
};

struct MulOutput {
    MulParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        // Byte e of y is (sample and quad, pixel, lane); a per-channel operand's is (sample and
        // quad, lane).
        const int64_t per_channel = e / 4 / p.plane * 4 + e % 4;
        const int32_t a = p.a[p.a_per_channel ? per_channel : e];
        const int32_t b = p.b[p.b_per_channel ? per_channel : e];
        // |product| <= 255 * 255: requantized as an accumulator.
        p.y[e] = arith::requantize((a - p.a_zero_point) * (b - p.b_zero_point), p.multiplier,
                                   p.shift, p.zero_point, p.lo, p.hi);
    }
};

inline void run_mul_on_host(const MulParams& p) { run_each_byte_on_host(MulOutput{p}, p.count); }

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in mul_int8.cu, built where QTK_CUDA is on.
int launch_mul(const MulParams& p, void* stream);

}  // namespace cuda
}  // namespace qtk
