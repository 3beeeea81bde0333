// The int8 depthwise conv2d kernel on the GPU: conv2d_int8_depthwise.h's op for each output byte.
#include "conv2d_int8_depthwise.h"
#include "each_byte.cuh"

namespace qtk {
namespace cuda {

int launch_depthwise(const DepthwiseNchw4Params& p, void* stream) {
    return launch_each_byte(DepthwiseOutput{p}, p.output_bytes(), stream);
}

}  // namespace cuda
}  // namespace qtk
