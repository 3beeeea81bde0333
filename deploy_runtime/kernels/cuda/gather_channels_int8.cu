// Channel data movement on the GPU: gather_channels_int8.h's op for each output byte.
#include "each_byte.cuh"
#include "gather_channels_int8.h"

namespace qtk {
namespace cuda {

int launch_gather_channels(const GatherChannelsParams& p, void* stream) {
    return launch_each_byte(GatherChannelsOutput{p}, p.output_bytes(), stream);
}

}  // namespace cuda
}  // namespace qtk
