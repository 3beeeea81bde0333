// resize_nearest and resize_bilinear, reference: docs/quantization_spec.md section 12, NCHW.
// The source rows and columns (and bilinear weights) were computed at export by torch's rule and
// are stored per output row/column, so the kernels only gather.
// - resize_nearest: data movement for every dtype, keeps (scale, zero_point);
// - resize_bilinear: int8, Q10 weights per axis, one requantization to its own (scale, zp).
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

class ResizeBilinearInt8Reference final : public ResizeReference {
 public:
    explicit ResizeBilinearInt8Reference(const NodeView& node) : ResizeReference(node) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({"h0", "h1", "h_weight", "w0", "w1", "w_weight", "multiplier", "shift"});
        input_zero_point_ = node.activation_input(0, DType::kInt8).zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        h0_ = source_indices(node, "h0");
        h1_ = node.ints("h1", h0_.size(), 0, kMaxDim);
        h_weight_ = node.ints("h_weight", h0_.size(), 0, kWeightOne);
        w0_ = source_indices(node, "w0");
        w1_ = node.ints("w1", w0_.size(), 0, kMaxDim);
        w_weight_ = node.ints("w_weight", w0_.size(), 0, kWeightOne);
        multiplier_ = node.multipliers("multiplier", 1)[0];
        shift_ = node.shifts("shift", 1)[0];
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

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t width = xs[3], in_plane = xs[2] * xs[3];
        const int64_t ho = static_cast<int64_t>(h0_.size());
        const int64_t wo = static_cast<int64_t>(w0_.size());
        const int32_t zx = input_zero_point_;
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int8_t* x = io.input<int8_t>(0) + plane * in_plane;
                int8_t* y = io.output<int8_t>(0) + plane * ho * wo;
                for (int64_t oy = 0; oy < ho; ++oy) {
                    const int8_t* row0 = x + h0_[oy] * width;
                    const int8_t* row1 = x + h1_[oy] * width;
                    const int32_t wy1 = static_cast<int32_t>(h_weight_[oy]);
                    const int32_t wy0 = kWeightOne - wy1;
                    for (int64_t ox = 0; ox < wo; ++ox) {
                        const int64_t x0 = w0_[ox], x1 = w1_[ox];
                        const int32_t wx1 = static_cast<int32_t>(w_weight_[ox]);
                        const int32_t wx0 = kWeightOne - wx1;
                        // |acc| <= 255 * 2^20 < 2^28: exact in int32 in any order.
                        const int32_t acc =
                            wy0 * wx0 * (row0[x0] - zx) + wy0 * wx1 * (row0[x1] - zx) +
                            wy1 * wx0 * (row1[x0] - zx) + wy1 * wx1 * (row1[x1] - zx);
                        y[oy * wo + ox] =
                            arith::requantize(acc, multiplier_, shift_, output_zero_point_,
                                              arith::kInt8Min, arith::kInt8Max);
                    }
                }
            }
        });
    }

 private:
    std::vector<int64_t> h0_, h1_, h_weight_, w0_, w1_, w_weight_;
    int32_t multiplier_, shift_;
    int32_t input_zero_point_, output_zero_point_;
};

}  // namespace

std::unique_ptr<OpKernel> make_resize_nearest_reference(const NodeView& node) {
    return std::make_unique<ResizeNearestReference>(node);
}

std::unique_ptr<OpKernel> make_resize_bilinear_int8_reference(const NodeView& node) {
    return std::make_unique<ResizeBilinearInt8Reference>(node);
}

}  // namespace detail
}  // namespace qtk
