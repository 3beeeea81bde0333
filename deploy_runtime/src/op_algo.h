// The descriptor of one way of computing an op for one dtype, for ops whose algorithms all fit
// every node (linear, add, concat, max_pool2d, permute): listed per op in src/algo_lists/, fastest
// first and the reference last, and Fast-Run may time them. Conv2d, whose algorithms fit
// only some geometries, has its own descriptor (conv2d.h).
#pragma once

#include <memory>

#include "cpu_features.h"
#include "op_kernel.h"

namespace qtk {
namespace detail {

struct OpAlgo {
    const char* name;  // dtype, op, method and ISA: "add_int8_vadd_avx512"
    IsaLevel isa;      // the instructions it needs
    std::unique_ptr<OpKernel> (*make)(const NodeView& node);

    bool usable(IsaLevel cap) const { return isa <= cap && cpu_supports(isa); }
};

}  // namespace detail
}  // namespace qtk
