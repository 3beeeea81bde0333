// The passes of int8 avg_pool2d over whole windows (docs/quantization_spec.md section 6; the driver
// is kernels/drivers/avg_pool2d_int8_windows.cpp, which says how they make a pool): column sums of
// rows, stride phases, and the window sums of runs of those, divided. The driver's portable
// form is SSE2 on x86-64; one file per wider ISA, compiled with its own flags and called only where
// cpu_supports() its level. The ISA files include only intrinsics and this header (see gemm_int8.h
// for why).
//
// Contracts (no alignment required):
//   sum_rows:     sums[g * width + i] = sum over r < kernel_rows of x[g * group_pitch + r * width
//                 + i], for g < groups, i < width, in int16 (kernel_rows <= 255): the column sums
//                 of `groups` output rows' windows. A form may read whole vectors past a row as far
//                 as `end` (the input's end) and write sums' 15 values of slack past the last.
//   split_phases: phases[p * pitch + j] = sums[j * stride + p] for j * stride + p < width.
//   divide_runs:  y[o] = clamp(z + sign(S) floor((2|S| + d) / (2d)), -128, 127) of the window sum
//                 S = offset + sum over k < count_runs of runs[k][o], o < count, with
//                 floor(n / (2d)) = (n * multiplier) >> shift for every n the pool makes (the
//                 driver's ConstantDivisor: n * multiplier < 2^63, n < 2^31).
//   pool2x2:      the three at once for 2x2 windows at stride 2 (Bi-Real shortcuts, resnet-D):
//                 y[r * (width / 2) + o] = the divided window sum as divide_runs' of offset plus
//                 x[(2 r + i) * width + 2 o + j] over i, j < 2, for r < rows, o < width / 2 (an
//                 odd width's last column unread). Null where the level has none.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8PoolDivisor {
    int32_t divisor, zero_point;
    uint32_t multiplier;  // of 2 * divisor
    int32_t shift;
};

struct Int8AvgPoolUkernel {
    void (*sum_rows)(const int8_t* x, int64_t width, int64_t kernel_rows, int64_t groups,
                     int64_t group_pitch, const int8_t* end, int16_t* sums);
    void (*split_phases)(const int16_t* sums, int64_t width, int64_t stride, int64_t pitch,
                         int16_t* phases);
    void (*divide_runs)(const int16_t* const* runs, int64_t count_runs, int64_t count,
                        int32_t offset, const Int8PoolDivisor& d, int8_t* y);
    void (*pool2x2)(const int8_t* x, int64_t width, int64_t rows, int32_t offset,
                    const Int8PoolDivisor& d, int8_t* y);
};

extern const Int8AvgPoolUkernel kInt8AvgPoolAvx512;

}  // namespace detail
}  // namespace qtk
