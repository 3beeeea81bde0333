// NCHW to NCHW4 and back on the GPU: layout_int8.h's ops for each output byte.
#include "each_byte.cuh"
#include "layout_int8.h"

namespace qtk {
namespace cuda {

int launch_to_nchw4(const LayoutParams& p, void* stream) {
    return launch_each_byte(ToNchw4Output{p}, p.nchw4_bytes(), stream);
}

int launch_from_nchw4(const LayoutParams& p, void* stream) {
    return launch_each_byte(FromNchw4Output{p}, p.nchw_bytes(), stream);
}

}  // namespace cuda
}  // namespace qtk
