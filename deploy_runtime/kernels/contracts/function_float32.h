// The float32 function micro-kernels behind function_float32_vector.cpp (hardswish, hardsigmoid,
// sigmoid, silu): y[i] = f(x[i]) for i < count, each lane on its own value, so the bits depend
// on nothing but x[i] (no thread count, position or batch). One file per ISA, compiled with its
// own flags and called only where cpu_supports() its level; the math is written once, in
// function_float32_simd.h.
//
// hardswish and hardsigmoid are the reference's operations in its order (x + 3, max 0, min 6,
// times x, divided by 6), so the same bits. sigmoid = 1 / (1 + e), silu = x sigmoid(x), with
// e = exp(-x) from exp_lanes (function_float32_simd.h: within 2 ulp of exp where the result is a
// normal float) where the reference calls std::exp: docs/design.md states the bound and
// tests/test_data_movement_algos.cpp holds every kernel to it.
//
// The ISA files include only intrinsics and these headers (see gemm_int8.h for why).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

using Float32FunctionFn = void (*)(const float* x, int64_t count, float* y);

struct Float32FunctionUkernels {
    Float32FunctionFn hardswish, hardsigmoid, sigmoid, silu;
};

extern const Float32FunctionUkernels kFloat32FunctionsAvx2;
extern const Float32FunctionUkernels kFloat32FunctionsAvx512;

}  // namespace detail
}  // namespace qtk
