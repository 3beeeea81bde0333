// Which of a node's algorithms may serve it, and which one does by default: the policy over the
// registry's lists (op_registry.cpp says what exists, in preference order). QTK_ISA caps the ISA
// level and QTK_CONV_ALGO pins a conv2d algorithm by name; both are read at each load, so a process
// (a test) can load one model under several settings. Fast-Run (fast_run.h) may pick another of
// the usable candidates; without it the first wins.
#pragma once

#include <vector>

#include "conv2d.h"
#include "graph.h"
#include "graph_passes.h"
#include "op_algo.h"
#include "op_registry.h"

namespace qtk {
namespace detail {

// The algorithms of that dtype that may serve a layer, in preference order: every one usable under
// `cap`; or, where `pinned` is non-empty (the value of QTK_CONV_ALGO), the algorithm of that name
// alone if it fits the layer (else the unpinned list). A name of the other dtype's list pins only
// those layers: this one keeps the unpinned list. Throws Error when neither list has the name, or
// when the CPU lacks its ISA or the cap excludes it.
std::vector<const Conv2dAlgo*> usable_conv2d_algos(DType dtype, const Conv2dParams& params,
                                                   IsaLevel cap, const char* pinned);
// The first of them: the default choice.
const Conv2dAlgo& choose_conv2d_algo(DType dtype, const Conv2dParams& params, IsaLevel cap,
                                     const char* pinned);

// Whether an int8 conv2d node would run channels-last (graph_passes.h): kNo where the first
// usable NHWC algorithm is the reference, or where QTK_CONV_ALGO pins an NCHW algorithm that fits
// it; kPinned where it pins the NHWC one; never throws (a malformed node is kNo, for its kernel
// to report).
NhwcChoice choose_nhwc(const Graph& graph, const Node& node);

// A conv2d node's candidates under QTK_ISA and QTK_CONV_ALGO; errors name the node.
std::vector<KernelCandidate> conv2d_candidates(const NodeView& node, DType dtype);

// The candidates of an op whose algorithms fit every node: those of [first, last) that QTK_ISA
// allows on this CPU. Never empty where the list ends with its reference.
std::vector<KernelCandidate> usable_candidates(const NodeView& node, const OpAlgo* const* first,
                                               const OpAlgo* const* last);

}  // namespace detail
}  // namespace qtk
