// layer_norm and softmax, float32 reference (the float parts of a model: a transformer's
// normalizations and attention weights). Both work on lanes: layer_norm on the last `axes` dims
// of each sample, softmax along one axis; every lane is independent.
#include <cmath>

#include "op_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

// torch.nn.functional.layer_norm: y = (x - mean) / sqrt(var + eps) * weight + bias over each group
// of the last `axes` dims, var biased. Accumulated and computed in double, rounded once.
class LayerNormFloat32Reference final : public OpKernel {
 public:
    explicit LayerNormFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(3);
        node.expect_output_count(1);
        node.expect_attrs({"axes", "eps"});
        const Value& x = node.activation_input(0, DType::kFloat32);
        node.output(0, DType::kFloat32);
        const int64_t rank = static_cast<int64_t>(x.shape.size());
        if (rank < 2) {
            node.fail("input must have rank >= 2 (dim 0 is the batch, which is not normalized)");
        }
        axes_ = static_cast<size_t>(node.int_scalar("axes", 1, rank - 1));
        eps_ = node.floats("eps", 1)[0];
        if (!(eps_ > 0.0f) || std::isinf(eps_)) {
            node.fail("attribute 'eps' = " + std::to_string(eps_) + " must be finite and > 0");
        }
        const Value& weight = node.constant_input(1, "weight", DType::kFloat32, axes_);
        const Value& bias = node.constant_input(2, "bias", DType::kFloat32, axes_);
        const Shape normalized(x.shape.end() - static_cast<std::ptrdiff_t>(axes_), x.shape.end());
        for (const Value* v : {&weight, &bias}) {
            if (v->shape != normalized) {
                node.fail("'" + v->name + "' has shape " + to_string(v->shape) + ", expected " +
                          to_string(normalized) + " (the last " + std::to_string(axes_) +
                          " dims of the input " + to_string(x.shape) + ")");
            }
        }
        weight_ = float32_values(weight);
        bias_ = float32_values(bias);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        // The dims after the batch are the file's (the session changes only N), so the weight's
        // shape checked at load still fits.
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t group = static_cast<int64_t>(weight_.size());
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(element_count(*io.input_shapes[0]) / group, [&](int64_t begin,
                                                                           int64_t end) {
            for (int64_t lane = begin; lane < end; ++lane) {
                const float* xl = x + lane * group;
                float* yl = y + lane * group;
                double sum = 0;
                for (int64_t i = 0; i < group; ++i) {
                    sum += xl[i];
                }
                const double mean = sum / static_cast<double>(group);
                double squares = 0;
                for (int64_t i = 0; i < group; ++i) {
                    squares += (xl[i] - mean) * (xl[i] - mean);
                }
                const double inv_std =
                    1.0 / std::sqrt(squares / static_cast<double>(group) + double{eps_});
                for (int64_t i = 0; i < group; ++i) {
                    yl[i] = static_cast<float>((xl[i] - mean) * inv_std * weight_[i] + bias_[i]);
                }
            }
        });
    }

 private:
    size_t axes_;
    float eps_;
    std::vector<float> weight_, bias_;  // decoded from little-endian once
};

// torch.softmax along `axis`: exp(x - max) in float32, divided by their sum (in double).
class SoftmaxFloat32Reference final : public OpKernel {
 public:
    explicit SoftmaxFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({"axis"});
        const Value& x = node.activation_input(0, DType::kFloat32);
        node.output(0, DType::kFloat32);
        const int64_t rank = static_cast<int64_t>(x.shape.size());
        if (rank < 2) {
            node.fail("input must have rank >= 2 (axis 0 is the batch)");
        }
        axis_ = static_cast<size_t>(node.int_scalar("axis", 1, rank - 1));
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};  // the rank is the file's: axis_ fits it
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t length = xs[axis_];
        int64_t inner = 1;  // the elements of one axis step: the lane's stride
        for (size_t d = axis_ + 1; d < xs.size(); ++d) {
            inner *= xs[d];
        }
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(element_count(xs) / length, [&](int64_t begin, int64_t end) {
            for (int64_t lane = begin; lane < end; ++lane) {
                const int64_t first = lane / inner * length * inner + lane % inner;
                const float* xl = x + first;
                float* yl = y + first;
                // A NaN anywhere makes the whole lane NaN, as in torch, whichever max it picks.
                float max = xl[0];
                for (int64_t i = 1; i < length; ++i) {
                    max = xl[i * inner] > max ? xl[i * inner] : max;
                }
                double sum = 0;
                for (int64_t i = 0; i < length; ++i) {
                    yl[i * inner] = std::exp(xl[i * inner] - max);
                    sum += yl[i * inner];
                }
                for (int64_t i = 0; i < length; ++i) {
                    yl[i * inner] = static_cast<float>(yl[i * inner] / sum);
                }
            }
        });
    }

 private:
    size_t axis_;
};

}  // namespace

QTK_KERNEL_FACTORY(make_layer_norm_float32_reference, LayerNormFloat32Reference)
QTK_KERNEL_FACTORY(make_softmax_float32_reference, SoftmaxFloat32Reference)

}  // namespace detail
}  // namespace qtk
