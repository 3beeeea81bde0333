// conv_transpose2d, reference, with PyTorch's conv_transpose2d indexing (any stride, padding,
// output_padding, dilation and groups), NCHW:
// - int8: docs/quantization_spec.md section 20: the exact int32 sum of spec 4 over the input
//   positions whose scatter reaches the output, per-output-channel requantization, fused clamp;
// - float32: the float part of a mixed-precision model, summed in float32, optional bounds.
// The weight is [O, C/groups, kh, kw] (output channel first, as conv2d's; torch's
// [C, O/groups, kh, kw] regrouped at export), so multiplier[o] and bias[o] index its dim 0.
// Each output gathers its terms (input channel, ky, kx in that order), so the bytes depend on
// no thread count.
#include <string>
#include <vector>

#include "conv2d.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

// conv2d's geometry (NCHW), plus output_padding.
struct ConvTranspose2dParams : Conv2dParams {
    int64_t out_pad_h, out_pad_w;
};

// Checks x, weight [O, C/groups, kh, kw] and bias [O] of `dtype` / `bias_dtype`, y, and the window
// attributes (torch's rule: output_padding below stride or dilation, per axis).
ConvTranspose2dParams read_params(const NodeView& node, DType dtype, DType bias_dtype) {
    ConvTranspose2dParams p{
        read_conv2d_window(node, node.expect_weight_layer(3, dtype, bias_dtype, 4)), 0, 0};
    const std::vector<int64_t> output_padding = node.ints("output_padding", 2, 0, kMaxAttr);
    const int64_t stride[2] = {p.stride_h, p.stride_w};
    const int64_t dilation[2] = {p.dilation_h, p.dilation_w};
    for (size_t a = 0; a < 2; ++a) {
        if (output_padding[a] >= std::max(stride[a], dilation[a])) {
            node.fail("attribute 'output_padding'[" + std::to_string(a) + "] = " +
                      std::to_string(output_padding[a]) +
                      " must be smaller than the stride or the dilation (" +
                      std::to_string(stride[a]) + ", " + std::to_string(dilation[a]) + ")");
        }
    }
    p.out_pad_h = output_padding[0];
    p.out_pad_w = output_padding[1];
    return p;
}

// torch's output size along one axis: (in - 1) stride - 2 padding + dilation (k - 1) +
// output_padding + 1. With every term below 2^31 (attributes and dims are) it fits int64.
int64_t transposed_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                               int64_t output_padding, int64_t dilation) {
    return (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1;
}

class ConvTranspose2dReference : public OpKernel {
 public:
    ConvTranspose2dReference(const NodeView& node, DType dtype, DType bias_dtype)
        : OpKernel(node.label()), params_(read_params(node, dtype, bias_dtype)) {}

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const ConvTranspose2dParams& p = params_;
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        if (x[1] != p.group_in_channels * p.groups) {
            fail("input has " + std::to_string(x[1]) + " channels, the weight expects " +
                 std::to_string(p.group_in_channels * p.groups) + " (" +
                 std::to_string(p.group_in_channels) + " per group x " +
                 std::to_string(p.groups) + " groups)");
        }
        const int64_t out_h = transposed_output_size(x[2], p.kernel_h, p.stride_h, p.pad_h,
                                                     p.out_pad_h, p.dilation_h);
        const int64_t out_w = transposed_output_size(x[3], p.kernel_w, p.stride_w, p.pad_w,
                                                     p.out_pad_w, p.dilation_w);
        if (out_h < 1 || out_w < 1 || out_h > kMaxDim || out_w > kMaxDim) {
            fail("input " + to_string(x) + " gives an output of " + std::to_string(out_h) + "x" +
                 std::to_string(out_w) + " (padding larger than the scattered window, or too "
                 "large); each side must be in [1, 2^31)");
        }
        return {{x[0], p.out_channels, out_h, out_w}};
    }

 protected:
    // y[n, o, oy, ox] = finish(o, bias[o] + sum (x - x_zero) * w, i) in the accumulator type Acc:
    // input (iy, ix) scatters its tap (ky, kx) to oy = iy stride - pad + ky dilation, so an
    // output gathers the taps whose (oy + pad - ky dilation) is a multiple of the stride inside
    // the input.
    template <typename T, typename Acc, typename Finish>
    void convolve(const NodeIO& io, ThreadPool& pool, const T* weight, const Acc* bias, Acc x_zero,
                  const Finish& finish) const {
        const ConvTranspose2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t channels = xs[1], height = xs[2], width = xs[3];
        const int64_t out_h = ys[2], out_w = ys[3];
        const T* x = io.input<T>(0);
        T* y = io.output<T>(0);
        pool.parallel_for(xs[0] * p.out_channels, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t n = plane / p.out_channels;
                const int64_t oc = plane % p.out_channels;
                const int64_t ic0 = oc / p.out_per_group() * p.group_in_channels;
                const T* w = weight + oc * p.products_per_output();
                T* y_plane = y + plane * out_h * out_w;
                for (int64_t oy = 0; oy < out_h; ++oy) {
                    for (int64_t ox = 0; ox < out_w; ++ox) {
                        Acc acc = bias[oc];
                        for (int64_t ic = 0; ic < p.group_in_channels; ++ic) {
                            const T* x_plane = x + ((n * channels) + ic0 + ic) * height * width;
                            const T* w_channel = w + ic * p.kernel_h * p.kernel_w;
                            for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
                                const int64_t ty = oy + p.pad_h - ky * p.dilation_h;
                                if (ty < 0 || ty % p.stride_h != 0 || ty / p.stride_h >= height) {
                                    continue;  // no input scatters this tap here
                                }
                                const int64_t iy = ty / p.stride_h;
                                for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                                    const int64_t tx = ox + p.pad_w - kx * p.dilation_w;
                                    if (tx < 0 || tx % p.stride_w != 0 ||
                                        tx / p.stride_w >= width) {
                                        continue;
                                    }
                                    const int64_t ix = tx / p.stride_w;
                                    acc += (static_cast<Acc>(x_plane[iy * width + ix]) - x_zero) *
                                           static_cast<Acc>(w_channel[ky * p.kernel_w + kx]);
                                }
                            }
                        }
                        y_plane[oy * out_w + ox] = finish(oc, acc);
                    }
                }
            }
        });
    }

    const ConvTranspose2dParams params_;
};

class ConvTranspose2dInt8Reference final : public ConvTranspose2dReference {
 public:
    explicit ConvTranspose2dInt8Reference(const NodeView& node)
        : ConvTranspose2dReference(node, DType::kInt8, DType::kInt32) {
        node.expect_attrs({"stride", "padding", "output_padding", "dilation", "groups",
                           "multiplier", "shift", "clamp"});
        const Value& w = node.constant_input(1, "weight", DType::kInt8, 4);
        weight_ = reinterpret_cast<const int8_t*>(w.data);
        bias_ = int32_values(node.constant_input(2, "bias", DType::kInt32, 1));
        multiplier_ = node.multipliers("multiplier", static_cast<size_t>(params_.out_channels));
        shift_ = node.shifts("shift", static_cast<size_t>(params_.out_channels));
        clamp_ = node.clamp("clamp");
        check_narrow_range_weights(node, w);
        // At most C/groups kh kw products reach an output (fewer where the stride skips taps).
        check_accumulator_range(node, bias_, params_.products_per_output());
        input_zero_point_ = node.activation_input(0, DType::kInt8).zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        convolve(io, pool, weight_, bias_.data(), input_zero_point_,
                 [&](int64_t oc, int32_t acc) {
                     return arith::requantize(acc, multiplier_[oc], shift_[oc],
                                              output_zero_point_, clamp_.lo, clamp_.hi);
                 });
    }

 private:
    const int8_t* weight_;  // [O, C/groups, kh, kw], narrow range, owned by the model
    std::vector<int32_t> bias_, multiplier_, shift_;
    ClampRange clamp_{};
    int32_t input_zero_point_ = 0, output_zero_point_ = 0;
};

class ConvTranspose2dFloat32Reference final : public ConvTranspose2dReference {
 public:
    explicit ConvTranspose2dFloat32Reference(const NodeView& node)
        : ConvTranspose2dReference(node, DType::kFloat32, DType::kFloat32) {
        node.expect_attrs({"stride", "padding", "output_padding", "dilation", "groups"},
                          {"bounds"});
        weight_ = float32_values(node.constant_input(1, "weight", DType::kFloat32, 4));
        bias_ = float32_values(node.constant_input(2, "bias", DType::kFloat32, 1));
        bounds_ = node.optional_float_bounds("bounds");
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

QTK_KERNEL_FACTORY(make_conv_transpose2d_int8_reference, ConvTranspose2dInt8Reference)
QTK_KERNEL_FACTORY(make_conv_transpose2d_float32_reference, ConvTranspose2dFloat32Reference)

}  // namespace detail
}  // namespace qtk
