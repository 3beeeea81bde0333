// What every kernel implements, and the checked view of its node that kernel factories use.
//
// A kernel is created once per node when the model loads: the factory validates attributes and
// constant inputs (naming the node in every error) and keeps what run() needs (weights stay in the
// model's bytes). Kernels are immutable afterwards, so sessions share them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "graph.h"

namespace qtk {
namespace detail {

class ThreadPool;

// Where one node reads and writes during a run: one pointer and shape per node input and output,
// in the node's order. Constants point into the model, activations into the session's arena;
// shapes are those of the current batch. The kernel knows each pointer's dtype (its factory
// checked it) and reads it with input<T>() / output<T>().
struct NodeIO {
    std::vector<const void*> inputs;
    std::vector<const Shape*> input_shapes;
    std::vector<void*> outputs;
    std::vector<const Shape*> output_shapes;
    uint8_t* workspace = nullptr;  // OpKernel::workspace_bytes() of scratch, 64-byte aligned

    template <typename T>
    const T* input(size_t index) const {
        return static_cast<const T*>(inputs[index]);
    }
    template <typename T>
    T* output(size_t index) const {
        return static_cast<T*>(outputs[index]);
    }
};

class OpKernel {
 public:
    explicit OpKernel(std::string label) : label_(std::move(label)) {}
    virtual ~OpKernel() = default;

    // Output shapes for these input shapes (constants included, with their file shapes). Throws
    // Error naming the node when they do not fit the op.
    virtual std::vector<Shape> infer_shapes(const std::vector<Shape>& input_shapes) const = 0;

    // Scratch bytes run() needs for these shapes with a pool of `threads`: the session plans them
    // in its arena beside the activations (live while this node runs) and passes them in
    // NodeIO::workspace, so no run allocates.
    virtual size_t workspace_bytes(const std::vector<Shape>& input_shapes,
                                   const std::vector<Shape>& output_shapes, int threads) const {
        (void)input_shapes, (void)output_shapes, (void)threads;
        return 0;
    }

    // Computes the outputs for shapes infer_shapes accepted. The bytes must not depend on the
    // pool's thread count.
    virtual void run(const NodeIO& io, ThreadPool& pool) const = 0;

 protected:
    [[noreturn]] void fail(const std::string& message) const;
    void expect_rank(const Shape& shape, size_t rank, const char* what) const;

 private:
    std::string label_;  // "node 'layer1.0.conv1' (conv2d)"
};

std::string node_label(const Node& node);  // "node 'layer1.0.conv1' (conv2d)"

// How a kernel cuts its workspace: `shared` bytes for all threads, then one slot of `per_thread`
// bytes per thread (ThreadPool::parallel_for_slots); each part 64-byte aligned.
struct WorkspaceLayout {
    size_t shared = 0;
    size_t per_thread = 0;
    int threads = 1;

    static size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }
    size_t bytes() const { return aligned(shared) + size_t(threads) * aligned(per_thread); }
    uint8_t* slot(uint8_t* workspace, int64_t index) const {
        return workspace + aligned(shared) + size_t(index) * aligned(per_thread);
    }
};

struct ClampRange {
    int32_t lo;
    int32_t hi;
};

// A float kernel's fused activation [lo, hi] (ReLU, ReLU6, Hardtanh); unbounded by default.
// NaN passes through, as in torch.
struct FloatBounds {
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();

    float apply(float v) const { return std::min(std::max(v, lo), hi); }
};

// A node's inputs, outputs and attributes, checked against what the op requires.
// The "layout" attribute's value for channels-last activations (absent: NCHW).
constexpr int64_t kLayoutNhwc = 1;

class NodeView {
 public:
    NodeView(const Graph& graph, const Node& node) : graph_(graph), node_(node) {}

    std::string label() const { return node_label(node_); }
    const std::string& op() const { return node_.op; }
    [[noreturn]] void fail(const std::string& message) const;

    void expect_input_count(size_t count) const;
    void expect_output_count(size_t count) const;
    size_t input_count() const { return node_.inputs.size(); }
    const Value& input_value(size_t index) const { return graph_.values[node_.inputs[index]]; }
    size_t output_count() const { return node_.outputs.size(); }
    // The attributes are exactly the `required` keys plus any of the `optional` ones. Their kinds
    // (i64 or f32 list) are checked where they are read.
    void expect_attrs(std::initializer_list<const char*> required,
                      std::initializer_list<const char*> optional = {}) const;
    bool has_attr(const char* key) const;
    // Whether the activations are channels-last: the "layout" attribute, kLayoutNhwc where the
    // layout pass (graph_passes.h) converted the node; absent, NCHW. Other values fail.
    bool channels_last() const;

    // The kernel's dtype: that of input 0, by which the registry chose the kernel.
    DType dtype() const;
    // An activation of this dtype; a mismatch is the error for mixed dtypes in one node.
    const Value& activation_input(size_t index, DType dtype) const;
    // A float32 activation or constant (a float op's operand that the file may hold, such as a
    // scale or a learned embedding).
    const Value& float32_operand(size_t index) const;
    // A constant of this dtype and rank; `role` names it in errors ("weight").
    const Value& constant_input(size_t index, const char* role, DType dtype, size_t rank) const;
    const Value& output(size_t index, DType dtype) const;  // an activation of this dtype
    void expect_same_quantization(const Value& input, const Value& output) const;
    // Data movement (spec 7, 12-14): one activation input and `outputs` outputs of its dtype, each
    // carrying its (scale, zero_point). Returns that dtype; the kernel works on its element size.
    DType expect_data_movement(size_t outputs) const;
    // One bias per output channel (dims[0]) of the weight.
    void expect_bias_for(const Value& bias, const Value& weight) const;
    // A weight layer's operands: `inputs` inputs, x (0) and any past 2 activations of `dtype`,
    // weight (1) a constant of `dtype` and `weight_rank`, bias (2) a constant of `bias_dtype`,
    // one per output channel; one output of `dtype`. Returns the weight.
    const Value& expect_weight_layer(size_t inputs, DType dtype, DType bias_dtype,
                                     size_t weight_rank) const;

    // Exactly `count` values, each in [lo, hi].
    std::vector<int64_t> ints(const char* key, size_t count, int64_t lo, int64_t hi) const;
    // Any number of values (possibly none), each in [lo, hi].
    std::vector<int64_t> int_list(const char* key, int64_t lo, int64_t hi) const;
    int64_t int_scalar(const char* key, int64_t lo, int64_t hi) const;
    // Exactly `count` f32 values, none NaN.
    std::vector<float> floats(const char* key, size_t count) const;
    // Requantization parameters (spec 2): multipliers in [0, 2^31), shifts in [1, 62].
    std::vector<int32_t> multipliers(const char* key, size_t count) const;
    std::vector<int32_t> shifts(const char* key, size_t count) const;
    // A fused activation's [lo, hi] with -128 <= lo <= hi <= 127.
    ClampRange clamp(const char* key) const;
    // A float kernel's f32 [lo, hi] with lo <= hi.
    FloatBounds float_bounds(const char* key) const;
    // float_bounds(key) where the node has the attribute, unbounded otherwise.
    FloatBounds optional_float_bounds(const char* key) const;

 private:
    const Attr& attr(const char* key, AttrKind kind) const;

    const Graph& graph_;
    const Node& node_;
};

// The values of an int32 or float32 constant, decoded from little-endian.
std::vector<int32_t> int32_values(const Value& value);
std::vector<float> float32_values(const Value& value);

int64_t element_count(const Shape& shape);
// Row-major element strides of a tensor of this shape.
std::vector<int64_t> row_major_strides(const Shape& shape);

// numpy's broadcasting: the shapes right-aligned, a missing dim counting as 1, each pair of dims
// equal or one of them 1. Sets *out (the larger rank, the larger dim of each pair) and returns
// true where they broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);
// The row-major strides of a tensor of `shape` read as one of `rank` >= shape.size() dims
// broadcast to a larger shape: 0 for the missing leading dims and for dims of size 1 (repeated).
std::vector<int64_t> broadcast_strides(const Shape& shape, size_t rank);

// A float32 operand that may be a constant: its values decoded from little-endian once at load,
// so that a run never reads the file's bytes as host floats; an activation is read from the
// node's inputs.
class Float32Operand {
 public:
    Float32Operand() = default;  // an activation at input 0, until assigned
    Float32Operand(const NodeView& node, size_t index);

    const float* data(const NodeIO& io) const {
        return constant_ ? values_.data() : io.input<float>(index_);
    }

 private:
    size_t index_ = 0;
    bool constant_ = false;
    std::vector<float> values_;
};

// A row-major walk over `shape` from flat position `start` that keeps, for each of K tensors, the
// element offset of the current position given that tensor's strides per dim (stride 0 repeats a
// broadcast dim; permuted strides read a permuted tensor). Lets a parallel_for range start
// anywhere.
template <size_t K>
class StridedWalk {
 public:
    using Strides = std::array<std::vector<int64_t>, K>;

    StridedWalk(const Shape& shape, const Strides& strides, int64_t start)
        : shape_(shape), strides_(strides), index_(shape.size(), 0) {
        for (size_t d = shape.size(); d-- > 0;) {
            index_[d] = start % shape[d];
            start /= shape[d];
            for (size_t k = 0; k < K; ++k) {
                offsets_[k] += index_[d] * strides[k][d];
            }
        }
    }

    int64_t offset(size_t k) const { return offsets_[k]; }

    void next() {
        for (size_t d = shape_.size(); d-- > 0;) {
            for (size_t k = 0; k < K; ++k) {
                offsets_[k] += strides_[k][d];
            }
            if (++index_[d] < shape_[d]) {
                return;
            }
            for (size_t k = 0; k < K; ++k) {
                offsets_[k] -= strides_[k][d] * shape_[d];
            }
            index_[d] = 0;
        }
    }

 private:
    const Shape& shape_;
    const Strides& strides_;
    std::vector<int64_t> index_;
    std::array<int64_t, K> offsets_{};
};

// PyTorch's conv/pool output size (no ceil mode); <= 0 when the window does not fit.
int64_t sliding_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t padding,
                            int64_t dilation);

// Checks that |bias| + K * 255 * 127 < 2^31 for every output channel, so the int32 accumulator of
// spec 4 cannot overflow (the converter refuses such layers; a hand-made file must not get
// through).
void check_accumulator_range(const NodeView& node, const std::vector<int32_t>& bias,
                             int64_t products_per_output);
// Narrow-range weights (spec 1): -128 never occurs, which optimized kernels rely on.
void check_narrow_range_weights(const NodeView& node, const Value& weight);

// The factory an algorithm descriptor holds: Kernel constructed from the node and the
// descriptor's fixed arguments (micro-kernel tables, block sizes); one template for every driver.
template <class Kernel, const auto&... kArgs>
std::unique_ptr<OpKernel> make_kernel(const NodeView& node) {
    return std::make_unique<Kernel>(node, kArgs...);
}

// Defines the factory `name` (what the op table and the algorithm descriptors hold) of a kernel
// class constructed from its node alone: one body for every such factory.
#define QTK_KERNEL_FACTORY(name, ...)                      \
    std::unique_ptr<OpKernel> name(const NodeView& node) { \
        return std::make_unique<__VA_ARGS__>(node);        \
    }

}  // namespace detail
}  // namespace qtk
