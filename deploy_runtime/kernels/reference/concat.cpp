// concat, reference:
// - int8: docs/quantization_spec.md section 3, each input rescaled on its own to the output's
//   (scale, zero_point);
// - float32: a copy.
#include <cstring>

#include "op_algo.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class ConcatReference : public OpKernel {
 public:
    ConcatReference(const NodeView& node, DType dtype) : OpKernel(node.label()) {
        node.expect_output_count(1);
        const size_t rank = node.activation_input(0, dtype).shape.size();
        if (rank < 2) {
            node.fail("inputs must have rank >= 2 (axis 0 is the batch)");
        }
        for (size_t i = 1; i < node.input_count(); ++i) {
            node.activation_input(i, dtype);
        }
        node.output(0, dtype);
        axis_ = static_cast<size_t>(node.int_scalar("axis", 1, static_cast<int64_t>(rank) - 1));
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

 protected:
    // Calls copy(i, x, y, count) for each input i and each block of the dims before the axis
    // (batch included): x and y are that block's flat offsets into input i and into the output.
    template <typename Copy>
    void for_each_block(const NodeIO& io, ThreadPool& pool, const Copy& copy) const {
        const Shape& ys = *io.output_shapes[0];
        int64_t outer = 1;
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
                int64_t y = o * out_inner;
                for (size_t i = 0; i < count; ++i) {
                    copy(i, o * in_inner[i], y, in_inner[i]);
                    y += in_inner[i];
                }
            }
        });
    }

 private:
    size_t axis_;
};

class ConcatInt8Reference final : public ConcatReference {
 public:
    explicit ConcatInt8Reference(const NodeView& node) : ConcatReference(node, DType::kInt8) {
        node.expect_attrs({"axis", "multiplier", "shift"});
        for (size_t i = 0; i < node.input_count(); ++i) {
            input_zero_points_.push_back(node.activation_input(i, DType::kInt8).zero_point);
        }
        multiplier_ = node.multipliers("multiplier", node.input_count());
        shift_ = node.shifts("shift", node.input_count());
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        int8_t* y = io.output<int8_t>(0);
        for_each_block(io, pool, [&](size_t i, int64_t x_at, int64_t y_at, int64_t count) {
            const int8_t* x = io.input<int8_t>(i) + x_at;
            for (int64_t k = 0; k < count; ++k) {
                y[y_at + k] = arith::rescale(x[k], input_zero_points_[i], multiplier_[i], shift_[i],
                                             output_zero_point_);
            }
        });
    }

 private:
    std::vector<int32_t> input_zero_points_, multiplier_, shift_;
    int32_t output_zero_point_;
};

class ConcatFloat32Reference final : public ConcatReference {
 public:
    explicit ConcatFloat32Reference(const NodeView& node) : ConcatReference(node, DType::kFloat32) {
        node.expect_attrs({"axis"});
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        float* y = io.output<float>(0);
        for_each_block(io, pool, [&](size_t i, int64_t x_at, int64_t y_at, int64_t count) {
            std::memcpy(y + y_at, io.input<float>(i) + x_at,
                        static_cast<size_t>(count) * sizeof(float));
        });
    }
};

}  // namespace

QTK_KERNEL_FACTORY(make_concat_int8_reference, ConcatInt8Reference)

extern const OpAlgo kConcatInt8Reference = {"concat_int8_reference", IsaLevel::kScalar,
                                            make_concat_int8_reference};

QTK_KERNEL_FACTORY(make_concat_float32_reference, ConcatFloat32Reference)

}  // namespace detail
}  // namespace qtk
