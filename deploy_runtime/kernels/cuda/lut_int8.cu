// int8 table lookup on the GPU: lut_int8.h's op for each byte.
#include "each_byte.cuh"
#include "lut_int8.h"

namespace qtk {
namespace cuda {

int launch_lut(const LutParams& p, void* stream) {
    return launch_each_byte(LutOutput{p}, p.count, stream);
}

}  // namespace cuda
}  // namespace qtk
