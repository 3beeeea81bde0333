// Maps a node's op name to the kernel that runs it.
#pragma once

#include <memory>
#include <vector>

#include "conv2d.h"
#include "graph.h"
#include "op_kernel.h"

namespace qtk {
namespace detail {

// The kernel for the node's op and the dtype of its first input. Throws Error naming the node and
// the op when this runtime does not know the op, has no kernel for that dtype, or when the
// kernel's factory refuses the node.
std::unique_ptr<OpKernel> create_kernel(const Graph& graph, const Node& node);

// The int8 conv2d algorithms in preference order: fastest first, the reference last.
const std::vector<const Conv2dAlgo*>& conv2d_int8_algos();

// The algorithm for a layer: the first usable under `cap`; or, where `pinned` is non-empty (the
// value of QTK_CONV_ALGO), the algorithm of that name. Throws Error when no algorithm has that
// name or when it is not usable (the CPU lacks its ISA, the cap excludes it, or it does not fit
// the layer).
const Conv2dAlgo& choose_conv2d_int8_algo(const Conv2dParams& params, IsaLevel cap,
                                          const char* pinned);

}  // namespace detail
}  // namespace qtk
