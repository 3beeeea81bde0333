// conv2d, reference, with PyTorch's conv2d indexing (any stride, padding, dilation and groups),
// NCHW:
// - int8: docs/quantization_spec.md section 4, per-output-channel requantization;
// - float32: the float part of a mixed-precision model, summed in float32, optional bounds.
// Both dtypes share the geometry and one loop; they differ in the accumulator and its epilogue.
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;

class Conv2dReference : public OpKernel {
 public:
    // Checks what both dtypes share: x, weight [O, C/groups, kh, kw], bias [O] and y, with
    // activations and weight of `dtype`; reads the window attributes.
    Conv2dReference(const NodeView& node, DType dtype, DType bias_dtype) : OpKernel(node.label()) {
        node.expect_input_count(3);
        node.expect_output_count(1);
        node.activation_input(0, dtype);
        const Value& weight = node.constant_input(1, "weight", dtype, 4);
        node.expect_bias_for(node.constant_input(2, "bias", bias_dtype, 1), weight);
        node.output(0, dtype);
        out_channels_ = weight.shape[0];
        group_in_channels_ = weight.shape[1];
        kernel_h_ = weight.shape[2];
        kernel_w_ = weight.shape[3];
        const std::vector<int64_t> stride = node.ints("stride", 2, 1, kMaxAttr);
        const std::vector<int64_t> padding = node.ints("padding", 2, 0, kMaxAttr);
        const std::vector<int64_t> dilation = node.ints("dilation", 2, 1, kMaxAttr);
        stride_h_ = stride[0];
        stride_w_ = stride[1];
        pad_h_ = padding[0];
        pad_w_ = padding[1];
        dilation_h_ = dilation[0];
        dilation_w_ = dilation[1];
        groups_ = node.int_scalar("groups", 1, kMaxAttr);
        if (out_channels_ % groups_ != 0) {
            node.fail("groups " + std::to_string(groups_) + " does not divide the weight's " +
                      std::to_string(out_channels_) + " output channels");
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        if (x[1] != group_in_channels_ * groups_) {
            fail("input has " + std::to_string(x[1]) + " channels, the weight expects " +
                 std::to_string(group_in_channels_ * groups_) + " (" +
                 std::to_string(group_in_channels_) + " per group x " + std::to_string(groups_) +
                 " groups)");
        }
        const int64_t out_h = sliding_output_size(x[2], kernel_h_, stride_h_, pad_h_, dilation_h_);
        const int64_t out_w = sliding_output_size(x[3], kernel_w_, stride_w_, pad_w_, dilation_w_);
        if (out_h < 1 || out_w < 1) {
            fail("input " + to_string(x) + " is smaller than the dilated kernel " +
                 std::to_string(kernel_h_) + "x" + std::to_string(kernel_w_) + " with padding");
        }
        return {{x[0], out_channels_, out_h, out_w}};
    }

 protected:
    int64_t products_per_output() const { return group_in_channels_ * kernel_h_ * kernel_w_; }

    // y[n, oc, oy, ox] = finish(oc, bias[oc] + sum (x - x_zero) * w) in the accumulator type Acc;
    // padded positions add nothing.
    template <typename T, typename Acc, typename Finish>
    void convolve(const NodeIO& io, ThreadPool& pool, const T* weight, const Acc* bias, Acc x_zero,
                  const Finish& finish) const {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t channels = xs[1], height = xs[2], width = xs[3];
        const int64_t out_h = ys[2], out_w = ys[3];
        const int64_t out_per_group = out_channels_ / groups_;
        const T* x = io.input<T>(0);
        T* y = io.output<T>(0);

        // One task per (sample, output channel) plane.
        pool.parallel_for(xs[0] * out_channels_, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t n = plane / out_channels_;
                const int64_t oc = plane % out_channels_;
                const int64_t group = oc / out_per_group;
                const T* x_group = x + (n * channels + group * group_in_channels_) * height * width;
                const T* w = weight + oc * products_per_output();
                T* y_plane = y + plane * out_h * out_w;
                for (int64_t oy = 0; oy < out_h; ++oy) {
                    for (int64_t ox = 0; ox < out_w; ++ox) {
                        Acc acc = bias[oc];
                        for (int64_t ic = 0; ic < group_in_channels_; ++ic) {
                            const T* x_channel = x_group + ic * height * width;
                            const T* w_channel = w + ic * kernel_h_ * kernel_w_;
                            for (int64_t ky = 0; ky < kernel_h_; ++ky) {
                                const int64_t iy = oy * stride_h_ - pad_h_ + ky * dilation_h_;
                                if (iy < 0 || iy >= height) {
                                    continue;  // padding adds nothing
                                }
                                for (int64_t kx = 0; kx < kernel_w_; ++kx) {
                                    const int64_t ix = ox * stride_w_ - pad_w_ + kx * dilation_w_;
                                    if (ix < 0 || ix >= width) {
                                        continue;
                                    }
                                    acc += (static_cast<Acc>(x_channel[iy * width + ix]) - x_zero) *
                                           static_cast<Acc>(w_channel[ky * kernel_w_ + kx]);
                                }
                            }
                        }
                        y_plane[oy * out_w + ox] = finish(oc, acc);
                    }
                }
            }
        });
    }

    int64_t out_channels_, group_in_channels_, kernel_h_, kernel_w_;
    int64_t stride_h_, stride_w_, pad_h_, pad_w_, dilation_h_, dilation_w_, groups_;
};

class Conv2dInt8Reference final : public Conv2dReference {
 public:
    explicit Conv2dInt8Reference(const NodeView& node)
        : Conv2dReference(node, DType::kInt8, DType::kInt32) {
        node.expect_attrs(
            {"stride", "padding", "dilation", "groups", "multiplier", "shift", "clamp"});
        const Value& x = node.activation_input(0, DType::kInt8);
        const Value& weight = node.constant_input(1, "weight", DType::kInt8, 4);
        const Value& bias = node.constant_input(2, "bias", DType::kInt32, 1);
        const Value& y = node.output(0, DType::kInt8);
        multiplier_ = node.multipliers("multiplier", static_cast<size_t>(out_channels_));
        shift_ = node.shifts("shift", static_cast<size_t>(out_channels_));
        clamp_ = node.clamp("clamp");

        weight_ = reinterpret_cast<const int8_t*>(weight.data);
        bias_ = int32_values(bias);
        check_narrow_range_weights(node, weight);
        check_accumulator_range(node, bias_, products_per_output());
        input_zero_point_ = x.zero_point;
        output_zero_point_ = y.zero_point;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        convolve(io, pool, weight_, bias_.data(), input_zero_point_, [&](int64_t oc, int32_t acc) {
            return arith::requantize(acc, multiplier_[oc], shift_[oc], output_zero_point_,
                                     clamp_.lo, clamp_.hi);
        });
    }

 private:
    const int8_t* weight_;  // [O, C/groups, kh, kw] in the model's bytes
    std::vector<int32_t> bias_, multiplier_, shift_;
    ClampRange clamp_;
    int32_t input_zero_point_, output_zero_point_;
};

class Conv2dFloat32Reference final : public Conv2dReference {
 public:
    explicit Conv2dFloat32Reference(const NodeView& node)
        : Conv2dReference(node, DType::kFloat32, DType::kFloat32) {
        node.expect_attrs({"stride", "padding", "dilation", "groups"}, {"bounds"});
        const Value& weight = node.constant_input(1, "weight", DType::kFloat32, 4);
        const Value& bias = node.constant_input(2, "bias", DType::kFloat32, 1);
        bounds_ = node.optional_float_bounds("bounds");
        weight_ = float32_values(weight);  // decoded from little-endian once
        bias_ = float32_values(bias);
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        convolve(io, pool, weight_.data(), bias_.data(), 0.0f,
                 [&](int64_t, float acc) { return bounds_.apply(acc); });
    }

 private:
    std::vector<float> weight_, bias_;
    FloatBounds bounds_;
};

}  // namespace

std::unique_ptr<OpKernel> make_conv2d_int8_reference(const NodeView& node) {
    return std::make_unique<Conv2dInt8Reference>(node);
}

std::unique_ptr<OpKernel> make_conv2d_float32_reference(const NodeView& node) {
    return std::make_unique<Conv2dFloat32Reference>(node);
}

}  // namespace detail
}  // namespace qtk
