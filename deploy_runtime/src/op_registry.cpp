#include "op_registry.h"

namespace qtk {
namespace detail {

using KernelFactory = std::unique_ptr<OpKernel> (*)(const NodeView& node);

// Kernel factories, defined in kernels/reference/<family>.cpp. The dtype in a name is that of the
// node's first input; factories without one serve both dtypes (pure data movement).
std::unique_ptr<OpKernel> make_conv2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_conv2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_linear_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_linear_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_add_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_add_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_mul_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_mul_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_clamp_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_clamp_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_lut_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_hardswish_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_hardsigmoid_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_sigmoid_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_concat_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_concat_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_max_pool2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_max_pool2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_avg_pool2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_avg_pool2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_global_avg_pool2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_global_avg_pool2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_resize_bilinear_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_quantize_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_dequantize_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_flatten_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_reshape_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_permute_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_split_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_pad_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_resize_nearest_reference(const NodeView& node);

namespace {

struct OpEntry {
    const char* op;
    KernelFactory int8;     // first input int8; nullptr: no int8 form
    KernelFactory float32;  // first input float32; nullptr: no float32 form
};

// The one hand-edited list of the ops this runtime runs: the op table and the "Float32 ops" table
// of docs/qmodel_format.md. Adding an op: write its kernel file, declare its factories above, add
// its line here.
constexpr OpEntry kOps[] = {
    {"conv2d", make_conv2d_int8_reference, make_conv2d_float32_reference},
    {"linear", make_linear_int8_reference, make_linear_float32_reference},
    {"add", make_add_int8_reference, make_add_float32_reference},
    {"mul", make_mul_int8_reference, make_mul_float32_reference},
    {"clamp", make_clamp_int8_reference, make_clamp_float32_reference},
    {"lut", make_lut_int8_reference, nullptr},
    {"hardswish", nullptr, make_hardswish_float32_reference},
    {"hardsigmoid", nullptr, make_hardsigmoid_float32_reference},
    {"sigmoid", nullptr, make_sigmoid_float32_reference},
    {"concat", make_concat_int8_reference, make_concat_float32_reference},
    {"max_pool2d", make_max_pool2d_int8_reference, make_max_pool2d_float32_reference},
    {"avg_pool2d", make_avg_pool2d_int8_reference, make_avg_pool2d_float32_reference},
    {"global_avg_pool2d", make_global_avg_pool2d_int8_reference,
     make_global_avg_pool2d_float32_reference},
    {"resize_bilinear", make_resize_bilinear_int8_reference, nullptr},
    {"quantize", nullptr, make_quantize_reference},
    {"dequantize", make_dequantize_reference, nullptr},
    {"flatten", make_flatten_reference, make_flatten_reference},
    {"reshape", make_reshape_reference, make_reshape_reference},
    {"permute", make_permute_reference, make_permute_reference},
    {"split", make_split_reference, make_split_reference},
    {"pad", make_pad_reference, make_pad_reference},
    {"resize_nearest", make_resize_nearest_reference, make_resize_nearest_reference},
};

}  // namespace

std::unique_ptr<OpKernel> create_kernel(const Graph& graph, const Node& node) {
    for (const OpEntry& entry : kOps) {
        if (node.op != entry.op) {
            continue;
        }
        const NodeView view(graph, node);
        const DType dtype = view.dtype();
        const KernelFactory make = dtype == DType::kInt8      ? entry.int8
                                   : dtype == DType::kFloat32 ? entry.float32
                                                              : nullptr;
        if (make == nullptr) {
            view.fail("op '" + node.op + "' has no " + dtype_name(dtype) + " kernel (input 0 '" +
                      graph.values[node.inputs[0]].name + "' is " + dtype_name(dtype) + ")");
        }
        return make(view);
    }
    throw Error("node '" + node.name + "' uses op '" + node.op +
                "' which this runtime does not know; re-export with a matching qtk version");
}

}  // namespace detail
}  // namespace qtk
