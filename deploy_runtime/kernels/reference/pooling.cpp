// max_pool2d, avg_pool2d and global_avg_pool2d, reference: docs/quantization_spec.md section 6.
// Pooling keeps its input's (scale, zero_point); NCHW int8, no ceil mode.
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;

struct Window {
    int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};

// Reads the window attributes (dilation only where the op has it) and applies PyTorch's rule that
// padding is at most half the dilated kernel, which also keeps every average window non-empty.
Window read_window(const NodeView& node, bool has_dilation) {
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
    return Window{kernel[0],  kernel[1],  stride[0],   stride[1],
                  padding[0], padding[1], dilation[0], dilation[1]};
}

// Common to the three pools: one int8 input [N, C, H, W] and one output with its (scale, zp).
void check_pool_node(const NodeView& node) {
    node.expect_input_count(1);
    node.expect_output_count(1);
    node.expect_same_quantization(node.activation_input(0), node.output(0));
}

class WindowPoolReference : public OpKernel {
 public:
    WindowPoolReference(const NodeView& node, bool has_dilation)
        : OpKernel(node.label()), window_(read_window(node, has_dilation)) {}

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        const Window& w = window_;
        const int64_t out_h =
            sliding_output_size(x[2], w.kernel_h, w.stride_h, w.pad_h, w.dilation_h);
        const int64_t out_w =
            sliding_output_size(x[3], w.kernel_w, w.stride_w, w.pad_w, w.dilation_w);
        if (out_h < 1 || out_w < 1) {
            fail("input " + to_string(x) + " is smaller than the kernel " +
                 std::to_string(w.kernel_h) + "x" + std::to_string(w.kernel_w) + " with padding");
        }
        return {{x[0], x[1], out_h, out_w}};
    }

 protected:
    // Calls reduce(plane_in, iy0, ix0) -> int8 for every output position of every (n, c) plane;
    // (iy0, ix0) is the window's top-left corner in input coordinates (may be in the padding).
    template <typename Reduce>
    void for_each_window(const NodeIO& io, ThreadPool& pool, const Reduce& reduce) const {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t in_plane = xs[2] * xs[3];
        const int64_t out_h = ys[2], out_w = ys[3];
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int8_t* x = io.inputs[0] + plane * in_plane;
                int8_t* y = io.outputs[0] + plane * out_h * out_w;
                for (int64_t oy = 0; oy < out_h; ++oy) {
                    for (int64_t ox = 0; ox < out_w; ++ox) {
                        y[oy * out_w + ox] = reduce(x, oy * window_.stride_h - window_.pad_h,
                                                    ox * window_.stride_w - window_.pad_w);
                    }
                }
            }
        });
    }

    const Window window_;
};

class MaxPool2dReference final : public WindowPoolReference {
 public:
    explicit MaxPool2dReference(const NodeView& node) : WindowPoolReference(node, true) {
        check_pool_node(node);
        node.expect_attrs({"kernel", "stride", "padding", "dilation"});
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t height = (*io.input_shapes[0])[2], width = (*io.input_shapes[0])[3];
        const Window& w = window_;
        for_each_window(io, pool, [&](const int8_t* x, int64_t iy0, int64_t ix0) {
            // Padding is -infinity: it never wins. A dilated window that misses the input
            // entirely yields -infinity clamped to int8, i.e. -128.
            int32_t best = arith::kInt8Min;
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
                    best = std::max<int32_t>(best, x[iy * width + ix]);
                }
            }
            return static_cast<int8_t>(best);
        });
    }
};

class AvgPool2dReference final : public WindowPoolReference {
 public:
    explicit AvgPool2dReference(const NodeView& node) : WindowPoolReference(node, false) {
        check_pool_node(node);
        node.expect_attrs({"kernel", "stride", "padding", "count_include_pad"});
        count_include_pad_ = node.int_scalar("count_include_pad", 0, 1) == 1;
        zero_point_ = node.activation_input(0).zero_point;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t height = (*io.input_shapes[0])[2], width = (*io.input_shapes[0])[3];
        const Window& w = window_;
        for_each_window(io, pool, [&](const int8_t* x, int64_t iy0, int64_t ix0) {
            int64_t sum = 0;  // of (q - z) over the in-bounds elements; padding adds real 0
            int64_t count = 0;
            for (int64_t iy = std::max<int64_t>(iy0, 0); iy < std::min(iy0 + w.kernel_h, height);
                 ++iy) {
                for (int64_t ix = std::max<int64_t>(ix0, 0); ix < std::min(ix0 + w.kernel_w, width);
                     ++ix) {
                    sum += int32_t{x[iy * width + ix]} - zero_point_;
                    ++count;
                }
            }
            // count >= 1: read_window keeps padding within half the kernel.
            return arith::average(sum, count_include_pad_ ? w.kernel_h * w.kernel_w : count,
                                  zero_point_);
        });
    }

 private:
    bool count_include_pad_;
    int32_t zero_point_;
};

class GlobalAvgPool2dReference final : public OpKernel {
 public:
    explicit GlobalAvgPool2dReference(const NodeView& node) : OpKernel(node.label()) {
        check_pool_node(node);
        node.expect_attrs({});
        zero_point_ = node.activation_input(0).zero_point;
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        return {{x[0], x[1], 1, 1}};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t plane_size = xs[2] * xs[3];
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int8_t* x = io.inputs[0] + plane * plane_size;
                int64_t sum = 0;
                for (int64_t i = 0; i < plane_size; ++i) {
                    sum += int32_t{x[i]} - zero_point_;
                }
                io.outputs[0][plane] = arith::average(sum, plane_size, zero_point_);
            }
        });
    }

 private:
    int32_t zero_point_;
};

}  // namespace

std::unique_ptr<OpKernel> make_max_pool2d_reference(const NodeView& node) {
    return std::make_unique<MaxPool2dReference>(node);
}

std::unique_ptr<OpKernel> make_avg_pool2d_reference(const NodeView& node) {
    return std::make_unique<AvgPool2dReference>(node);
}

std::unique_ptr<OpKernel> make_global_avg_pool2d_reference(const NodeView& node) {
    return std::make_unique<GlobalAvgPool2dReference>(node);
}

}  // namespace detail
}  // namespace qtk
