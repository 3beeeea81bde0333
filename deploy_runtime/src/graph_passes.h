// Rewrites of the loaded, checked graph that change no output byte, run before the kernels are
// created (LoadOptions::optimize_graph turns them off, to compare against the file's own nodes).
#pragma once

#include <cstddef>
#include <functional>

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

// Every int8 add left (none fused into a conv) whose output only a prelu or a lut (NCHW) reads
// takes that op's tables as input 2, a constant [256], or [C, 256] for C channels of dim 1 (a
// prelu's are its reference's own, built here: one per slope), the sum's zero point as the
// attribute "sum_zero_point", and the op's output as its own; the prelu or lut node goes. The add
// looks each sum up as it writes it: one pass over the tensor less (BiRealNet18's blocks end in an
// add, then a PReLU per channel). Returns how many lookups were fused.
size_t fuse_lookups_into_adds(Graph& graph);

// Whether an int8 conv2d node has a fast channels-last (NHWC) algorithm: none, one (kFits), or
// the one QTK_CONV_ALGO pins (kPinned). algo_policy.h answers it from the algorithm lists.
enum class NhwcChoice { kNo, kFits, kPinned };
using NhwcChooser = std::function<NhwcChoice(const Graph& graph, const Node& node)>;

// The inference layout. Kernels that vectorize over channels (depthwise, 1x1) need the channels of
// a pixel side by side; in NCHW they transpose in and out of that layout on every layer. Here the
// int8 conv2d nodes with a fast NHWC algorithm form regions (joined along the activations between
// them, and through the 4-d int8 max_pool2d, global_avg_pool2d (keeping its dims), lut and mul
// nodes, which read either layout alike: squeeze-excitation blocks stay inside); a region whose
// convs' activations outweigh, 8 times over, the bytes of the permutes it needs at its edges (or
// that holds a conv over fewer than 4 input channels, or whose NHWC algorithm
// QTK_CONV_ALGO pins) runs channels-last: its nodes get NHWC tensors
// ([N, H, W, C]) and, but for the element-wise lut and mul, the "layout" attribute (op_kernel.h),
// and permute nodes convert at its edges
// only: an NCHW input is permuted once, however many converted nodes read it; a converted node's
// output keeps its NCHW value (name, shape) through a permute back only where another node or the
// graph's outputs read it. Values the conversion leaves unused stay in the list, unproduced: an
// orphan value costs nothing (the memory plan sizes produced values only). Returns how many nodes
// now run NHWC.
size_t use_nhwc_layout(Graph& graph, const NhwcChooser& choose);

}  // namespace detail
}  // namespace qtk
