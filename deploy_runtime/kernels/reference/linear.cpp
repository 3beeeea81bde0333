// linear, reference: docs/quantization_spec.md section 4 with k over the input features.
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class LinearReference final : public OpKernel {
 public:
    explicit LinearReference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(3);
        node.expect_output_count(1);
        node.expect_attrs({"multiplier", "shift", "clamp"});
        const Value& x = node.activation_input(0);
        const Value& weight = node.constant_input(1, "weight", DType::kInt8, 2);
        const Value& bias = node.constant_input(2, "bias", DType::kInt32, 1);
        const Value& y = node.output(0);

        out_features_ = weight.shape[0];
        in_features_ = weight.shape[1];
        node.expect_bias_for(bias, weight);
        multiplier_ = node.multipliers("multiplier", static_cast<size_t>(out_features_));
        shift_ = node.shifts("shift", static_cast<size_t>(out_features_));
        clamp_ = node.clamp("clamp");

        weight_ = reinterpret_cast<const int8_t*>(weight.data);
        bias_ = int32_values(bias);
        check_narrow_range_weights(node, weight);
        check_accumulator_range(node, bias_, in_features_);
        input_zero_point_ = x.zero_point;
        output_zero_point_ = y.zero_point;
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 2, "input");
        if (x[1] != in_features_) {
            fail("input has " + std::to_string(x[1]) + " features, the weight expects " +
                 std::to_string(in_features_));
        }
        return {{x[0], out_features_}};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* x = io.inputs[0];
        int8_t* y = io.outputs[0];
        // One task per (sample, output feature).
        pool.parallel_for(
            (*io.input_shapes[0])[0] * out_features_, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                    const int64_t n = i / out_features_;
                    const int64_t o = i % out_features_;
                    const int8_t* x_row = x + n * in_features_;
                    const int8_t* w_row = weight_ + o * in_features_;
                    int32_t acc = bias_[o];
                    for (int64_t k = 0; k < in_features_; ++k) {
                        acc += (int32_t{x_row[k]} - input_zero_point_) * int32_t{w_row[k]};
                    }
                    y[i] = arith::requantize(acc, multiplier_[o], shift_[o], output_zero_point_,
                                             clamp_.lo, clamp_.hi);
                }
            });
    }

 private:
    int64_t out_features_, in_features_;
    const int8_t* weight_;  // [O, K] in the model's bytes
    std::vector<int32_t> bias_, multiplier_, shift_;
    ClampRange clamp_;
    int32_t input_zero_point_, output_zero_point_;
};

}  // namespace

std::unique_ptr<OpKernel> make_linear_reference(const NodeView& node) {
    return std::make_unique<LinearReference>(node);
}

}  // namespace detail
}  // namespace qtk
