// The launcher of the one-thread-per-output-byte kernels (all but the GEMM convolutions): thread
// e of the grid calls op(e) for e < count. Each kernel's header defines its op, a functor of
// host-device code, and runs it on the CPU with run_each_byte_on_host (conv2d_int8_nchw4.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qtk {
namespace cuda {

constexpr int kEachByteBlockThreads = 256;

template <typename Op>
__global__ void __launch_bounds__(kEachByteBlockThreads) each_byte(Op op, int64_t count) {
    const int64_t e = int64_t{blockIdx.x} * kEachByteBlockThreads + threadIdx.x;
    if (e < count) {
        op(e);
    }
}

// Returns the launch's cudaError_t (0: launched).
template <typename Op>
int launch_each_byte(const Op& op, int64_t count, void* stream) {
    const int64_t blocks = (count + kEachByteBlockThreads - 1) / kEachByteBlockThreads;
    each_byte<<<static_cast<unsigned>(blocks), kEachByteBlockThreads, 0,
                static_cast<cudaStream_t>(stream)>>>(op, count);
    return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace qtk
