// conv2d, reference: docs/quantization_spec.md section 4 with PyTorch's conv2d indexing (any
// stride, padding, dilation and groups), NCHW int8, per-output-channel requantization.
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;

class Conv2dReference final : public OpKernel {
 public:
    explicit Conv2dReference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(3);
        node.expect_output_count(1);
        node.expect_attrs(
            {"stride", "padding", "dilation", "groups", "multiplier", "shift", "clamp"});
        const Value& x = node.activation_input(0);
        const Value& weight = node.constant_input(1, "weight", DType::kInt8, 4);
        const Value& bias = node.constant_input(2, "bias", DType::kInt32, 1);
        const Value& y = node.output(0);

        out_channels_ = weight.shape[0];
        group_in_channels_ = weight.shape[1];
        kernel_h_ = weight.shape[2];
        kernel_w_ = weight.shape[3];
        node.expect_bias_for(bias, weight);
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
        multiplier_ = node.multipliers("multiplier", static_cast<size_t>(out_channels_));
        shift_ = node.shifts("shift", static_cast<size_t>(out_channels_));
        clamp_ = node.clamp("clamp");

        weight_ = reinterpret_cast<const int8_t*>(weight.data);
        bias_ = int32_values(bias);
        check_narrow_range_weights(node, weight);
        check_accumulator_range(node, bias_, group_in_channels_ * kernel_h_ * kernel_w_);
        input_zero_point_ = x.zero_point;
        output_zero_point_ = y.zero_point;
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

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t channels = xs[1], height = xs[2], width = xs[3];
        const int64_t out_h = ys[2], out_w = ys[3];
        const int64_t out_per_group = out_channels_ / groups_;
        const int64_t weight_per_output = group_in_channels_ * kernel_h_ * kernel_w_;
        const int8_t* x = io.inputs[0];
        int8_t* y = io.outputs[0];

        // One task per (sample, output channel) plane.
        pool.parallel_for(xs[0] * out_channels_, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t n = plane / out_channels_;
                const int64_t oc = plane % out_channels_;
                const int64_t group = oc / out_per_group;
                const int8_t* x_group =
                    x + (n * channels + group * group_in_channels_) * height * width;
                const int8_t* w = weight_ + oc * weight_per_output;
                int8_t* y_plane = y + plane * out_h * out_w;
                for (int64_t oy = 0; oy < out_h; ++oy) {
                    for (int64_t ox = 0; ox < out_w; ++ox) {
                        int32_t acc = bias_[oc];
                        for (int64_t ic = 0; ic < group_in_channels_; ++ic) {
                            const int8_t* x_channel = x_group + ic * height * width;
                            const int8_t* w_channel = w + ic * kernel_h_ * kernel_w_;
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
                                    acc +=
                                        (int32_t{x_channel[iy * width + ix]} - input_zero_point_) *
                                        int32_t{w_channel[ky * kernel_w_ + kx]};
                                }
                            }
                        }
                        y_plane[oy * out_w + ox] =
                            arith::requantize(acc, multiplier_[oc], shift_[oc], output_zero_point_,
                                              clamp_.lo, clamp_.hi);
                    }
                }
            }
        });
    }

 private:
    int64_t out_channels_, group_in_channels_, kernel_h_, kernel_w_;
    int64_t stride_h_, stride_w_, pad_h_, pad_w_, dilation_h_, dilation_w_, groups_;
    const int8_t* weight_;  // [O, C/groups, kh, kw] in the model's bytes
    std::vector<int32_t> bias_, multiplier_, shift_;
    ClampRange clamp_;
    int32_t input_zero_point_, output_zero_point_;
};

}  // namespace

std::unique_ptr<OpKernel> make_conv2d_reference(const NodeView& node) {
    return std::make_unique<Conv2dReference>(node);
}

}  // namespace detail
}  // namespace qtk
