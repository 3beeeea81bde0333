// int8 multiply on the GPU: mul_int8.h's op for each byte.
#include "each_byte.cuh"
#include "mul_int8.h"

namespace qtk {
namespace cuda {

int launch_mul(const MulParams& p, void* stream) {
    return launch_each_byte(MulOutput{p}, p.count, stream);
}

}  // namespace cuda
}  // namespace qtk
