// concat, reference: docs/quantization_spec.md section 3, each input rescaled on its own to the
// output's (scale, zero_point).
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class ConcatReference final : public OpKernel {
 public:
    explicit ConcatReference(const NodeView& node) : OpKernel(node.label()) {
        if (node.input_count() < 1) {
            node.fail("expects at least 1 input, got 0");
        }
        node.expect_output_count(1);
        node.expect_attrs({"axis", "multiplier", "shift"});
        const size_t rank = node.activation_input(0).shape.size();
        if (rank < 2) {
            node.fail("inputs must have rank >= 2 (axis 0 is the batch)");
        }
        axis_ = static_cast<size_t>(node.int_scalar("axis", 1, static_cast<int64_t>(rank) - 1));
        for (size_t i = 0; i < node.input_count(); ++i) {
            input_zero_points_.push_back(node.activation_input(i).zero_point);
        }
        multiplier_ = node.multipliers("multiplier", node.input_count());
        shift_ = node.shifts("shift", node.input_count());
        output_zero_point_ = node.output(0).zero_point;
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        Shape out = inputs[0];
        if (axis_ >= out.size()) {
            fail("axis " + std::to_string(axis_) + " is beyond input 0's rank");
        }
        for (size_t i = 1; i < inputs.size(); ++i) {
            const Shape& s = inputs[i];
            bool fits = s.size() == out.size();
            for (size_t d = 0; fits && d < s.size(); ++d) {
                fits = d == axis_ || s[d] == out[d];
            }
            if (!fits) {
                fail("input " + std::to_string(i) + " has shape " + to_string(s) +
                     ", which differs from input 0's " + to_string(inputs[0]) +
                     " in a dim other than axis " + std::to_string(axis_));
            }
            out[axis_] += s[axis_];  // at most 2^20 inputs of dims below 2^31: no overflow
        }
        return {out};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        int64_t outer = 1;  // the dims before axis, batch included
        for (size_t d = 0; d < axis_; ++d) {
            outer *= ys[d];
        }
        const int64_t out_inner = element_count(ys) / outer;
        const size_t count = io.inputs.size();
        std::vector<int64_t> in_inner(count);
        for (size_t i = 0; i < count; ++i) {
            in_inner[i] = element_count(*io.input_shapes[i]) / outer;
        }

        pool.parallel_for(outer, [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o) {
                int8_t* y = io.outputs[0] + o * out_inner;
                for (size_t i = 0; i < count; ++i) {
                    const int8_t* x = io.inputs[i] + o * in_inner[i];
                    for (int64_t k = 0; k < in_inner[i]; ++k) {
                        y[k] = arith::rescale(x[k], input_zero_points_[i], multiplier_[i],
                                              shift_[i], output_zero_point_);
                    }
                    y += in_inner[i];
                }
            }
        });
    }

 private:
    size_t axis_;
    std::vector<int32_t> input_zero_points_, multiplier_, shift_;
    int32_t output_zero_point_;
};

}  // namespace

std::unique_ptr<OpKernel> make_concat_reference(const NodeView& node) {
    return std::make_unique<ConcatReference>(node);
}

}  // namespace detail
}  // namespace qtk
