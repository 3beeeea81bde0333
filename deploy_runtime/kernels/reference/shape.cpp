// flatten, reshape, permute, split, pad, slice and expand_batch, reference:
// docs/quantization_spec.md sections 7, 13 and 14. Pure data movement: the values and (scale,
// zero_point) stay as they are, so each op is one implementation for every dtype, working on the
// element size. The batch stays dim 0.
#include <algorithm>
#include <cstring>

#include "op_algo.h"
#include "op_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

// Ops whose output holds the input's bytes in the same order: only the shape changes.
class ReinterpretReference : public OpKernel {
 public:
    explicit ReinterpretReference(const NodeView& node)
        : OpKernel(node.label()), element_size_(dtype_size(node.expect_data_movement(1))) {}

    void run(const NodeIO& io, ThreadPool&) const override {
        std::memcpy(io.outputs[0], io.inputs[0],
                    static_cast<size_t>(element_count(*io.input_shapes[0])) * element_size_);
    }

 private:
    const size_t element_size_;
};

class FlattenReference final : public ReinterpretReference {
 public:
    explicit FlattenReference(const NodeView& node) : ReinterpretReference(node) {
        node.expect_attrs({});
    }

    // [N, d1, d2, ...] -> [N, d1 * d2 * ...], flattening from dim 1 like torch.flatten(x, 1).
    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        if (x.size() < 2) {
            fail("input must have rank >= 2, got shape " + to_string(x));
        }
        return {{x[0], element_count(x) / x[0]}};
    }
};

// [N, ...] -> [N] + shape, where one entry of shape may be -1 (inferred, as in torch).
class ReshapeReference final : public ReinterpretReference {
 public:
    explicit ReshapeReference(const NodeView& node) : ReinterpretReference(node) {
        node.expect_attrs({"shape"});
        shape_ = node.int_list("shape", -1, kMaxDim);
        int inferred = 0;
        for (size_t i = 0; i < shape_.size(); ++i) {
            if (shape_[i] == 0) {
                node.fail("attribute 'shape'[" + std::to_string(i) + "] is 0; dims are >= 1");
            }
            inferred += shape_[i] == -1 ? 1 : 0;
        }
        if (inferred > 1) {
            node.fail("attribute 'shape' = " + to_string(shape_) + " has more than one -1");
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];  // rank >= 1: graph inputs have a batch, ops keep it
        const int64_t per_sample = element_count(x) / x[0];
        int64_t known = 1;  // the product of the given dims, kept <= per_sample (no overflow)
        for (int64_t d : shape_) {
            if (d != -1 && d > per_sample / known) {
                fail("shape " + to_string(shape_) + " holds more than the input's " +
                     std::to_string(per_sample) + " elements per sample (input " + to_string(x) +
                     ")");
            }
            known *= d == -1 ? 1 : d;
        }
        Shape out = {x[0]};
        for (int64_t d : shape_) {
            out.push_back(d == -1 ? per_sample / known : d);
        }
        if (element_count(out) != element_count(x)) {
            fail("shape " + to_string(shape_) + " does not fit the input's " +
                 std::to_string(per_sample) + " elements per sample (input " + to_string(x) + ")");
        }
        return {out};
    }

 private:
    Shape shape_;
};

// y's elements of `size` bytes in order, element i from x's at the offset by which `strides`
// (in elements, one per dim of ys) walk to output index i.
void gather(const uint8_t* x, uint8_t* y, const Shape& ys, const StridedWalk<1>::Strides& strides,
            size_t size, ThreadPool& pool) {
    pool.parallel_for(element_count(ys), [&](int64_t begin, int64_t end) {
        StridedWalk<1> walk(ys, strides, begin);
        for (int64_t i = begin; i < end; ++i, walk.next()) {
            std::memcpy(y + i * size, x + walk.offset(0) * size, size);
        }
    });
}

// y[i_0, ..., i_r] = x at index i_k in dim perm[k]; perm[0] = 0 keeps the batch first.
class PermuteReference final : public OpKernel {
 public:
    explicit PermuteReference(const NodeView& node)
        : OpKernel(node.label()), element_size_(dtype_size(node.expect_data_movement(1))) {
        node.expect_attrs({"perm"});
        const int64_t rank =
            static_cast<int64_t>(node.activation_input(0, node.dtype()).shape.size());
        perm_ = node.ints("perm", static_cast<size_t>(rank), 0, rank - 1);
        if (perm_.empty() || perm_[0] != 0) {
            node.fail("attribute 'perm' = " + to_string(perm_) +
                      " must start with 0 (the batch stays dim 0)");
        }
        std::vector<bool> seen(perm_.size(), false);
        for (int64_t p : perm_) {
            if (seen[static_cast<size_t>(p)]) {
                node.fail("attribute 'perm' = " + to_string(perm_) + " is not a permutation (" +
                          std::to_string(p) + " appears twice)");
            }
            seen[static_cast<size_t>(p)] = true;
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, perm_.size(), "input");
        Shape out;
        for (int64_t p : perm_) {
            out.push_back(x[static_cast<size_t>(p)]);
        }
        return {out};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        const std::vector<int64_t> x_strides = row_major_strides(*io.input_shapes[0]);
        StridedWalk<1>::Strides strides;  // output dim k walks input dim perm[k]
        for (int64_t p : perm_) {
            strides[0].push_back(x_strides[static_cast<size_t>(p)]);
        }
        gather(io.input<uint8_t>(0), io.output<uint8_t>(0), ys, strides, element_size_, pool);
    }

 private:
    const size_t element_size_;
    std::vector<int64_t> perm_;
};

// Consecutive slices of `axis` with the given sizes, one per output.
class SplitReference final : public OpKernel {
 public:
    explicit SplitReference(const NodeView& node)
        : OpKernel(node.label()),
          element_size_(dtype_size(node.expect_data_movement(node.output_count()))) {
        node.expect_attrs({"axis", "sizes"});
        const size_t rank = node.activation_input(0, node.dtype()).shape.size();
        if (rank < 2) {
            node.fail("input must have rank >= 2 (axis 0 is the batch)");
        }
        axis_ = static_cast<size_t>(node.int_scalar("axis", 1, static_cast<int64_t>(rank) - 1));
        sizes_ = node.ints("sizes", node.output_count(), 1, kMaxDim);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        if (axis_ >= x.size()) {
            fail("axis " + std::to_string(axis_) + " is beyond the input's rank");
        }
        int64_t total = 0;  // at most 2^20 outputs of sizes below 2^31: no overflow
        std::vector<Shape> out;
        for (int64_t size : sizes_) {
            total += size;
            out.push_back(x);
            out.back()[axis_] = size;
        }
        if (total != x[axis_]) {
            fail("sizes " + to_string(sizes_) + " sum to " + std::to_string(total) +
                 ", but the input's dim " + std::to_string(axis_) + " is " +
                 std::to_string(x[axis_]) + " (input " + to_string(x) + ")");
        }
        return out;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        int64_t outer = 1;  // the dims before the axis, batch included
        for (size_t d = 0; d < axis_; ++d) {
            outer *= xs[d];
        }
        const int64_t inner = element_count(xs) / outer / xs[axis_];  // elements per axis step
        const size_t size = element_size_;
        pool.parallel_for(outer, [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o) {
                const uint8_t* x = io.input<uint8_t>(0) + o * xs[axis_] * inner * size;
                for (size_t k = 0; k < sizes_.size(); ++k) {
                    const int64_t block = sizes_[k] * inner;
                    std::memcpy(io.output<uint8_t>(k) + o * block * size, x,
                                static_cast<size_t>(block) * size);
                    x += block * size;
                }
            }
        });
    }

 private:
    const size_t element_size_;
    size_t axis_;
    std::vector<int64_t> sizes_;
};

// Padding of the last two dims of NCHW (spec 13): `mode` 0 (constant, the default: `value`, already
// in the tensor's dtype: an int8 value quantized at export, or a float), 1 (reflect: torch's mirror
// about the edge element, each pad below its axis' size) or 2 (replicate: the edge element).
class PadReference final : public OpKernel {
 public:
    enum Mode : int64_t { kConstant = 0, kReflect = 1, kReplicate = 2 };

    explicit PadReference(const NodeView& node)
        : OpKernel(node.label()), element_size_(dtype_size(node.expect_data_movement(1))) {
        mode_ = node.has_attr("mode") ? static_cast<Mode>(node.int_scalar("mode", 0, 2))
                                      : kConstant;
        if (mode_ == kConstant) {
            node.expect_attrs({"pads", "value"}, {"mode"});
        } else {
            node.expect_attrs({"pads", "mode"});  // a value would say nothing: refuse it
        }
        const std::vector<int64_t> pads = node.ints("pads", 4, 0, kMaxDim);
        left_ = pads[0];
        right_ = pads[1];
        top_ = pads[2];
        bottom_ = pads[3];
        if (mode_ != kConstant) {
            return;
        }
        if (node.dtype() == DType::kInt8) {
            value_[0] =
                static_cast<uint8_t>(static_cast<int8_t>(node.int_scalar("value", -128, 127)));
        } else {
            const float value = node.floats("value", 1)[0];
            std::memcpy(value_, &value, sizeof value);
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        if (mode_ == kReflect &&
            (std::max(top_, bottom_) >= x[2] || std::max(left_, right_) >= x[3])) {
            fail("reflect padding (left " + std::to_string(left_) + ", right " +
                 std::to_string(right_) + ", top " + std::to_string(top_) + ", bottom " +
                 std::to_string(bottom_) + ") of a " + std::to_string(x[2]) + "x" +
                 std::to_string(x[3]) + " plane: each pad must be smaller than its axis");
        }
        // Each term is below 2^31: no overflow; the loader and session bound the result.
        return {{x[0], x[1], x[2] + top_ + bottom_, x[3] + left_ + right_}};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t height = xs[2], width = xs[3], out_h = ys[2], out_w = ys[3];
        const size_t size = element_size_;
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const uint8_t* x = io.input<uint8_t>(0) + plane * height * width * size;
                uint8_t* y = io.output<uint8_t>(0) + plane * out_h * out_w * size;
                for (int64_t oy = 0; oy < out_h; ++oy) {
                    uint8_t* row = y + oy * out_w * size;
                    const int64_t iy = source(oy - top_, height);
                    if (iy < 0) {
                        fill(row, out_w);
                        continue;
                    }
                    const uint8_t* x_row = x + iy * width * size;
                    if (mode_ == kConstant) {
                        fill(row, left_);
                        fill(row + (left_ + width) * size, right_);
                    } else {
                        for (int64_t ox = 0; ox < left_; ++ox) {
                            std::memcpy(row + ox * size, x_row + source(ox - left_, width) * size,
                                        size);
                        }
                        for (int64_t ox = left_ + width; ox < out_w; ++ox) {
                            std::memcpy(row + ox * size, x_row + source(ox - left_, width) * size,
                                        size);
                        }
                    }
                    std::memcpy(row + left_ * size, x_row, static_cast<size_t>(width) * size);
                }
            }
        });
    }

 private:
    // The input index that index i (of the unpadded axis, possibly outside [0, n)) reads; -1 where
    // constant padding fills it.
    int64_t source(int64_t i, int64_t n) const {
        if (i >= 0 && i < n) {
            return i;
        }
        switch (mode_) {
            case kReflect:
                return i < 0 ? -i : 2 * (n - 1) - i;
            case kReplicate:
                return i < 0 ? 0 : n - 1;
            default:
                return -1;
        }
    }

    void fill(uint8_t* y, int64_t count) const {
        for (int64_t i = 0; i < count; ++i) {
            std::memcpy(y + i * element_size_, value_, element_size_);
        }
    }

    const size_t element_size_;
    Mode mode_ = kConstant;
    int64_t left_, right_, top_, bottom_;
    uint8_t value_[4] = {};  // one element of the tensor's dtype
};

// x[:, starts[0]:ends[0]:steps[0], starts[1]:ends[1]:steps[1], ...]: every dim after the batch
// sliced, torch's basic indexing with non-negative bounds already resolved by the exporter.
class SliceReference final : public OpKernel {
 public:
    explicit SliceReference(const NodeView& node)
        : OpKernel(node.label()), element_size_(dtype_size(node.expect_data_movement(1))) {
        node.expect_attrs({"starts", "ends", "steps"});
        const size_t rank = node.activation_input(0, node.dtype()).shape.size();
        if (rank < 2) {
            node.fail("input must have rank >= 2 (dim 0 is the batch, which is not sliced)");
        }
        starts_ = node.ints("starts", rank - 1, 0, kMaxDim);
        ends_ = node.ints("ends", rank - 1, 0, kMaxDim);
        steps_ = node.ints("steps", rank - 1, 1, kMaxDim);
        for (size_t i = 0; i < starts_.size(); ++i) {
            if (starts_[i] >= ends_[i]) {
                node.fail("attribute 'starts'[" + std::to_string(i) + "] = " +
                          std::to_string(starts_[i]) + " is not below 'ends'[" +
                          std::to_string(i) + "] = " + std::to_string(ends_[i]) +
                          ": dim " + std::to_string(i + 1) + " would be empty");
            }
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, starts_.size() + 1, "input");
        Shape out = {x[0]};
        for (size_t i = 0; i < starts_.size(); ++i) {
            if (ends_[i] > x[i + 1]) {
                fail("attribute 'ends'[" + std::to_string(i) + "] = " + std::to_string(ends_[i]) +
                     " is past the input's dim " + std::to_string(i + 1) + " of " +
                     std::to_string(x[i + 1]) + " (input " + to_string(x) + ")");
            }
            out.push_back((ends_[i] - starts_[i] + steps_[i] - 1) / steps_[i]);
        }
        return {out};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        const std::vector<int64_t> x_strides = row_major_strides(*io.input_shapes[0]);
        StridedWalk<1>::Strides strides;  // output dim d steps input dim d by its step
        strides[0].push_back(x_strides[0]);
        int64_t first = 0;  // the input element at output index 0
        for (size_t i = 0; i < starts_.size(); ++i) {
            strides[0].push_back(x_strides[i + 1] * steps_[i]);
            first += x_strides[i + 1] * starts_[i];
        }
        gather(io.input<uint8_t>(0) + first * element_size_, io.output<uint8_t>(0), ys, strides,
               element_size_, pool);
    }

 private:
    const size_t element_size_;
    std::vector<int64_t> starts_, ends_, steps_;
};

// [1, ...] repeated to [N, ...], N the batch of input 1 (`like`), whose values are not read:
// torch's x.expand(n, -1, ...) of a parameter, such as ViT's class token. An int8 value must be an
// activation (only activations carry (scale, zero_point)); the output keeps them.
class ExpandBatchReference final : public OpKernel {
 public:
    explicit ExpandBatchReference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs({});
        const DType dtype = node.dtype();
        if (dtype == DType::kInt8 && node.input_value(0).constant) {
            node.fail("input 0 ('" + node.input_value(0).name + "') is an int8 constant, which " +
                      "carries no (scale, zero_point); store it as a float32 constant and " +
                      "quantize the output");
        }
        if (dtype == DType::kInt8) {
            node.expect_same_quantization(node.activation_input(0, DType::kInt8),
                                          node.output(0, DType::kInt8));
        } else {
            const Value& value = node.float32_operand(0);
            node.output(0, DType::kFloat32);
            if (value.constant) {
                if (value.shape.empty() || value.shape[0] != 1) {
                    node.fail("constant '" + value.name + "' has shape " + to_string(value.shape) +
                              "; its dim 0 must be 1 (the one sample that is repeated)");
                }
                constant_ = float32_values(value);
            }
        }
        const Value& like = node.input_value(1);
        if (like.constant) {
            node.fail("input 1 ('" + like.name + "') must be an activation: the output takes its " +
                      "batch size");
        }
        element_size_ = dtype_size(dtype);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& value = inputs[0];
        if (value[0] != 1) {
            fail("input 0 has shape " + to_string(value) + "; its dim 0 must be 1 (the one " +
                 "sample that is repeated), but it follows the batch");
        }
        Shape out = value;
        out[0] = inputs[1][0];
        return {out};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const uint8_t* value = constant_.empty()
                                   ? io.input<uint8_t>(0)
                                   : reinterpret_cast<const uint8_t*>(constant_.data());
        const size_t bytes =
            static_cast<size_t>(element_count(*io.input_shapes[0])) * element_size_;
        uint8_t* y = io.output<uint8_t>(0);
        pool.parallel_for((*io.output_shapes[0])[0], [&](int64_t begin, int64_t end) {
            for (int64_t n = begin; n < end; ++n) {
                std::memcpy(y + static_cast<size_t>(n) * bytes, value, bytes);
            }
        });
    }

 private:
    size_t element_size_;
    std::vector<float> constant_;  // a float32 constant value, decoded from little-endian
};

}  // namespace

QTK_KERNEL_FACTORY(make_flatten_reference, FlattenReference)
QTK_KERNEL_FACTORY(make_reshape_reference, ReshapeReference)
QTK_KERNEL_FACTORY(make_permute_reference, PermuteReference)

extern const OpAlgo kPermuteReference = {"permute_reference", IsaLevel::kScalar,
                                         make_permute_reference};

QTK_KERNEL_FACTORY(make_split_reference, SplitReference)
QTK_KERNEL_FACTORY(make_pad_reference, PadReference)
QTK_KERNEL_FACTORY(make_slice_reference, SliceReference)
QTK_KERNEL_FACTORY(make_expand_batch_reference, ExpandBatchReference)

}  // namespace detail
}  // namespace qtk
