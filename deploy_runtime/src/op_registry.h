// Maps a node's op name to the kernel that runs it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "conv2d.h"
#include "graph.h"
#include "int8_quantize.h"
#include "op_kernel.h"

namespace qtk {
namespace detail {

// The kernel for the node's op and the dtype of its first input. Throws Error naming the node and
// the op when this runtime does not know the op, has no kernel for that dtype, or when the
// kernel's factory refuses the node.
//
// Where several algorithms could compute the node (conv2d, say), they are its candidates in
// preference order and `pick` (Fast-Run, fast_run.h) chooses one; without it the first wins.
struct KernelCandidate {
    const char* algorithm;
    std::function<std::unique_ptr<OpKernel>()> make;
};
using KernelPicker = std::function<size_t(const Graph& graph, const Node& node,
                                          const std::vector<KernelCandidate>& candidates)>;
struct CreatedKernel {
    std::unique_ptr<OpKernel> kernel;
    std::string algorithm;  // the candidate's name, or "reference" for an op with one kernel
};
CreatedKernel create_kernel(const Graph& graph, const Node& node,
                            const KernelPicker& pick = nullptr);

// The conv2d algorithms of one dtype (int8 or float32) in preference order: fastest first, the
// reference last.
const std::vector<const Conv2dAlgo*>& conv2d_algos(DType dtype);

// The micro-kernel (int8_quantize.h) of the quantize op's first algorithm that this CPU and QTK_ISA
// allow, for a session's float inputs; a session chooses it once, as a model chooses its kernels at
// load.
Int8QuantizeFn choose_int8_quantizer();

}  // namespace detail
}  // namespace qtk
