// linear, reference:
// - int8: docs/quantization_spec.md section 4 with k over the input features;
// - float32: the float part of a mixed-precision model, summed in float32, optional bounds.
// Both dtypes share one loop; they differ in the accumulator and its epilogue.
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class LinearReference : public OpKernel {
 public:
    // Checks what both dtypes share: x, weight [O, K], bias [O] and y, with activations and
    // weight of `dtype`.
    LinearReference(const NodeView& node, DType dtype, DType bias_dtype) : OpKernel(node.label()) {
        node.expect_input_count(3);
        node.expect_output_count(1);
        node.activation_input(0, dtype);
        const Value& weight = node.constant_input(1, "weight", dtype, 2);
        node.expect_bias_for(node.constant_input(2, "bias", bias_dtype, 1), weight);
        node.output(0, dtype);
        out_features_ = weight.shape[0];
        in_features_ = weight.shape[1];
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

 protected:
    // y[n, o] = finish(o, bias[o] + sum_k (x[n, k] - x_zero) * w[o, k]) in the accumulator type.
    template <typename T, typename Acc, typename Finish>
    void multiply(const NodeIO& io, ThreadPool& pool, const T* weight, const Acc* bias, Acc x_zero,
                  const Finish& finish) const {
        const T* x = io.input<T>(0);
        T* y = io.output<T>(0);
        // One task per (sample, output feature).
        pool.parallel_for(
            (*io.input_shapes[0])[0] * out_features_, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                    const int64_t n = i / out_features_;
                    const int64_t o = i % out_features_;
                    const T* x_row = x + n * in_features_;
                    const T* w_row = weight + o * in_features_;
                    Acc acc = bias[o];
                    for (int64_t k = 0; k < in_features_; ++k) {
                        acc += (static_cast<Acc>(x_row[k]) - x_zero) * static_cast<Acc>(w_row[k]);
                    }
                    y[i] = finish(o, acc);
                }
            });
    }

    int64_t out_features_, in_features_;
};

class LinearInt8Reference final : public LinearReference {
 public:
    explicit LinearInt8Reference(const NodeView& node)
        : LinearReference(node, DType::kInt8, DType::kInt32) {
        node.expect_attrs({"multiplier", "shift", "clamp"});
        const Value& weight = node.constant_input(1, "weight", DType::kInt8, 2);
        multiplier_ = node.multipliers("multiplier", static_cast<size_t>(out_features_));
        shift_ = node.shifts("shift", static_cast<size_t>(out_features_));
        clamp_ = node.clamp("clamp");

        weight_ = reinterpret_cast<const int8_t*>(weight.data);
        bias_ = int32_values(node.constant_input(2, "bias", DType::kInt32, 1));
        check_narrow_range_weights(node, weight);
        check_accumulator_range(node, bias_, in_features_);
        input_zero_point_ = node.activation_input(0, DType::kInt8).zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        multiply(io, pool, weight_, bias_.data(), input_zero_point_, [&](int64_t o, int32_t acc) {
            return arith::requantize(acc, multiplier_[o], shift_[o], output_zero_point_, clamp_.lo,
                                     clamp_.hi);
        });
    }

 private:
    const int8_t* weight_;  // [O, K] in the model's bytes
    std::vector<int32_t> bias_, multiplier_, shift_;
    ClampRange clamp_;
    int32_t input_zero_point_, output_zero_point_;
};

class LinearFloat32Reference final : public LinearReference {
 public:
    explicit LinearFloat32Reference(const NodeView& node)
        : LinearReference(node, DType::kFloat32, DType::kFloat32) {
        node.expect_attrs({}, {"bounds"});
        bounds_ = node.optional_float_bounds("bounds");
        weight_ = float32_values(node.constant_input(1, "weight", DType::kFloat32, 2));
        bias_ = float32_values(node.constant_input(2, "bias", DType::kFloat32, 1));
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        multiply(io, pool, weight_.data(), bias_.data(), 0.0f,
                 [&](int64_t, float acc) { return bounds_.apply(acc); });
    }

 private:
    std::vector<float> weight_, bias_;  // decoded from little-endian once
    FloatBounds bounds_;
};

}  // namespace

std::unique_ptr<OpKernel> make_linear_int8_reference(const NodeView& node) {
    return std::make_unique<LinearInt8Reference>(node);
}

std::unique_ptr<OpKernel> make_linear_float32_reference(const NodeView& node) {
    return std::make_unique<LinearFloat32Reference>(node);
}

}  // namespace detail
}  // namespace qtk
