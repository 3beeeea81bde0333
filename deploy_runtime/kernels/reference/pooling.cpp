// max_pool2d, avg_pool2d and global_avg_pool2d, reference, NCHW (max_pool2d and
// global_avg_pool2d also channels-last, where the layout pass put them: graph_passes.h), the
// windowed pools also in ceil mode:
// - int8: docs/quantization_spec.md section 6, keeping the input's (scale, zero_point);
// - float32: the same windows and divisors in float32.
// One implementation per op, parameterized by what a dtype does with window values.
#include <cmath>
#include <limits>
#include <utility>

#include "float32_max.h"
#include "op_algo.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;

struct Window {
    int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
    bool ceil_mode;
};

// PyTorch's pooling output size along one axis. Floor mode: sliding_output_size. Ceil mode:
// ceil((H + 2p - d(k-1) - 1) / s) + 1 (rounded toward -infinity, as torch's div_rtn), one fewer
// when the last window would start at or beyond H + p; so every window starts in the input or
// the left/top padding, and the last may reach past the bottom/right padding (even when the
// padded input is shorter than the window), where, for a max, nothing wins, as padding does not.
int64_t pool_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation, bool ceil_mode) {
    if (!ceil_mode) {
        return sliding_output_size(input, kernel, stride, padding, dilation);
    }
    // Every argument is below 2^31 (format rule), so nothing here overflows int64.
    const int64_t numerator = input + 2 * padding - dilation * (kernel - 1) - 1 + stride - 1;
    int64_t out = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
    if (out > 0 && (out - 1) * stride >= input + padding) {
        --out;
    }
    return out;
}

// Reads the window attributes (dilation and ceil_mode only where the op has them) and applies
// PyTorch's rule that padding is at most half the dilated kernel, which also keeps every average
// window non-empty.
Window read_window(const NodeView& node, bool has_dilation, bool has_ceil_mode) {
    const std::vector<int64_t> kernel = node.ints("kernel", 2, 1, kMaxAttr);
    const std::vector<int64_t> stride = node.ints("stride", 2, 1, kMaxAttr);
    const std::vector<int64_t> padding = node.ints("padding", 2, 0, kMaxAttr);
    const std::vector<int64_t> dilation =
        has_dilation ? node.ints("dilation", 2, 1, kMaxAttr) : std::vector<int64_t>{1, 1};
    for (int d = 0; d < 2; ++d) {
        const int64_t extent = (kernel[d] - 1) * dilation[d] + 1;
        if (padding[d] > extent / 2) {
            node.fail("padding " + std::to_string(padding[d]) + " exceeds half the kernel extent " +
                      std::to_string(extent) + " (as PyTorch requires)");
        }
    }
    const bool ceil_mode =
        has_ceil_mode && node.has_attr("ceil_mode") && node.int_scalar("ceil_mode", 0, 1) == 1;
    return Window{kernel[0],  kernel[1],  stride[0],   stride[1],   padding[0],
                  padding[1], dilation[0], dilation[1], ceil_mode};
}

// Common to the three pools: one input [N, C, H, W] and one output of `dtype` with the same
// (scale, zp).
void check_pool_node(const NodeView& node, DType dtype) {
    node.expect_input_count(1);
    node.expect_output_count(1);
    node.expect_same_quantization(node.activation_input(0, dtype), node.output(0, dtype));
}

// Spec 6: sums of (q - z) in int64, averages rounded half away from zero.
struct Int8Pooling {
    using Element = int8_t;
    using Sum = int64_t;
    static constexpr DType kDType = DType::kInt8;

    explicit Int8Pooling(const NodeView& node)
        : zero_point(node.activation_input(0, DType::kInt8).zero_point) {}
    // Below every value, so padding never wins a max; a dilated window that misses the input
    // entirely yields -infinity clamped to int8, i.e. -128.
    static int8_t lowest() { return static_cast<int8_t>(arith::kInt8Min); }
    static int8_t larger(int8_t best, int8_t q) { return std::max(best, q); }
    Sum term(int8_t q) const { return int32_t{q} - zero_point; }
    int8_t average(Sum sum, int64_t divisor) const {
        return arith::average(sum, divisor, zero_point);
    }

    int32_t zero_point;
};

struct Float32Pooling {
    using Element = float;
    using Sum = float;
    static constexpr DType kDType = DType::kFloat32;

    explicit Float32Pooling(const NodeView&) {}
    static float lowest() { return -std::numeric_limits<float>::infinity(); }
    // A NaN in the window wins (torch's rule); +0 over -0 (float32_max.h: order-independent).
    static float larger(float best, float x) { return float32_max(best, x); }
    Sum term(float x) const { return x; }
    float average(Sum sum, int64_t divisor) const { return sum / static_cast<float>(divisor); }
};

class WindowPoolReference : public OpKernel {
 public:
    // Max pooling has dilation, average pooling not; both have ceil mode.
    WindowPoolReference(const NodeView& node, bool is_max)
        : OpKernel(node.label()),
          window_(read_window(node, is_max, true)),
          nhwc_(node.channels_last()) {}

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        const Window& w = window_;
        const int64_t out_h = pool_output_size(x[nhwc_ ? 1 : 2], w.kernel_h, w.stride_h, w.pad_h,
                                               w.dilation_h, w.ceil_mode);
        const int64_t out_w = pool_output_size(x[nhwc_ ? 2 : 3], w.kernel_w, w.stride_w, w.pad_w,
                                               w.dilation_w, w.ceil_mode);
        if (out_h < 1 || out_w < 1) {
            fail("input " + to_string(x) + " is smaller than the kernel " +
                 std::to_string(w.kernel_h) + "x" + std::to_string(w.kernel_w) + " with padding");
        }
        return {nhwc_ ? Shape{x[0], out_h, out_w, x[3]} : Shape{x[0], x[1], out_h, out_w}};
    }

 protected:
    // The input's height and width.
    // (Callers read it into plain variables: C++17 lambdas cannot capture structured bindings,
    // which GCC allows and clang refuses.)
    std::pair<int64_t, int64_t> size(const NodeIO& io) const {
        const Shape& x = *io.input_shapes[0];
        return nhwc_ ? std::make_pair(x[1], x[2]) : std::make_pair(x[2], x[3]);
    }

    // Calls reduce(x, step, iy0, ix0) -> T for every output position of every (n, c) plane; the
    // plane's pixel (iy, ix) is x[(iy * width + ix) * step] (step 1 in NCHW, C channels-last) and
    // (iy0, ix0) the window's top-left corner in input coordinates (may be in the padding; in
    // ceil mode the window may also reach past the bottom/right padding).
    template <typename T, typename Reduce>
    void for_each_window(const NodeIO& io, ThreadPool& pool, const Reduce& reduce) const {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t channels = xs[nhwc_ ? 3 : 1];
        const int64_t height = size(io).first, width = size(io).second;
        const int64_t in_plane = height * width;
        const int64_t out_h = ys[nhwc_ ? 1 : 2], out_w = ys[nhwc_ ? 2 : 3];
        const int64_t step = nhwc_ ? channels : 1;
        pool.parallel_for(xs[0] * channels, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t n = plane / channels, c = plane % channels;
                // Where the (n, c) plane's first pixel lies, in the input and in the output.
                const int64_t x_at = nhwc_ ? n * in_plane * channels + c : plane * in_plane;
                const int64_t y_at = nhwc_ ? n * out_h * out_w * channels + c
                                           : plane * out_h * out_w;
                const T* x = io.input<T>(0) + x_at;
                T* y = io.output<T>(0) + y_at;
                for (int64_t oy = 0; oy < out_h; ++oy) {
                    for (int64_t ox = 0; ox < out_w; ++ox) {
                        y[(oy * out_w + ox) * step] =
                            reduce(x, step, oy * window_.stride_h - window_.pad_h,
                                   ox * window_.stride_w - window_.pad_w);
                    }
                }
            }
        });
    }

    const Window window_;
    const bool nhwc_;
};

template <typename Pooling>
class MaxPool2dReference final : public WindowPoolReference {
 public:
    using T = typename Pooling::Element;

    explicit MaxPool2dReference(const NodeView& node) : WindowPoolReference(node, true) {
        check_pool_node(node, Pooling::kDType);
        node.expect_attrs({"kernel", "stride", "padding", "dilation"}, {"layout", "ceil_mode"});
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t height = size(io).first, width = size(io).second;
        const Window& w = window_;
        for_each_window<T>(io, pool, [&](const T* x, int64_t step, int64_t iy0, int64_t ix0) {
            T best = Pooling::lowest();  // padding is -infinity: it never wins
            for (int64_t ky = 0; ky < w.kernel_h; ++ky) {
                const int64_t iy = iy0 + ky * w.dilation_h;
                if (iy < 0 || iy >= height) {
                    continue;
                }
                for (int64_t kx = 0; kx < w.kernel_w; ++kx) {
                    const int64_t ix = ix0 + kx * w.dilation_w;
                    if (ix < 0 || ix >= width) {
                        continue;
                    }
                    best = Pooling::larger(best, x[(iy * width + ix) * step]);
                }
            }
            return best;
        });
    }
};

template <typename Pooling>
class AvgPool2dReference final : public WindowPoolReference {
 public:
    using T = typename Pooling::Element;

    explicit AvgPool2dReference(const NodeView& node)
        : WindowPoolReference(node, false), pooling_(node) {
        check_pool_node(node, Pooling::kDType);
        node.expect_attrs({"kernel", "stride", "padding", "count_include_pad"},
                          {"ceil_mode", "divisor_override"});
        count_include_pad_ = node.int_scalar("count_include_pad", 0, 1) == 1;
        divisor_override_ = node.has_attr("divisor_override")
                                ? node.int_scalar("divisor_override", 1, kMaxAttr)
                                : 0;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t height = size(io).first, width = size(io).second;
        const Window& w = window_;
        for_each_window<T>(io, pool, [&](const T* x, int64_t step, int64_t iy0, int64_t ix0) {
            typename Pooling::Sum sum = 0;  // over the in-bounds elements; padding adds real 0
            int64_t count = 0;
            for (int64_t iy = std::max<int64_t>(iy0, 0); iy < std::min(iy0 + w.kernel_h, height);
                 ++iy) {
                for (int64_t ix = std::max<int64_t>(ix0, 0); ix < std::min(ix0 + w.kernel_w, width);
                     ++ix) {
                    sum += pooling_.term(x[(iy * width + ix) * step]);
                    ++count;
                }
            }
            // count >= 1: read_window keeps padding within half the kernel, and ceil mode starts
            // every window before H + p. With count_include_pad the divisor is the window clipped
            // to the padded input (kh * kw but for ceil mode's last windows), as torch's.
            const int64_t padded = (std::min(iy0 + w.kernel_h, height + w.pad_h) - iy0) *
                                   (std::min(ix0 + w.kernel_w, width + w.pad_w) - ix0);
            return pooling_.average(sum, divisor_override_ != 0 ? divisor_override_
                                         : count_include_pad_ ? padded
                                                              : count);
        });
    }

 private:
    const Pooling pooling_;
    bool count_include_pad_;
    int64_t divisor_override_;  // 0: none
};

// The average pool with d = H * W over the whole plane; keepdim 0 drops the two unit dims.
template <typename Pooling>
class GlobalAvgPool2dReference final : public OpKernel {
 public:
    using T = typename Pooling::Element;

    explicit GlobalAvgPool2dReference(const NodeView& node)
        : OpKernel(node.label()), pooling_(node), nhwc_(node.channels_last()) {
        check_pool_node(node, Pooling::kDType);
        node.expect_attrs({}, {"keepdim", "layout"});
        keepdim_ = !node.has_attr("keepdim") || node.int_scalar("keepdim", 0, 1) == 1;
    }

    // Channels-last, [N, H, W, C] -> [N, 1, 1, C]: the bytes of NCHW's [N, C, 1, 1].
    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        const int64_t channels = x[nhwc_ ? 3 : 1];
        if (!keepdim_) {
            return {Shape{x[0], channels}};
        }
        return {nhwc_ ? Shape{x[0], 1, 1, channels} : Shape{x[0], channels, 1, 1}};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t channels = xs[nhwc_ ? 3 : 1];
        const int64_t plane_size = xs[nhwc_ ? 1 : 2] * xs[nhwc_ ? 2 : 3];
        // Plane (n, c)'s pixel i: NCHW at (n C + c) HW + i, NHWC at (n HW + i) C + c.
        const int64_t step = nhwc_ ? channels : 1;
        pool.parallel_for(xs[0] * channels, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t n = plane / channels, c = plane % channels;
                const T* x = io.input<T>(0) +
                             (nhwc_ ? n * plane_size * channels + c : plane * plane_size);
                typename Pooling::Sum sum = 0;
                for (int64_t i = 0; i < plane_size; ++i) {
                    sum += pooling_.term(x[i * step]);
                }
                io.output<T>(0)[plane] = pooling_.average(sum, plane_size);
            }
        });
    }

 private:
    const Pooling pooling_;
    const bool nhwc_;
    bool keepdim_;
};

}  // namespace

QTK_KERNEL_FACTORY(make_max_pool2d_int8_reference, MaxPool2dReference<Int8Pooling>)

extern const OpAlgo kMaxPool2dInt8Reference = {"max_pool2d_int8_reference", IsaLevel::kScalar,
                                               make_max_pool2d_int8_reference};

QTK_KERNEL_FACTORY(make_max_pool2d_float32_reference, MaxPool2dReference<Float32Pooling>)

extern const OpAlgo kMaxPool2dFloat32Reference = {"max_pool2d_float32_reference", IsaLevel::kScalar,
                                                  make_max_pool2d_float32_reference};

QTK_KERNEL_FACTORY(make_avg_pool2d_int8_reference, AvgPool2dReference<Int8Pooling>)

extern const OpAlgo kAvgPool2dInt8Reference = {"avg_pool2d_int8_reference", IsaLevel::kScalar,
                                               make_avg_pool2d_int8_reference};
QTK_KERNEL_FACTORY(make_avg_pool2d_float32_reference, AvgPool2dReference<Float32Pooling>)
QTK_KERNEL_FACTORY(make_global_avg_pool2d_int8_reference, GlobalAvgPool2dReference<Int8Pooling>)

extern const OpAlgo kGlobalAvgPool2dInt8Reference = {
    "global_avg_pool2d_int8_reference", IsaLevel::kScalar, make_global_avg_pool2d_int8_reference};

QTK_KERNEL_FACTORY(make_global_avg_pool2d_float32_reference,
                   GlobalAvgPool2dReference<Float32Pooling>)

extern const OpAlgo kGlobalAvgPool2dFloat32Reference = {"global_avg_pool2d_float32_reference",
                                                        IsaLevel::kScalar,
                                                        make_global_avg_pool2d_float32_reference};

}  // namespace detail
}  // namespace qtk
