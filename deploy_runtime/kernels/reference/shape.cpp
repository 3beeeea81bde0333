// flatten, reference: docs/quantization_spec.md section 7. Moves int8 bytes, keeps (scale, zp).
#include <cstring>

#include "op_kernel.h"

namespace qtk {
namespace detail {
namespace {

class FlattenReference final : public OpKernel {
 public:
    explicit FlattenReference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({});
        node.expect_same_quantization(node.activation_input(0), node.output(0));
    }

    // [N, d1, d2, ...] -> [N, d1 * d2 * ...], flattening from dim 1 like torch.flatten(x, 1).
    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        if (x.size() < 2) {
            fail("input must have rank >= 2, got shape " + to_string(x));
        }
        return {{x[0], element_count(x) / x[0]}};
    }

    void run(const NodeIO& io, ThreadPool&) const override {
        std::memcpy(io.outputs[0], io.inputs[0],
                    static_cast<size_t>(element_count(*io.input_shapes[0])));
    }
};

}  // namespace

std::unique_ptr<OpKernel> make_flatten_reference(const NodeView& node) {
    return std::make_unique<FlattenReference>(node);
}

}  // namespace detail
}  // namespace qtk
