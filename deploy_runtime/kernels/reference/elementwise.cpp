// add and clamp, reference: docs/quantization_spec.md sections 3 (rescaled sum) and 5 (activation
// as a clamp on the int8 values).
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class AddReference final : public OpKernel {
 public:
    explicit AddReference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs({"multiplier", "shift", "clamp"});
        a_zero_point_ = node.activation_input(0).zero_point;
        b_zero_point_ = node.activation_input(1).zero_point;
        output_zero_point_ = node.output(0).zero_point;
        const std::vector<int32_t> multipliers = node.multipliers("multiplier", 2);
        a_multiplier_ = multipliers[0];
        b_multiplier_ = multipliers[1];
        shift_ = node.shifts("shift", 1)[0];
        clamp_ = node.clamp("clamp");
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        if (inputs[0] != inputs[1]) {
            fail("inputs have different shapes " + to_string(inputs[0]) + " and " +
                 to_string(inputs[1]));
        }
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* a = io.inputs[0];
        const int8_t* b = io.inputs[1];
        int8_t* y = io.outputs[0];
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = arith::rescale_add(a[i], a_zero_point_, a_multiplier_, b[i], b_zero_point_,
                                          b_multiplier_, shift_, output_zero_point_, clamp_.lo,
                                          clamp_.hi);
            }
        });
    }

 private:
    int32_t a_zero_point_, b_zero_point_, output_zero_point_;
    int32_t a_multiplier_, b_multiplier_, shift_;
    ClampRange clamp_;
};

class ClampReference final : public OpKernel {
 public:
    explicit ClampReference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({"clamp"});
        node.expect_same_quantization(node.activation_input(0), node.output(0));
        clamp_ = node.clamp("clamp");
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* x = io.inputs[0];
        int8_t* y = io.outputs[0];
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = static_cast<int8_t>(arith::clamp(x[i], clamp_.lo, clamp_.hi));
            }
        });
    }

 private:
    ClampRange clamp_;
};

}  // namespace

std::unique_ptr<OpKernel> make_add_reference(const NodeView& node) {
    return std::make_unique<AddReference>(node);
}

std::unique_ptr<OpKernel> make_clamp_reference(const NodeView& node) {
    return std::make_unique<ClampReference>(node);
}

}  // namespace detail
}  // namespace qtk
