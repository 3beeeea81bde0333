// The products of the int8 mul (docs/quantization_spec.md: (a - z_a)(b - z_b), below 2^16 in
// magnitude), widened to int32 for the requantization of requantize_int8.h; one file per ISA, each
// compiled with its own flags and called only where cpu_supports() its level. The driver is
// kernels/drivers/mul_int8_rows.cpp.
//
// Contract: p[i] = (x[i] - x_zero_point) * (s[i * s_step] - s_zero_point) for i < count, s_step 0
// (one factor for the run) or 1, exact in int32. No alignment is required.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8ProductsUkernel {
    void (*run)(const int8_t* x, int32_t x_zero_point, const int8_t* s, int64_t s_step,
                int32_t s_zero_point, int64_t count, int32_t* p);
};

extern const Int8ProductsUkernel kInt8ProductsAvx2;
extern const Int8ProductsUkernel kInt8ProductsAvx512;

}  // namespace detail
}  // namespace qtk
