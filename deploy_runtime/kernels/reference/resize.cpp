// resize_nearest and resize_bilinear, reference: docs/quantization_spec.md section 12, NCHW.
// The source rows and columns (and bilinear weights) were computed at export by torch's rule and
// are stored per output row/column, so the kernels only gather.
// - resize_nearest: data movement for every dtype, keeps (scale, zero_point);
// - resize_bilinear: int8, Q10 weights per axis, one requantization to its own (scale, zp);
//   float32, fractions per axis, in a fixed float32 order.
#include <cstring>

#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
constexpr int64_t kWeightOne = 1024;  // Q10

// Source indices for each output row or column: one list per output size.
std::vector<int64_t> source_indices(const NodeView& node, const char* key) {
    std::vector<int64_t> indices = node.int_list(key, 0, kMaxDim);
    if (indices.empty()) {
        node.fail(std::string("attribute '") + key + "' is empty; it holds one index per output");
    }
    return indices;
}

class ResizeReference : public OpKernel {
 public:
    explicit ResizeReference(const NodeView& node) : OpKernel(node.label()) {}

 protected:
    // Every index of attribute `key` lies in [0, x[dim]) for this input (rank 4 checked by the
    // caller). Checked with the file's shapes at load; a new batch does not change H or W.
    void expect_indices_below(const char* key, const std::vector<int64_t>& indices, const Shape& x,
                              size_t dim) const {
        for (size_t i = 0; i < indices.size(); ++i) {
            if (indices[i] >= x[dim]) {
                fail(std::string("attribute '") + key + "'[" + std::to_string(i) +
                     "] = " + std::to_string(indices[i]) + " is outside [0, " +
                     std::to_string(x[dim]) + ") (the input's " + (dim == 2 ? "height" : "width") +
                     ", input " + to_string(x) + ")");
            }
        }
    }
};

class ResizeNearestReference final : public ResizeReference {
 public:
    explicit ResizeNearestReference(const NodeView& node)
        : ResizeReference(node), element_size_(dtype_size(node.expect_data_movement(1))) {
        node.expect_attrs({"index_h", "index_w"});
        index_h_ = source_indices(node, "index_h");
        index_w_ = source_indices(node, "index_w");
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        expect_indices_below("index_h", index_h_, x, 2);
        expect_indices_below("index_w", index_w_, x, 3);
        return {{x[0], x[1], static_cast<int64_t>(index_h_.size()),
                 static_cast<int64_t>(index_w_.size())}};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t width = xs[3], in_plane = xs[2] * xs[3];
        const int64_t ho = static_cast<int64_t>(index_h_.size());
        const int64_t wo = static_cast<int64_t>(index_w_.size());
        const size_t size = element_size_;
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const uint8_t* x = io.input<uint8_t>(0) + plane * in_plane * size;
                uint8_t* y = io.output<uint8_t>(0) + plane * ho * wo * size;
                for (int64_t oy = 0; oy < ho; ++oy) {
                    const uint8_t* row = x + index_h_[oy] * width * size;
                    for (int64_t ox = 0; ox < wo; ++ox) {
                        std::memcpy(y + (oy * wo + ox) * size, row + index_w_[ox] * size, size);
                    }
                }
            }
        });
    }

 private:
    const size_t element_size_;
    std::vector<int64_t> index_h_, index_w_;
};

// The source rows and columns of resize_bilinear, both dtypes: for output row oy the rows h0[oy]
// and h1[oy], for output column ox the columns w0[ox] and w1[ox]; the dtype's weights of index 1.
class ResizeBilinearReference : public ResizeReference {
 public:
    ResizeBilinearReference(const NodeView& node, DType dtype) : ResizeReference(node) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.activation_input(0, dtype);
        node.output(0, dtype);
        const bool int8 = dtype == DType::kInt8;
        node.expect_attrs(int8 ? std::initializer_list<const char*>{"h0", "h1", "h_weight", "w0",
                                                                    "w1", "w_weight", "multiplier",
                                                                    "shift"}
                               : std::initializer_list<const char*>{"h0", "h1", "h_weight", "w0",
                                                                    "w1", "w_weight"});
        h0_ = source_indices(node, "h0");
        h1_ = node.ints("h1", h0_.size(), 0, kMaxDim);
        w0_ = source_indices(node, "w0");
        w1_ = node.ints("w1", w0_.size(), 0, kMaxDim);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        expect_indices_below("h0", h0_, x, 2);
        expect_indices_below("h1", h1_, x, 2);
        expect_indices_below("w0", w0_, x, 3);
        expect_indices_below("w1", w1_, x, 3);
        return {{x[0], x[1], static_cast<int64_t>(h0_.size()), static_cast<int64_t>(w0_.size())}};
    }

 protected:
    size_t output_height() const { return h0_.size(); }
    size_t output_width() const { return w0_.size(); }

    // y = fn(x00, x01, x10, x11, oy, ox) for every output element of every plane, x01 being the
    // neighbour at row h0[oy] and column w1[ox].
    template <typename T, typename Fn>
    void for_each_output(const NodeIO& io, ThreadPool& pool, const Fn& fn) const {
        const Shape& xs = *io.input_shapes[0];
        const int64_t width = xs[3], in_plane = xs[2] * xs[3];
        const int64_t ho = static_cast<int64_t>(h0_.size());
        const int64_t wo = static_cast<int64_t>(w0_.size());
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const T* x = io.input<T>(0) + plane * in_plane;
                T* y = io.output<T>(0) + plane * ho * wo;
                for (int64_t oy = 0; oy < ho; ++oy) {
                    const T* row0 = x + h0_[oy] * width;
                    const T* row1 = x + h1_[oy] * width;
                    for (int64_t ox = 0; ox < wo; ++ox) {
                        y[oy * wo + ox] =
                            fn(row0[w0_[ox]], row0[w1_[ox]], row1[w0_[ox]], row1[w1_[ox]], oy, ox);
                    }
                }
            }
        });
    }

 private:
    std::vector<int64_t> h0_, h1_, w0_, w1_;
};

class ResizeBilinearInt8Reference final : public ResizeBilinearReference {
 public:
    explicit ResizeBilinearInt8Reference(const NodeView& node)
        : ResizeBilinearReference(node, DType::kInt8) {
        input_zero_point_ = node.activation_input(0, DType::kInt8).zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        h_weight_ = node.ints("h_weight", output_height(), 0, kWeightOne);
        w_weight_ = node.ints("w_weight", output_width(), 0, kWeightOne);
        multiplier_ = node.multipliers("multiplier", 1)[0];
        shift_ = node.shifts("shift", 1)[0];
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int32_t zx = input_zero_point_;
        for_each_output<int8_t>(io, pool, [&](int8_t x00, int8_t x01, int8_t x10, int8_t x11,
                                              int64_t oy, int64_t ox) {
            const int32_t wy1 = static_cast<int32_t>(h_weight_[oy]);
            const int32_t wy0 = kWeightOne - wy1;
            const int32_t wx1 = static_cast<int32_t>(w_weight_[ox]);
            const int32_t wx0 = kWeightOne - wx1;
            // |acc| <= 255 * 2^20 < 2^28: exact in int32 in any order.
            const int32_t acc = wy0 * wx0 * (x00 - zx) + wy0 * wx1 * (x01 - zx) +
                                wy1 * wx0 * (x10 - zx) + wy1 * wx1 * (x11 - zx);
            return arith::requantize(acc, multiplier_, shift_, output_zero_point_,
                                     arith::kInt8Min, arith::kInt8Max);
        });
    }

 private:
    std::vector<int64_t> h_weight_, w_weight_;
    int32_t multiplier_, shift_;
    int32_t input_zero_point_, output_zero_point_;
};

// float32: the weights of index 1 are fractions in [0, 1], combined in float32 in the order
// (1 - wh) * ((1 - ww) * x00 + ww * x01) + wh * ((1 - ww) * x10 + ww * x11), which the exporter
// and its tests rely on.
class ResizeBilinearFloat32Reference final : public ResizeBilinearReference {
 public:
    explicit ResizeBilinearFloat32Reference(const NodeView& node)
        : ResizeBilinearReference(node, DType::kFloat32) {
        h_weight_ = fractions(node, "h_weight", output_height());
        w_weight_ = fractions(node, "w_weight", output_width());
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        for_each_output<float>(
            io, pool, [&](float x00, float x01, float x10, float x11, int64_t oy, int64_t ox) {
                const float wh = h_weight_[oy], ww = w_weight_[ox];
                return (1.0f - wh) * ((1.0f - ww) * x00 + ww * x01) +
                       wh * ((1.0f - ww) * x10 + ww * x11);
            });
    }

 private:
    static std::vector<float> fractions(const NodeView& node, const char* key, size_t count) {
        std::vector<float> v = node.floats(key, count);
        for (size_t i = 0; i < v.size(); ++i) {
            if (!(v[i] >= 0.0f && v[i] <= 1.0f)) {
                node.fail(std::string("attribute '") + key + "'[" + std::to_string(i) +
                          "] = " + std::to_string(v[i]) + " is outside [0, 1]");
            }
        }
        return v;
    }

    std::vector<float> h_weight_, w_weight_;
};

}  // namespace

QTK_KERNEL_FACTORY(make_resize_nearest_reference, ResizeNearestReference)
QTK_KERNEL_FACTORY(make_resize_bilinear_int8_reference, ResizeBilinearInt8Reference)
QTK_KERNEL_FACTORY(make_resize_bilinear_float32_reference, ResizeBilinearFloat32Reference)

}  // namespace detail
}  // namespace qtk
