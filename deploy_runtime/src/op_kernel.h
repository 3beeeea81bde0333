// What every kernel implements, and the checked view of its node that kernel factories use.
//
// A kernel is created once per node when the model loads: the factory validates attributes and
// constant inputs (naming the node in every error) and keeps what run() needs (weights stay in the
// model's bytes). Kernels are immutable afterwards, so sessions share them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "graph.h"

namespace qtk {
namespace detail {

class ThreadPool;

// Where one node reads and writes during a run: one pointer and shape per node input and output,
// in the node's order. Constants point into the model, activations into the session's arena;
// shapes are those of the current batch.
struct NodeIO {
    std::vector<const int8_t*> inputs;
    std::vector<const Shape*> input_shapes;
    std::vector<int8_t*> outputs;
    std::vector<const Shape*> output_shapes;
};

class OpKernel {
 public:
    explicit OpKernel(std::string label) : label_(std::move(label)) {}
    virtual ~OpKernel() = default;

    // Output shapes for these input shapes (constants included, with their file shapes). Throws
    // Error naming the node when they do not fit the op.
    virtual std::vector<Shape> infer_shapes(const std::vector<Shape>& input_shapes) const = 0;

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

struct ClampRange {
    int32_t lo;
    int32_t hi;
};

// A node's inputs, outputs and attributes, checked against what the op requires.
class NodeView {
 public:
    NodeView(const Graph& graph, const Node& node) : graph_(graph), node_(node) {}

    std::string label() const { return node_label(node_); }
    [[noreturn]] void fail(const std::string& message) const;

    void expect_input_count(size_t count) const;
    void expect_output_count(size_t count) const;
    size_t input_count() const { return node_.inputs.size(); }
    // The attributes are exactly these keys, each an i64 list.
    void expect_attrs(std::initializer_list<const char*> keys) const;

    const Value& activation_input(size_t index) const;  // an int8 activation
    // A constant of this dtype and rank; `role` names it in errors ("weight").
    const Value& constant_input(size_t index, const char* role, DType dtype, size_t rank) const;
    const Value& output(size_t index) const;  // an int8 activation
    void expect_same_quantization(const Value& input, const Value& output) const;
    // One int32 bias per output channel (dims[0]) of the weight.
    void expect_bias_for(const Value& bias, const Value& weight) const;

    // Exactly `count` values, each in [lo, hi].
    std::vector<int64_t> ints(const char* key, size_t count, int64_t lo, int64_t hi) const;
    int64_t int_scalar(const char* key, int64_t lo, int64_t hi) const;
    // Requantization parameters (spec 2): multipliers in [0, 2^31), shifts in [1, 62].
    std::vector<int32_t> multipliers(const char* key, size_t count) const;
    std::vector<int32_t> shifts(const char* key, size_t count) const;
    // A fused activation's [lo, hi] with -128 <= lo <= hi <= 127.
    ClampRange clamp(const char* key) const;

 private:
    const Attr& attr(const char* key) const;

    const Graph& graph_;
    const Node& node_;
};

// The values of an int32 constant, decoded from little-endian.
std::vector<int32_t> int32_values(const Value& value);

int64_t element_count(const Shape& shape);

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

}  // namespace detail
}  // namespace qtk
