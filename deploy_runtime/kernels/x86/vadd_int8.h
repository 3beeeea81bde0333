// The int8 add of docs/quantization_spec.md section 3 (two inputs of one shape, one shared shift,
// a fused clamp), vectorized; one file per ISA, each compiled with its own flags and called only
// where cpu_supports() its level. The driver is add_int8_vadd.cpp.
//
// Contract: y[i] = arith::rescale_add(a[i], a_zero_point, a_multiplier, b[i], b_zero_point,
// b_multiplier, shift, zero_point, lo, hi), byte for byte, for multipliers in [0, 2^31), shift in
// [1, 62], zero points in [-128, 127] and -128 <= lo <= hi <= 127. Exact in int64 lanes as the
// scalar form: each product (q - z) * M is below 2^39 in magnitude (vpmuldq of two int32).
// No alignment is required.
//
// The ISA files include only intrinsics and this header (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8AddParams {
    int32_t a_zero_point, a_multiplier, b_zero_point, b_multiplier, shift;
    int32_t zero_point, lo, hi;  // of the output
};

struct Int8VaddUkernel {
    void (*run)(const int8_t* a, const int8_t* b, int64_t count, const Int8AddParams& p,
                int8_t* y);
};

extern const Int8VaddUkernel kInt8VaddAvx2;
extern const Int8VaddUkernel kInt8VaddAvx512;

}  // namespace detail
}  // namespace qtk
