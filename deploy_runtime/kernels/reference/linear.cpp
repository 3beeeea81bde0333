// linear, reference:
// - int8: docs/quantization_spec.md section 4 with k over the input features (the last dimension;
//   every other dimension is rows);
// - float32: the float part of a mixed-precision model, summed in float32, optional bounds.
// Both dtypes share one loop; they differ in the accumulator and its epilogue.
#include "linear.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class LinearReference : public LinearKernel {
 public:
    using LinearKernel::LinearKernel;

 protected:
    // y[n, o] = finish(o, bias[o] + sum_k (x[n, k] - x_zero) * w[o, k]) in the accumulator type,
    // n over every row (all dimensions of x but the last).
    template <typename T, typename Acc, typename Finish>
    void multiply(const NodeIO& io, ThreadPool& pool, const T* weight, const Acc* bias, Acc x_zero,
                  const Finish& finish) const {
        const T* x = io.input<T>(0);
        T* y = io.output<T>(0);
        // One task per (row, output feature).
        pool.parallel_for(
            rows(*io.input_shapes[0]) * out_features_, [&](int64_t begin, int64_t end) {
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
};

class LinearInt8Reference final : public LinearReference {
 public:
    explicit LinearInt8Reference(const NodeView& node)
        : LinearReference(node, DType::kInt8, DType::kInt32),
          constants_(node, out_features_, in_features_) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const LinearInt8Constants& c = constants_;
        multiply(io, pool, c.weight, c.bias.data(), c.input_zero_point,
                 [&](int64_t o, int32_t acc) { return c.requantize(o, acc); });
    }

 private:
    const LinearInt8Constants constants_;
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

QTK_KERNEL_FACTORY(make_linear_int8_reference, LinearInt8Reference)

// The portable int8 algorithm, last in the registry's list: it serves every layer on every CPU.
extern const LinearAlgo kLinearInt8Reference = {"linear_int8_reference", IsaLevel::kScalar,
                                                make_linear_int8_reference};

QTK_KERNEL_FACTORY(make_linear_float32_reference, LinearFloat32Reference)

extern const OpAlgo kLinearFloat32Reference = {"linear_float32_reference", IsaLevel::kScalar,
                                               make_linear_float32_reference};

}  // namespace detail
}  // namespace qtk
