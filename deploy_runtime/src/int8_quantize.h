// float32 -> int8 quantization (docs/quantization_spec.md section 1) of a whole buffer: the
// micro-kernels behind the quantize op's algorithms (algo_lists/quantize.inc) and a session's
// float inputs (op_registry.h, choose_int8_quantizer). The scalar one is in
// kernels/reference/quantize.cpp; the vectorized ones are kernels/x86/quantize_int8_<isa>.cpp, one
// file per ISA, each compiled with its own flags and called only where cpu_supports() its level.
//
// Contract: y[i] = arith::quantize(x[i], inv_scale, zero_point) for i < count, bit for bit: the
// product x * inv_scale (one rounding, no fused multiply-add), rounded to the nearest integer with
// ties to even (nearbyint in the default rounding mode), NaN to 0, clamped to
// [-128 - z, 127 - z] in float, then z added. No alignment is required.
//
// The ISA files include only intrinsics and this header, so it declares and never defines
// (kernels/contracts/gemm_int8.h says why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

using Int8QuantizeFn = void (*)(const float* x, int64_t count, float inv_scale, int32_t zero_point,
                                int8_t* y);

// What the vector kernels broadcast: spec 1's constants from arith::quantize_bounds, derived in
// baseline code (kernels/reference/quantize.cpp) once per call.
struct Int8QuantizePlan {
    float inv_scale, lo, hi;  // lo and hi relative to the zero point
    int32_t zero_point;
};

Int8QuantizePlan int8_quantize_plan(float inv_scale, int32_t zero_point);

struct Int8QuantizeUkernel {
    Int8QuantizeFn run;
};

extern const Int8QuantizeUkernel kInt8QuantizeScalar;
extern const Int8QuantizeUkernel kInt8QuantizeAvx2;
extern const Int8QuantizeUkernel kInt8QuantizeAvx512;

}  // namespace detail
}  // namespace qtk
