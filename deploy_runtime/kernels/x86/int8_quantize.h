// float32 -> int8 quantization (docs/quantization_spec.md section 1), vectorized: the quantize op's
// fast algorithms (quantize_int8_vector.cpp) and Session::quantize_input. One file per ISA, each
// compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: y[i] = arith::quantize(x[i], inv_scale, zero_point) for i < count, bit for bit: the
// product x * inv_scale (one rounding, no fused multiply-add), rounded to the nearest integer with
// ties to even (nearbyint in the default rounding mode), NaN to 0, clamped to
// [-128 - z, 127 - z] in float, then z added. No alignment is required.
//
// The ISA files include only intrinsics and this header (see int8_gemm.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8QuantizeUkernel {
    void (*run)(const float* x, int64_t count, float inv_scale, int32_t zero_point, int8_t* y);
};

extern const Int8QuantizeUkernel kInt8QuantizeAvx2;
extern const Int8QuantizeUkernel kInt8QuantizeAvx512;

}  // namespace detail
}  // namespace qtk
