#include "op_registry.h"

namespace qtk {
namespace detail {

// Kernel factories, defined in kernels/reference/<family>.cpp.
std::unique_ptr<OpKernel> make_conv2d_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_linear_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_add_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_clamp_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_concat_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_max_pool2d_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_avg_pool2d_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_global_avg_pool2d_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_flatten_reference(const NodeView& node);

namespace {

struct OpEntry {
    const char* op;
    std::unique_ptr<OpKernel> (*make)(const NodeView& node);
};

// The one hand-edited list of the ops this runtime runs (the op table of docs/qmodel_format.md).
// Adding an op: write its kernel file, declare its factory above, add its line here.
constexpr OpEntry kOps[] = {
    {"conv2d", make_conv2d_reference},
    {"linear", make_linear_reference},
    {"add", make_add_reference},
    {"clamp", make_clamp_reference},
    {"concat", make_concat_reference},
    {"max_pool2d", make_max_pool2d_reference},
    {"avg_pool2d", make_avg_pool2d_reference},
    {"global_avg_pool2d", make_global_avg_pool2d_reference},
    {"flatten", make_flatten_reference},
};

}  // namespace

std::unique_ptr<OpKernel> create_kernel(const Graph& graph, const Node& node) {
    for (const OpEntry& entry : kOps) {
        if (node.op == entry.op) {
            return entry.make(NodeView(graph, node));
        }
    }
    throw Error("node '" + node.name + "' uses op '" + node.op +
                "' which this runtime does not know; re-export with a matching qtk version");
}

}  // namespace detail
}  // namespace qtk
