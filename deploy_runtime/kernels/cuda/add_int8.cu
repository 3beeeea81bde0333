// int8 add on the GPU: add_int8.h's op for each byte.
#include "add_int8.h"
#include "each_byte.cuh"

namespace qtk {
namespace cuda {

int launch_add(const AddParams& p, void* stream) {
    return launch_each_byte(AddOutput{p}, p.count, stream);
}

}  // namespace cuda
}  // namespace qtk
