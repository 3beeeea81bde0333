// int8 concatenation on the GPU: concat_int8.h's op for each output byte.
#include "concat_int8.h"
#include "each_byte.cuh"

namespace qtk {
namespace cuda {

int launch_concat(const ConcatParams& p, void* stream) {
    return launch_each_byte(ConcatOutput{p}, p.output_bytes(), stream);
}

}  // namespace cuda
}  // namespace qtk
