// int8 max and average pooling on the GPU: pool2d_int8.h's op for each output byte.
#include "each_byte.cuh"
#include "pool2d_int8.h"

namespace qtk {
namespace cuda {

int launch_pool2d(const Pool2dNchw4Params& p, void* stream) {
    return launch_each_byte(Pool2dOutput{p}, p.output_bytes(), stream);
}

}  // namespace cuda
}  // namespace qtk
