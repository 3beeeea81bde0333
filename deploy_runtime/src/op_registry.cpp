#include "op_registry.h"

#include <iterator>
#include <string>

#include "algo_policy.h"
#include "op_algo.h"

namespace qtk {
namespace detail {

using KernelFactory = std::unique_ptr<OpKernel> (*)(const NodeView& node);

// The factories of the ops with one kernel per dtype (kOps), defined in
// kernels/reference/<family>.cpp. The dtype in a name is that of the node's first input; factories
// without one serve both dtypes (pure data movement).
std::unique_ptr<OpKernel> make_conv_transpose2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_conv_transpose2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_sub_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_div_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_mul_constant_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_add_constant_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_matmul_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_matmul_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_layer_norm_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_softmax_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_layer_norm_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_softmax_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_group_norm_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_group_norm_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_l2_normalize_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_l2_normalize_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_prelu_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_clamp_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_clamp_float32_reference(const NodeView& node);
// Functions of one input whose int8 form is a table: every op kFloat32Functions lists
// (kernels/reference/elementwise.cpp), so a new one is its line there and nothing here.
std::unique_ptr<OpKernel> make_function_float32_reference(const NodeView& node);
bool is_float32_function(const std::string& op);
// Those of them with the vector kernels of algo_lists/function_float32.inc
// (kernels/drivers/function_float32_vector.cpp).
bool has_vector_float32_function(const std::string& op);
std::unique_ptr<OpKernel> make_concat_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_avg_pool2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_resize_bilinear_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_resize_bilinear_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_dequantize_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_flatten_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_reshape_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_split_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_pad_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_resize_nearest_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_slice_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_expand_batch_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_image_to_int8_reference(const NodeView& node);

// Each family's algorithms are one list, algo_lists/<family>.inc: QTK_ALGO(descriptor) per line,
// in preference order, the reference last. The descriptors are defined beside their kernels; the
// lists declare them here, then become the arrays below. A quantize algorithm is listed with its
// micro-kernel, the one a session's float inputs take where it is the algorithm chosen.
#define QTK_QUANTIZE_ALGO(descriptor, ukernel) QTK_ALGO(descriptor)
#define QTK_ALGO(descriptor) extern const Conv2dAlgo descriptor;
#include "algo_lists/conv2d_float32.inc"
#include "algo_lists/conv2d_int8.inc"
#undef QTK_ALGO
#define QTK_ALGO(descriptor) extern const OpAlgo descriptor;
#include "algo_lists/add_float32.inc"
#include "algo_lists/conv2d_binary.inc"
#include "algo_lists/function_float32.inc"
#include "algo_lists/add_int8.inc"
#include "algo_lists/avg_pool2d_int8.inc"
#include "algo_lists/concat_int8.inc"
#include "algo_lists/global_avg_pool2d_float32.inc"
#include "algo_lists/global_avg_pool2d_int8.inc"
#include "algo_lists/linear_float32.inc"
#include "algo_lists/linear_int8.inc"
#include "algo_lists/lut_int8.inc"
#include "algo_lists/max_pool2d_float32.inc"
#include "algo_lists/max_pool2d_int8.inc"
#include "algo_lists/mul_float32.inc"
#include "algo_lists/mul_int8.inc"
#include "algo_lists/permute.inc"
#include "algo_lists/prelu_int8.inc"
#include "algo_lists/quantize.inc"
#undef QTK_ALGO

namespace {

#define QTK_ALGO(descriptor) &descriptor,
const Conv2dAlgo* const kConv2dInt8Algos[] = {
#include "algo_lists/conv2d_int8.inc"
};
const Conv2dAlgo* const kConv2dFloat32Algos[] = {
#include "algo_lists/conv2d_float32.inc"
};
const OpAlgo* const kConv2dBinaryAlgos[] = {
#include "algo_lists/conv2d_binary.inc"
};
const OpAlgo* const kLinearInt8Algos[] = {
#include "algo_lists/linear_int8.inc"
};
const OpAlgo* const kLinearFloat32Algos[] = {
#include "algo_lists/linear_float32.inc"
};
const OpAlgo* const kAddInt8Algos[] = {
#include "algo_lists/add_int8.inc"
};
const OpAlgo* const kAddFloat32Algos[] = {
#include "algo_lists/add_float32.inc"
};
const OpAlgo* const kMulInt8Algos[] = {
#include "algo_lists/mul_int8.inc"
};
const OpAlgo* const kMulFloat32Algos[] = {
#include "algo_lists/mul_float32.inc"
};
const OpAlgo* const kLutInt8Algos[] = {
#include "algo_lists/lut_int8.inc"
};
const OpAlgo* const kAvgPool2dInt8Algos[] = {
#include "algo_lists/avg_pool2d_int8.inc"
};
const OpAlgo* const kConcatInt8Algos[] = {
#include "algo_lists/concat_int8.inc"
};
const OpAlgo* const kMaxPool2dInt8Algos[] = {
#include "algo_lists/max_pool2d_int8.inc"
};
const OpAlgo* const kMaxPool2dFloat32Algos[] = {
#include "algo_lists/max_pool2d_float32.inc"
};
const OpAlgo* const kQuantizeAlgos[] = {
#include "algo_lists/quantize.inc"
};
const OpAlgo* const kPReLUInt8Algos[] = {
#include "algo_lists/prelu_int8.inc"
};
const OpAlgo* const kPermuteAlgos[] = {
#include "algo_lists/permute.inc"
};
const OpAlgo* const kGlobalAvgPool2dInt8Algos[] = {
#include "algo_lists/global_avg_pool2d_int8.inc"
};
const OpAlgo* const kGlobalAvgPool2dFloat32Algos[] = {
#include "algo_lists/global_avg_pool2d_float32.inc"
};
const OpAlgo* const kFunctionFloat32Algos[] = {
#include "algo_lists/function_float32.inc"
};
#undef QTK_ALGO
#undef QTK_QUANTIZE_ALGO

// The quantize list again, each algorithm with its micro-kernel, for choose_int8_quantizer.
struct QuantizeAlgo {
    const OpAlgo* algo;
    const Int8QuantizeUkernel* ukernel;
};
const QuantizeAlgo kQuantizeUkernels[] = {
#define QTK_QUANTIZE_ALGO(descriptor, ukernel) {&descriptor, &ukernel},
#include "algo_lists/quantize.inc"
#undef QTK_QUANTIZE_ALGO
};

// A list's candidates (algo_policy.h), the list bound at compile time for kMultiAlgorithmOps.
template <const auto& kAlgos>
std::vector<KernelCandidate> list_candidates(const NodeView& node) {
    return usable_candidates(node, std::begin(kAlgos), std::end(kAlgos));
}

// Ops with several algorithms for one dtype; every other op has one kernel per dtype (kOps).
struct MultiAlgorithmOp {
    const char* op;
    DType dtype;
    std::vector<KernelCandidate> (*candidates)(const NodeView& node);
};

}  // namespace

Int8QuantizeFn choose_int8_quantizer() {
    const IsaLevel cap = isa_cap();
    const QuantizeAlgo* q = std::begin(kQuantizeUkernels);
    while (!q->algo->usable(cap)) {
        ++q;  // the reference, last, is always usable
    }
    return q->ukernel->run;
}

namespace {

const MultiAlgorithmOp kMultiAlgorithmOps[] = {
    {"conv2d", DType::kInt8, [](const NodeView& n) { return conv2d_candidates(n, DType::kInt8); }},
    {"conv2d", DType::kFloat32,
     [](const NodeView& n) { return conv2d_candidates(n, DType::kFloat32); }},
    {"conv2d_binary", DType::kInt8, list_candidates<kConv2dBinaryAlgos>},
    {"linear", DType::kInt8, list_candidates<kLinearInt8Algos>},
    {"linear", DType::kFloat32, list_candidates<kLinearFloat32Algos>},
    {"add", DType::kInt8, list_candidates<kAddInt8Algos>},
    {"add", DType::kFloat32, list_candidates<kAddFloat32Algos>},
    {"mul", DType::kInt8, list_candidates<kMulInt8Algos>},
    {"mul", DType::kFloat32, list_candidates<kMulFloat32Algos>},
    {"lut", DType::kInt8, list_candidates<kLutInt8Algos>},
    {"concat", DType::kInt8, list_candidates<kConcatInt8Algos>},
    {"avg_pool2d", DType::kInt8, list_candidates<kAvgPool2dInt8Algos>},
    {"max_pool2d", DType::kInt8, list_candidates<kMaxPool2dInt8Algos>},
    {"max_pool2d", DType::kFloat32, list_candidates<kMaxPool2dFloat32Algos>},
    {"quantize", DType::kFloat32, list_candidates<kQuantizeAlgos>},
    {"permute", DType::kInt8, list_candidates<kPermuteAlgos>},
    {"prelu", DType::kInt8, list_candidates<kPReLUInt8Algos>},
    {"permute", DType::kFloat32, list_candidates<kPermuteAlgos>},
    {"global_avg_pool2d", DType::kInt8, list_candidates<kGlobalAvgPool2dInt8Algos>},
    {"global_avg_pool2d", DType::kFloat32, list_candidates<kGlobalAvgPool2dFloat32Algos>},
};

struct OpEntry {
    const char* op;
    KernelFactory int8;     // first input int8; nullptr: no int8 form
    KernelFactory float32;  // first input float32; nullptr: no float32 form
    KernelFactory uint8 = nullptr;  // first input uint8 (an image graph input)
};

// The one hand-edited list of the ops this runtime runs: the op table and the "Float32 ops" table
// of docs/qmodel_format.md. Adding an op: write its kernel file, declare its factories above, add
// its line here.
constexpr OpEntry kOps[] = {
    {"conv2d", nullptr, nullptr},  // kMultiAlgorithmOps
    {"conv2d_binary", nullptr, nullptr},  // int8: kMultiAlgorithmOps
    {"conv_transpose2d", make_conv_transpose2d_int8_reference,
     make_conv_transpose2d_float32_reference},
    {"linear", nullptr, nullptr},  // kMultiAlgorithmOps
    {"add", nullptr, nullptr},  // kMultiAlgorithmOps
    {"mul", nullptr, nullptr},  // kMultiAlgorithmOps
    {"sub", nullptr, make_sub_float32_reference},
    {"div", nullptr, make_div_float32_reference},
    {"mul_constant", make_mul_constant_int8_reference, nullptr},
    {"add_constant", make_add_constant_int8_reference, nullptr},
    {"matmul", make_matmul_int8_reference, make_matmul_float32_reference},
    {"layer_norm", make_layer_norm_int8_reference, make_layer_norm_float32_reference},
    {"group_norm", make_group_norm_int8_reference, make_group_norm_float32_reference},
    {"softmax", make_softmax_int8_reference, make_softmax_float32_reference},
    {"l2_normalize", make_l2_normalize_int8_reference, make_l2_normalize_float32_reference},
    {"prelu", nullptr, make_prelu_float32_reference},  // int8: kMultiAlgorithmOps
    {"clamp", make_clamp_int8_reference, make_clamp_float32_reference},
    {"lut", nullptr, nullptr},  // int8: kMultiAlgorithmOps
    {"concat", nullptr, make_concat_float32_reference},  // int8: kMultiAlgorithmOps
    {"max_pool2d", nullptr, nullptr},  // kMultiAlgorithmOps
    {"avg_pool2d", nullptr, make_avg_pool2d_float32_reference},  // int8: kMultiAlgorithmOps
    {"global_avg_pool2d", nullptr, nullptr},  // kMultiAlgorithmOps
    {"resize_bilinear", make_resize_bilinear_int8_reference,
     make_resize_bilinear_float32_reference},
    {"quantize", nullptr, nullptr},  // kMultiAlgorithmOps
    {"dequantize", make_dequantize_reference, nullptr},
    {"flatten", make_flatten_reference, make_flatten_reference},
    {"reshape", make_reshape_reference, make_reshape_reference},
    {"permute", nullptr, nullptr},  // kMultiAlgorithmOps
    {"split", make_split_reference, make_split_reference},
    {"pad", make_pad_reference, make_pad_reference},
    {"resize_nearest", make_resize_nearest_reference, make_resize_nearest_reference},
    {"slice", make_slice_reference, make_slice_reference},
    {"expand_batch", make_expand_batch_reference, make_expand_batch_reference},
    {"image_to_int8", nullptr, nullptr, make_image_to_int8_reference},
};

// The kernel of the candidate `pick` chooses (Fast-Run), or of the first.
CreatedKernel pick_candidate(const Graph& graph, const Node& node,
                             const std::vector<KernelCandidate>& candidates,
                             const KernelPicker& pick) {
    const size_t chosen = candidates.size() > 1 && pick ? pick(graph, node, candidates) : 0;
    return {candidates.at(chosen).make(), candidates[chosen].algorithm};
}

}  // namespace

const std::vector<const Conv2dAlgo*>& conv2d_algos(DType dtype) {
    static const std::vector<const Conv2dAlgo*> int8(std::begin(kConv2dInt8Algos),
                                                     std::end(kConv2dInt8Algos));
    static const std::vector<const Conv2dAlgo*> float32(std::begin(kConv2dFloat32Algos),
                                                        std::end(kConv2dFloat32Algos));
    return dtype == DType::kInt8 ? int8 : float32;
}

CreatedKernel create_kernel(const Graph& graph, const Node& node, const KernelPicker& pick) {
    for (const OpEntry& entry : kOps) {
        if (node.op != entry.op) {
            continue;
        }
        const NodeView view(graph, node);
        const DType dtype = view.dtype();
        for (const MultiAlgorithmOp& multi : kMultiAlgorithmOps) {
            if (node.op == multi.op && dtype == multi.dtype) {
                return pick_candidate(graph, node, multi.candidates(view), pick);
            }
        }
        const KernelFactory make = dtype == DType::kInt8      ? entry.int8
                                   : dtype == DType::kFloat32 ? entry.float32
                                   : dtype == DType::kUInt8   ? entry.uint8
                                                              : nullptr;
        if (make == nullptr) {
            view.fail("op '" + node.op + "' has no " + dtype_name(dtype) + " kernel (input 0 '" +
                      graph.values[node.inputs[0]].name + "' is " + dtype_name(dtype) + ")");
        }
        return {make(view), "reference"};
    }
    if (is_float32_function(node.op)) {
        const NodeView view(graph, node);
        if (view.dtype() != DType::kFloat32) {
            view.fail("op '" + node.op + "' has no " + dtype_name(view.dtype()) +
                      " kernel (its int8 form is a 'lut' node)");
        }
        if (has_vector_float32_function(node.op)) {
            return pick_candidate(graph, node, list_candidates<kFunctionFloat32Algos>(view), pick);
        }
        return {make_function_float32_reference(view), "reference"};
    }
    throw Error("node '" + node.name + "' uses op '" + node.op +
                "' which this runtime does not know; re-export with a matching qtk version");
}

}  // namespace detail
}  // namespace qtk
