// conv2d, reference, with PyTorch's conv2d indexing (any stride, padding, dilation and groups),
// NCHW or, where the layout pass chose it, NHWC:
// - int8: docs/quantization_spec.md section 4, per-output-channel requantization, then the fused
//   residual add of spec 3 where the graph pass put one (conv2d.h);
// - conv2d_binary: spec 24, the int8 form reading each input's sign against its channel's
//   threshold and padding with pad_value;
// - float32: the float part of a mixed-precision model, summed in float32, optional bounds.
// Both dtypes share the geometry and one loop; they differ in the accumulator and its epilogue.
#include "conv2d.h"

#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class Conv2dReference : public Conv2dKernel {
 public:
    Conv2dReference(const NodeView& node, DType dtype, DType bias_dtype)
        : Conv2dKernel(node, read_conv2d_params(node, dtype, bias_dtype)) {}

 protected:
    // y[i] = finish(oc, bias[oc] + sum read(x, its channel) * w, i) in the accumulator type Acc,
    // i the index of [n, oc, oy, ox] in y (NCHW, or NHWC where params_.nhwc); a padded position
    // reads `padded` (0 but for a binary conv's pad value).
    template <typename T, typename Acc, typename Read, typename Finish>
    void convolve(const NodeIO& io, ThreadPool& pool, const T* weight, const Acc* bias,
                  const Read& read, Acc padded, const Finish& finish) const {
        const Conv2dParams& p = params_;
        const Layout x_at(*io.input_shapes[0], p.nhwc), y_at(*io.output_shapes[0], p.nhwc);
        const T* x = io.input<T>(0);
        T* y = io.output<T>(0);

        // One task per (sample, output channel) plane.
        pool.parallel_for(x_at.batch * p.out_channels, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t n = plane / p.out_channels;
                const int64_t oc = plane % p.out_channels;
                const int64_t ic0 = oc / p.out_per_group() * p.group_in_channels;
                const T* w = weight + oc * p.products_per_output();
                for (int64_t oy = 0; oy < y_at.height; ++oy) {
                    for (int64_t ox = 0; ox < y_at.width; ++ox) {
                        Acc acc = bias[oc];
                        for (int64_t ic = 0; ic < p.group_in_channels; ++ic) {
                            const T* w_channel = w + ic * p.kernel_h * p.kernel_w;
                            for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
                                const int64_t iy = oy * p.stride_h - p.pad_h + ky * p.dilation_h;
                                for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                                    const int64_t ix =
                                        ox * p.stride_w - p.pad_w + kx * p.dilation_w;
                                    const bool inside =
                                        iy >= 0 && iy < x_at.height && ix >= 0 && ix < x_at.width;
                                    const Acc v =
                                        inside ? read(x[x_at(n, ic0 + ic, iy, ix)], ic0 + ic)
                                               : padded;
                                    acc += v * static_cast<Acc>(w_channel[ky * p.kernel_w + kx]);
                                }
                            }
                        }
                        const int64_t at = y_at(n, oc, oy, ox);
                        y[at] = finish(oc, acc, at);
                    }
                }
            }
        });
    }

 private:
    // The offset of element (n, c, y, x) of a 4-d activation in either layout.
    struct Layout {
        Layout(const Shape& s, bool nhwc)
            : batch(s[0]),
              channels(s[nhwc ? 3 : 1]),
              height(s[nhwc ? 1 : 2]),
              width(s[nhwc ? 2 : 3]),
              nhwc(nhwc) {}
        int64_t operator()(int64_t n, int64_t c, int64_t y, int64_t x) const {
            return nhwc ? ((n * height + y) * width + x) * channels + c
                        : ((n * channels + c) * height + y) * width + x;
        }
        int64_t batch, channels, height, width;
        bool nhwc;
    };
};

class Conv2dInt8Reference final : public Conv2dReference {
 public:
    explicit Conv2dInt8Reference(const NodeView& node)
        : Conv2dReference(node, DType::kInt8, DType::kInt32), constants_(node, params_) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Conv2dInt8Constants& c = constants_;
        const int8_t* residual = c.has_residual ? io.input<int8_t>(3) : nullptr;
        const auto read = [&](int8_t q, int64_t channel) {
            return c.binary ? arith::binary_sign(q, c.thresholds[size_t(channel)])
                            : int32_t{q} - c.input_zero_point;
        };
        convolve(io, pool, c.weight, c.bias.data(), read, c.pad_value,
                 [&](int64_t oc, int32_t acc, int64_t at) {
                     const int8_t conv = c.requantize(oc, acc);
                     return residual ? c.residual.apply(conv, residual[at]) : conv;
                 });
    }

 private:
    const Conv2dInt8Constants constants_;
};

class Conv2dFloat32Reference final : public Conv2dReference {
 public:
    explicit Conv2dFloat32Reference(const NodeView& node)
        : Conv2dReference(node, DType::kFloat32, DType::kFloat32), constants_(node) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Conv2dFloat32Constants& c = constants_;
        convolve(io, pool, c.weight.data(), c.bias.data(), [](float v, int64_t) { return v; }, 0.0f,
                 [&](int64_t, float acc, int64_t) { return c.bounds.apply(acc); });
    }

 private:
    const Conv2dFloat32Constants constants_;
};

}  // namespace

QTK_KERNEL_FACTORY(make_conv2d_int8_reference, Conv2dInt8Reference)

// The portable int8 algorithm, last in the registry's list: it serves every geometry on every CPU.
extern const Conv2dAlgo kConv2dInt8Reference = {"conv2d_int8_reference", IsaLevel::kScalar,
                                                fits_any_conv2d, make_conv2d_int8_reference,
                                                true, true};

// conv2d_binary's portable algorithm, last in algo_lists/conv2d_binary.inc: the int8 reference,
// whose constants read the binary node (Conv2dInt8Constants::binary).
extern const OpAlgo kConv2dBinaryReference = {"conv2d_binary_reference", IsaLevel::kScalar,
                                              make_conv2d_int8_reference};

QTK_KERNEL_FACTORY(make_conv2d_float32_reference, Conv2dFloat32Reference)

// The portable float32 algorithm, last in its list: the one the optimized ones are measured by.
extern const Conv2dAlgo kConv2dFloat32Reference = {"conv2d_float32_reference", IsaLevel::kScalar,
                                                   fits_any_conv2d, make_conv2d_float32_reference};

}  // namespace detail
}  // namespace qtk
