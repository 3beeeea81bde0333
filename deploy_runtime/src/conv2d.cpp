#include "conv2d.h"

namespace qtk {
namespace detail {

namespace {
constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;
}  // namespace

Conv2dParams read_conv2d_window(const NodeView& node, const Value& weight) {
    const std::vector<int64_t> stride = node.ints("stride", 2, 1, kMaxAttr);
    const std::vector<int64_t> padding = node.ints("padding", 2, 0, kMaxAttr);
    const std::vector<int64_t> dilation = node.ints("dilation", 2, 1, kMaxAttr);
    Conv2dParams p;
    p.out_channels = weight.shape[0];
    p.group_in_channels = weight.shape[1];
    p.kernel_h = weight.shape[2];
    p.kernel_w = weight.shape[3];
    p.stride_h = stride[0];
    p.stride_w = stride[1];
    p.pad_h = padding[0];
    p.pad_w = padding[1];
    p.dilation_h = dilation[0];
    p.dilation_w = dilation[1];
    p.groups = node.int_scalar("groups", 1, kMaxAttr);
    if (p.out_channels % p.groups != 0) {
        node.fail("groups " + std::to_string(p.groups) + " does not divide the weight's " +
                  std::to_string(p.out_channels) + " output channels");
    }
    return p;
}

Conv2dParams read_conv2d_params(const NodeView& node, DType dtype, DType bias_dtype) {
    const size_t inputs = dtype == DType::kInt8 && node.input_count() == 4 ? 4 : 3;
    Conv2dParams p =
        read_conv2d_window(node, node.expect_weight_layer(inputs, dtype, bias_dtype, 4));
    p.nhwc = node.channels_last();
    p.fused_prelu = node.has_attr("negative_multiplier");
    const Shape& y = node.output(0, dtype).shape;
    if (y.size() == 4) {  // else the kernel reports it
        p.out_h = p.nhwc ? y[1] : y[2];
        p.out_w = p.nhwc ? y[2] : y[3];
    }
    return p;
}

Conv2dInt8Constants::Conv2dInt8Constants(const NodeView& node, const Conv2dParams& params) {
    const Value& x = node.activation_input(0, DType::kInt8);
    const Value& w = node.constant_input(1, "weight", DType::kInt8, 4);
    const Value& b = node.constant_input(2, "bias", DType::kInt32, 1);
    const Value& y = node.output(0, DType::kInt8);
    multiplier = node.multipliers("multiplier", static_cast<size_t>(params.out_channels));
    shift = node.shifts("shift", static_cast<size_t>(params.out_channels));
    clamp = node.clamp("clamp");

    if (node.has_attr("negative_multiplier") || node.has_attr("negative_shift")) {
        const std::vector<int64_t> m =
            node.int_list("negative_multiplier", -kMaxAttr, kMaxAttr);  // signed (spec 22)
        if (m.size() != size_t(params.out_channels)) {
            node.fail("attribute 'negative_multiplier' holds " + std::to_string(m.size()) +
                      " values, one per output channel (" + std::to_string(params.out_channels) +
                      ") expected");
        }
        negative_multiplier.assign(m.begin(), m.end());
        negative_shift = node.shifts("negative_shift", size_t(params.out_channels));
    }
    weight = reinterpret_cast<const int8_t*>(w.data);
    bias = int32_values(b);
    check_narrow_range_weights(node, w);
    check_accumulator_range(node, bias, params.products_per_output());
    input_zero_point = x.zero_point;
    has_residual = node.input_count() == 4;
    binary = node.op() == "conv2d_binary";
    if (binary) {
        node.expect_attrs({"stride", "padding", "dilation", "groups", "multiplier", "shift",
                           "clamp", "pad_value"},
                          {"thresholds", "negative_multiplier", "negative_shift"});
        if (has_residual) {
            node.fail("a binary convolution takes 3 inputs (x, weight, bias), not 4");
        }
        pad_value = static_cast<int32_t>(node.int_scalar("pad_value", 0, 1));
        const int64_t channels = params.groups * params.group_in_channels;
        thresholds.assign(size_t(channels), x.zero_point);
        if (node.has_attr("thresholds")) {
            const std::vector<int64_t> t = node.ints("thresholds", size_t(channels), -128, 128);
            thresholds.assign(t.begin(), t.end());
        }
        for (size_t i = 0; i < w.data_size; ++i) {
            if (weight[i] != 1 && weight[i] != -1) {
                node.fail("weight '" + w.name + "' holds " + std::to_string(weight[i]) +
                          " at element " + std::to_string(i) +
                          "; a binary convolution's weights are -1 and +1 (spec 24)");
            }
        }
        output_zero_point = y.zero_point;
        return;
    }
    if (!has_residual) {
        node.expect_attrs(
            {"stride", "padding", "dilation", "groups", "multiplier", "shift", "clamp"},
            {"layout", "negative_multiplier", "negative_shift"});
        output_zero_point = y.zero_point;
        return;
    }
    node.expect_attrs({"stride", "padding", "dilation", "groups", "multiplier", "shift", "clamp",
                       "conv_zero_point", "add_multiplier", "add_shift", "add_clamp"},
                      {"layout", "negative_multiplier", "negative_shift"});
    output_zero_point =
        static_cast<int32_t>(node.int_scalar("conv_zero_point", arith::kInt8Min, arith::kInt8Max));
    const std::vector<int32_t> add_multiplier = node.multipliers("add_multiplier", 2);
    const ClampRange add_clamp = node.clamp("add_clamp");
    residual = {output_zero_point,
                add_multiplier[0],
                node.activation_input(3, DType::kInt8).zero_point,
                add_multiplier[1],
                node.shifts("add_shift", 1)[0],
                y.zero_point,
                add_clamp.lo,
                add_clamp.hi};
}

Conv2dFloat32Constants::Conv2dFloat32Constants(const NodeView& node) {
    node.expect_attrs({"stride", "padding", "dilation", "groups"}, {"bounds"});
    weight = float32_values(node.constant_input(1, "weight", DType::kFloat32, 4));
    bias = float32_values(node.constant_input(2, "bias", DType::kFloat32, 1));
    bounds = node.optional_float_bounds("bounds");
}

std::vector<Shape> Conv2dKernel::infer_shapes(const std::vector<Shape>& inputs) const {
    const Conv2dParams& p = params_;
    const Shape& x = inputs[0];
    expect_rank(x, 4, "input");
    // Dims of channels, height and width in this layout.
    const size_t c = p.nhwc ? 3 : 1, h = p.nhwc ? 1 : 2, w = p.nhwc ? 2 : 3;
    if (x[c] != p.group_in_channels * p.groups) {
        fail("input has " + std::to_string(x[c]) + " channels, the weight expects " +
             std::to_string(p.group_in_channels * p.groups) + " (" +
             std::to_string(p.group_in_channels) + " per group x " + std::to_string(p.groups) +
             " groups)");
    }
    const int64_t out_h = sliding_output_size(x[h], p.kernel_h, p.stride_h, p.pad_h, p.dilation_h);
    const int64_t out_w = sliding_output_size(x[w], p.kernel_w, p.stride_w, p.pad_w, p.dilation_w);
    if (out_h < 1 || out_w < 1) {
        fail("input " + to_string(x) + " is smaller than the dilated kernel " +
             std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) + " with padding");
    }
    Shape y = p.nhwc ? Shape{x[0], out_h, out_w, p.out_channels}
                     : Shape{x[0], p.out_channels, out_h, out_w};
    if (inputs.size() == 4 && inputs[3] != y) {
        fail("the fused residual has shape " + to_string(inputs[3]) + ", the conv computes " +
             to_string(y));
    }
    return {std::move(y)};
}

bool fits_any_conv2d(const Conv2dParams&) { return true; }

}  // namespace detail
}  // namespace qtk
