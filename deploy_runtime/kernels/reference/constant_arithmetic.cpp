// Arithmetic with a constant, int8, reference (docs/quantization_spec.md section 21): the constant
// is folded into the requantization, one value per element of its broadcast shape.
// - mul_constant: x, multiplier int32 (signed), shift int32 of one shape; y = requantize(q - z).
// - add_constant: x, bias int32; y = requantize(+-(q - z) 2^k + B), one (M, n).
// The constants have the activation's rank, dim 0 = 1 (they broadcast over the batch) and every
// other dim 1 or matching the activation's (torch's broadcasting: the output may be larger than x).
#include <string>
#include <vector>

#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

// x (int8 activation) and one or more int32 constants of one shape, broadcast against x.
class ConstantOperandReference : public OpKernel {
 public:
    ConstantOperandReference(const NodeView& node, std::vector<const char*> roles)
        : OpKernel(node.label()) {
        node.expect_input_count(1 + roles.size());
        node.expect_output_count(1);
        const Value& x = node.activation_input(0, DType::kInt8);
        input_zero_point_ = x.zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        for (size_t i = 0; i < roles.size(); ++i) {
            const Value& c = node.constant_input(1 + i, roles[i], DType::kInt32, x.shape.size());
            if (c.shape[0] != 1) {
                node.fail("constant '" + c.name + "' has shape " + to_string(c.shape) +
                          "; its dim 0 faces the batch, so it must be 1");
            }
            if (i > 0 && c.shape != constant_shape_) {
                node.fail("constant '" + c.name + "' has shape " + to_string(c.shape) +
                          ", expected the shape of the first constant " +
                          to_string(constant_shape_));
            }
            constant_shape_ = c.shape;
            constants_.push_back(int32_values(c));
        }
        Shape out;
        if (!broadcast_shapes(x.shape, constant_shape_, &out)) {
            node.fail("the constant's shape " + to_string(constant_shape_) +
                      " does not broadcast with the input's " + to_string(x.shape) +
                      " (each dim equal or 1)");
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        Shape out;
        if (!broadcast_shapes(inputs[0], constant_shape_, &out)) {
            fail("input of shape " + to_string(inputs[0]) + " does not broadcast with the "
                 "constant's " + to_string(constant_shape_));
        }
        return {out};
    }

 protected:
    // Calls fn(i, ix, ic) for every output element i with the flat indices of its x and constant.
    template <typename Fn>
    void for_each_element(const NodeIO& io, ThreadPool& pool, const Fn& fn) const {
        const Shape& ys = *io.output_shapes[0];
        const StridedWalk<2>::Strides strides = {broadcast_strides(*io.input_shapes[0], ys.size()),
                                                 broadcast_strides(constant_shape_, ys.size())};
        pool.parallel_for(element_count(ys), [&](int64_t begin, int64_t end) {
            StridedWalk<2> walk(ys, strides, begin);
            for (int64_t i = begin; i < end; ++i, walk.next()) {
                fn(i, walk.offset(0), walk.offset(1));
            }
        });
    }

    int32_t input_zero_point_, output_zero_point_;
    Shape constant_shape_;
    std::vector<std::vector<int32_t>> constants_;
};

class MulConstantInt8Reference final : public ConstantOperandReference {
 public:
    explicit MulConstantInt8Reference(const NodeView& node)
        : ConstantOperandReference(node, {"multiplier", "shift"}) {
        node.expect_attrs({"clamp"});
        clamp_ = node.clamp("clamp");
        const std::vector<int32_t>& multipliers = constants_[0];
        const std::vector<int32_t>& shifts = constants_[1];
        for (size_t e = 0; e < multipliers.size(); ++e) {
            // |M| < 2^31 keeps (q - z) M exact; -2^31 is the one int32 without a magnitude.
            if (multipliers[e] == INT32_MIN) {
                node.fail("multiplier[" + std::to_string(e) + "] = -2^31 is outside " +
                          "(-2^31, 2^31)");
            }
            if (shifts[e] < 1 || shifts[e] > 62) {
                node.fail("shift[" + std::to_string(e) + "] = " + std::to_string(shifts[e]) +
                          " is outside [1, 62]");
            }
        }
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        const int32_t* multiplier = constants_[0].data();
        const int32_t* shift = constants_[1].data();
        for_each_element(io, pool, [&](int64_t i, int64_t ix, int64_t ic) {
            y[i] = arith::mul_constant(x[ix], input_zero_point_, multiplier[ic], shift[ic],
                                       output_zero_point_, clamp_.lo, clamp_.hi);
        });
    }

 private:
    ClampRange clamp_;
};

class AddConstantInt8Reference final : public ConstantOperandReference {
 public:
    explicit AddConstantInt8Reference(const NodeView& node)
        : ConstantOperandReference(node, {"bias"}) {
        node.expect_attrs({"multiplier", "shift", "input_shift", "negate", "clamp"});
        multiplier_ = node.multipliers("multiplier", 1)[0];
        shift_ = node.shifts("shift", 1)[0];
        input_shift_ = static_cast<int32_t>(
            node.ints("input_shift", 1, 0, arith::kConstantMaxInputShift)[0]);
        negate_ = node.ints("negate", 1, 0, 1)[0] == 1;
        clamp_ = node.clamp("clamp");
        const std::vector<int32_t>& bias = constants_[0];
        for (size_t e = 0; e < bias.size(); ++e) {
            if (bias[e] < -arith::kConstantMaxBias || bias[e] > arith::kConstantMaxBias) {
                node.fail("bias[" + std::to_string(e) + "] = " + std::to_string(bias[e]) +
                          " is outside [-2^30, 2^30], which keeps the sum in int32 " +
                          "(docs/quantization_spec.md section 21)");
            }
        }
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        const int32_t* bias = constants_[0].data();
        for_each_element(io, pool, [&](int64_t i, int64_t ix, int64_t ic) {
            y[i] = arith::add_constant(x[ix], input_zero_point_, negate_, input_shift_, bias[ic],
                                       multiplier_, shift_, output_zero_point_, clamp_.lo,
                                       clamp_.hi);
        });
    }

 private:
    int32_t multiplier_, shift_, input_shift_;
    bool negate_;
    ClampRange clamp_;
};

}  // namespace

QTK_KERNEL_FACTORY(make_mul_constant_int8_reference, MulConstantInt8Reference)
QTK_KERNEL_FACTORY(make_add_constant_int8_reference, AddConstantInt8Reference)

}  // namespace detail
}  // namespace qtk
