// Rewrites of the loaded, checked graph that change no output byte, run before the kernels are
// created (LoadOptions::optimize_graph turns them off, to compare against the file's own nodes).
#pragma once

#include <cstddef>

#include "graph.h"

namespace qtk {
namespace detail {

// Every int8 add one of whose operands is the output of an int8 conv2d that nothing else reads
// becomes that conv's epilogue: the conv node takes the add's other operand (the residual) as input
// 3, the add's constants as attributes (conv2d.h, ResidualAdd) and the add's output as its own; the
// add node goes. The conv result is never stored, and one pass over the tensor less is made. The
// residual must exist when the conv runs: where both operands are convs, the later one fuses.
// Returns how many adds were fused.
size_t fuse_residual_adds(Graph& graph);

}  // namespace detail
}  // namespace qtk
