// The int8 depthwise conv2d kernel on the GPU: conv2d_int8_depthwise.h's one phase, one thread per
// output byte, which the CPU tests run thread after thread.
#include <cuda_runtime.h>

#include "conv2d_int8_depthwise.h"

namespace qtk {
namespace cuda {
namespace {

__global__ void __launch_bounds__(kDepthwiseBlockThreads)
    conv2d_int8_depthwise(DepthwiseNchw4Params p) {
    const int64_t e = int64_t{blockIdx.x} * kDepthwiseBlockThreads + threadIdx.x;
    if (e < p.output_bytes()) {
        depthwise_output(p, e);
    }
}

}  // namespace

int launch_depthwise(const DepthwiseNchw4Params& p, void* stream) {
    const int64_t blocks = (p.output_bytes() + kDepthwiseBlockThreads - 1) / kDepthwiseBlockThreads;
    conv2d_int8_depthwise<<<static_cast<unsigned>(blocks), kDepthwiseBlockThreads, 0,
                            static_cast<cudaStream_t>(stream)>>>(p);
    return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace qtk
