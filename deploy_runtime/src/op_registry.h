// Maps a node's op name to the kernel that runs it.
#pragma once

#include <memory>

#include "graph.h"
#include "op_kernel.h"

namespace qtk {
namespace detail {

// The kernel for the node's op and the dtype of its first input. Throws Error naming the node and
// the op when this runtime does not know the op, has no kernel for that dtype, or when the
// kernel's factory refuses the node.
std::unique_ptr<OpKernel> create_kernel(const Graph& graph, const Node& node);

}  // namespace detail
}  // namespace qtk
