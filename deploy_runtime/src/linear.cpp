#include "linear.h"

namespace qtk {
namespace detail {

LinearKernel::LinearKernel(const NodeView& node, DType dtype, DType bias_dtype)
    : OpKernel(node.label()) {
    const Value& weight = node.expect_weight_layer(3, dtype, bias_dtype, 2);
    out_features_ = weight.shape[0];
    in_features_ = weight.shape[1];
}

std::vector<Shape> LinearKernel::infer_shapes(const std::vector<Shape>& inputs) const {
    const Shape& x = inputs[0];
    if (x.size() < 2) {
        fail("input must have rank 2 or more, features last, got shape " + to_string(x));
    }
    if (x.back() != in_features_) {
        fail("input has " + std::to_string(x.back()) + " features, the weight expects " +
             std::to_string(in_features_) + " (features are the input's last dimension)");
    }
    Shape y = x;
    y.back() = out_features_;
    return {y};
}

int64_t LinearKernel::rows(const Shape& x) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < x.size(); ++d) {
        rows *= x[d];
    }
    return rows;
}

LinearInt8Constants::LinearInt8Constants(const NodeView& node, int64_t out_features,
                                         int64_t in_features) {
    node.expect_attrs({"multiplier", "shift", "clamp"});
    const Value& w = node.constant_input(1, "weight", DType::kInt8, 2);
    multiplier = node.multipliers("multiplier", static_cast<size_t>(out_features));
    shift = node.shifts("shift", static_cast<size_t>(out_features));
    clamp = node.clamp("clamp");

    weight = reinterpret_cast<const int8_t*>(w.data);
    bias = int32_values(node.constant_input(2, "bias", DType::kInt32, 1));
    check_narrow_range_weights(node, w);
    check_accumulator_range(node, bias, in_features);
    input_zero_point = node.activation_input(0, DType::kInt8).zero_point;
    output_zero_point = node.output(0, DType::kInt8).zero_point;
}

}  // namespace detail
}  // namespace qtk
