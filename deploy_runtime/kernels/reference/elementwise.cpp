// Elementwise ops, reference.
// - int8: add (docs/quantization_spec.md section 3, same shapes; where the graph pass fused the
//   lookup that read it, graph_passes.h, each sum then looked up in its channel's table), mul
//   (section 9, broadcast),
//   clamp (section 5: a clamp on the int8 values, keeps (scale, zp)), lut (section 10: a stored
//   256-entry table, or one per channel (section 25), own (scale, zp)).
// - float32: add, sub, mul and div (broadcast like int8 mul, either input may be a constant,
//   optional bounds), clamp (bounds), and torch's functions of one input (kFloat32Functions).
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "op_algo.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

class AddInt8Reference final : public OpKernel {
 public:
    explicit AddInt8Reference(const NodeView& node) : OpKernel(node.label()) {
        const bool lookup = node.input_count() == 3;
        node.expect_input_count(lookup ? 3 : 2);
        node.expect_output_count(1);
        const Value& a = node.activation_input(0, DType::kInt8);
        a_zero_point_ = a.zero_point;
        b_zero_point_ = node.activation_input(1, DType::kInt8).zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        node.expect_attrs({"multiplier", "shift", "clamp"}, {"sum_zero_point"});
        const std::vector<int32_t> multipliers = node.multipliers("multiplier", 2);
        a_multiplier_ = multipliers[0];
        b_multiplier_ = multipliers[1];
        shift_ = node.shifts("shift", 1)[0];
        clamp_ = node.clamp("clamp");
        if (lookup != node.has_attr("sum_zero_point")) {
            node.fail("a fused lookup takes both the table (input 2) and 'sum_zero_point'");
        }
        if (lookup) {
            output_zero_point_ = static_cast<int32_t>(
                node.int_scalar("sum_zero_point", arith::kInt8Min, arith::kInt8Max));
            const Value& table = node.input_value(2);
            const bool per_channel = table.shape.size() == 2;
            node.constant_input(2, "table", DType::kInt8, per_channel ? 2 : 1);
            const int64_t channels = per_channel && a.shape.size() >= 2 ? a.shape[1] : 1;
            if (table.shape != (per_channel ? Shape{channels, 256} : Shape{256})) {
                node.fail("table '" + table.name + "' must have shape [256] or [C, 256] for the " +
                          "C channels (dim 1) of " + to_string(a.shape) + ", got " +
                          to_string(table.shape));
            }
            const int8_t* entries = reinterpret_cast<const int8_t*>(table.data);
            tables_.assign(entries, entries + channels * 256);
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        if (inputs[0] != inputs[1]) {
            fail("inputs have different shapes " + to_string(inputs[0]) + " and " +
                 to_string(inputs[1]));
        }
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& shape = *io.output_shapes[0];
        const int64_t channels = static_cast<int64_t>(tables_.size() / 256);
        const int64_t plane = channels > 1 ? element_count(shape) / (shape[0] * channels) : 1;
        const int8_t* a = io.input<int8_t>(0);
        const int8_t* b = io.input<int8_t>(1);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(shape), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                const int8_t sum = arith::rescale_add(a[i], a_zero_point_, a_multiplier_, b[i],
                                                      b_zero_point_, b_multiplier_, shift_,
                                                      output_zero_point_, clamp_.lo, clamp_.hi);
                y[i] = tables_.empty()
                           ? sum
                           : tables_[size_t(i / plane % channels * 256 + int32_t{sum} + 128)];
            }
        });
    }

    // The fused lookup's tables, [channels][256], or none.
    const std::vector<int8_t>& tables() const { return tables_; }

 private:
    int32_t a_zero_point_, b_zero_point_, output_zero_point_;  // output: of the sum
    int32_t a_multiplier_, b_multiplier_, shift_;
    ClampRange clamp_;
    std::vector<int8_t> tables_;
};

// Two inputs of equal rank whose dims are equal or 1, torch's broadcasting for equal ranks
// (squeeze-excitation: [N, C, H, W] * [N, C, 1, 1]). The derived kernel checks the inputs' dtypes.
class BroadcastReference : public OpKernel {
 public:
    explicit BroadcastReference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& a = inputs[0];
        const Shape& b = inputs[1];
        Shape out;
        if (a.size() != b.size() || !broadcast_shapes(a, b, &out)) {
            fail("inputs of shapes " + to_string(a) + " and " + to_string(b) +
                 " do not broadcast (equal ranks, each dim equal or 1)");
        }
        return {out};
    }

 protected:
    // Calls fn(i, ia, ib) for every output element i with the flat indices of its a and b.
    template <typename Fn>
    void for_each_pair(const NodeIO& io, ThreadPool& pool, const Fn& fn) const {
        const Shape& ys = *io.output_shapes[0];
        const StridedWalk<2>::Strides strides = {broadcast_strides(*io.input_shapes[0], ys.size()),
                                                 broadcast_strides(*io.input_shapes[1], ys.size())};
        pool.parallel_for(element_count(ys), [&](int64_t begin, int64_t end) {
            StridedWalk<2> walk(ys, strides, begin);
            for (int64_t i = begin; i < end; ++i, walk.next()) {
                fn(i, walk.offset(0), walk.offset(1));
            }
        });
    }
};

class MulInt8Reference final : public BroadcastReference {
 public:
    explicit MulInt8Reference(const NodeView& node) : BroadcastReference(node) {
        a_zero_point_ = node.activation_input(0, DType::kInt8).zero_point;
        b_zero_point_ = node.activation_input(1, DType::kInt8).zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        node.expect_attrs({"multiplier", "shift", "clamp"});
        multiplier_ = node.multipliers("multiplier", 1)[0];
        shift_ = node.shifts("shift", 1)[0];
        clamp_ = node.clamp("clamp");
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* a = io.input<int8_t>(0);
        const int8_t* b = io.input<int8_t>(1);
        int8_t* y = io.output<int8_t>(0);
        for_each_pair(io, pool, [&](int64_t i, int64_t ia, int64_t ib) {
            // |product| <= 255 * 255: spec 2 applies unchanged.
            const int32_t product =
                (int32_t{a[ia]} - a_zero_point_) * (int32_t{b[ib]} - b_zero_point_);
            y[i] = arith::requantize(product, multiplier_, shift_, output_zero_point_, clamp_.lo,
                                     clamp_.hi);
        });
    }

 private:
    int32_t a_zero_point_, b_zero_point_, output_zero_point_;
    int32_t multiplier_, shift_;
    ClampRange clamp_;
};

// add, sub, mul and div in float32: either input may be a constant (x * 0.5 as a [1, 1, 1]
// constant, a learned [1, T, C] position embedding), not both, since the output follows the batch.
template <typename Op>
class BroadcastFloat32Reference final : public BroadcastReference {
 public:
    explicit BroadcastFloat32Reference(const NodeView& node)
        : BroadcastReference(node), a_(node, 0), b_(node, 1) {
        const Value& a = node.float32_operand(0);
        const Value& b = node.float32_operand(1);
        if (a.constant && b.constant) {
            node.fail("both inputs are constants; at least one must be an activation (fold the "
                      "op at export)");
        }
        for (const Value* v : {&a, &b}) {
            if (v->constant && (v->shape.empty() || v->shape[0] != 1)) {
                node.fail("constant '" + v->name + "' has shape " + to_string(v->shape) +
                          "; its dim 0 faces the batch, so it must be 1 (store it with a " +
                          "leading 1 and let it broadcast)");
            }
        }
        node.output(0, DType::kFloat32);
        node.expect_attrs({}, {"bounds"});
        bounds_ = node.optional_float_bounds("bounds");
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const float* a = a_.data(io);
        const float* b = b_.data(io);
        float* y = io.output<float>(0);
        for_each_pair(io, pool, [&](int64_t i, int64_t ia, int64_t ib) {
            y[i] = bounds_.apply(Op()(a[ia], b[ib]));
        });
    }

 private:
    const Float32Operand a_, b_;
    FloatBounds bounds_;
};

class ClampInt8Reference final : public OpKernel {
 public:
    explicit ClampInt8Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({"clamp"});
        node.expect_same_quantization(node.activation_input(0, DType::kInt8),
                                      node.output(0, DType::kInt8));
        clamp_ = node.clamp("clamp");
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = static_cast<int8_t>(arith::clamp(x[i], clamp_.lo, clamp_.hi));
            }
        });
    }

 private:
    ClampRange clamp_;
};

class LutInt8Reference final : public OpKernel {
 public:
    explicit LutInt8Reference(const NodeView& node)
        : OpKernel(node.label()), channels_last_(node.channels_last()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs({}, {"layout"});
        const Value& x = node.activation_input(0, DType::kInt8);
        const Value& table = node.input_value(1);
        // One table, or one per channel of x (spec 25): dim 1, the last dim when channels-last.
        const bool per_channel = table.shape.size() == 2;
        node.constant_input(1, "table", DType::kInt8, per_channel ? 2 : 1);
        const size_t channel_dim = channels_last_ ? x.shape.size() - 1 : 1;
        const int64_t channels = per_channel && x.shape.size() >= 2 ? x.shape[channel_dim] : 1;
        if (table.shape != (per_channel ? Shape{channels, 256} : Shape{256}) ||
            (per_channel && x.shape.size() < 2)) {
            node.fail("table '" + table.name + "' must have shape [256] (one entry per int8 " +
                      "value) or [C, 256] (a table per channel C of an input of rank >= 2, " +
                      "spec 25), got " + to_string(table.shape) + " for input " +
                      to_string(x.shape));
        }
        node.output(0, DType::kInt8);
        const int8_t* entries = reinterpret_cast<const int8_t*>(table.data);
        tables_.assign(entries, entries + channels * 256);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }

    const std::vector<int8_t>& tables() const { return tables_; }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& shape = *io.input_shapes[0];
        const int64_t channels = static_cast<int64_t>(tables_.size() / 256);
        // NCHW: element i is in channel (i / plane) % C; channels-last: i % C.
        const int64_t plane = channels_last_ ? 1 : element_count(shape) / (shape[0] * channels);
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(shape), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                const int64_t c = channels == 1 ? 0 : i / plane % channels;
                y[i] = tables_[static_cast<size_t>(c * 256 + int32_t{x[i]} + 128)];
            }
        });
    }

 private:
    const bool channels_last_;
    std::vector<int8_t> tables_;  // tables_[c * 256 + q + 128] = f(q) in channel c
};

// A float32 function's parameters: its f32 attributes in the order its kFloat32Functions line names
// them (LeakyReLU's slope, Softplus's beta and threshold); unused by functions without any.
using FunctionParams = std::array<float, 2>;
using Float32Fn = float (*)(float x, const FunctionParams& a);

// y = bounds(f(x, params)) elementwise in float32.
class UnaryFloat32Reference final : public OpKernel {
 public:
    UnaryFloat32Reference(const NodeView& node, Float32Fn function, FunctionParams params,
                          FloatBounds bounds)
        : OpKernel(node.label()), function_(function), params_(params), bounds_(bounds) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.activation_input(0, DType::kFloat32);
        node.output(0, DType::kFloat32);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = bounds_.apply(function_(x[i], params_));
            }
        });
    }

 private:
    Float32Fn function_;
    FunctionParams params_;
    FloatBounds bounds_;
};

// torch's definitions, in torch's order of operations.
float identity(float x) { return x; }
float relu6_of_x_plus_3(float x) { return std::min(std::max(x + 3.0f, 0.0f), 6.0f); }
float hardswish(float x) { return x * relu6_of_x_plus_3(x) / 6.0f; }
float hardsigmoid(float x) { return relu6_of_x_plus_3(x) / 6.0f; }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x * sigmoid(x); }
// torch's softplus(x, beta, threshold): linear where beta x exceeds the threshold.
float softplus(float x, float beta, float threshold) {
    return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}
float mish(float x) { return x * std::tanh(softplus(x, 1.0f, 20.0f)); }
float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
float leaky_relu(float x, float alpha) { return x > 0.0f ? x : x * alpha; }
float elu(float x, float alpha) { return x > 0.0f ? x : std::expm1(x) * alpha; }

// A function of x alone as a Float32Fn.
template <float (*f)(float)>
float without_params(float x, const FunctionParams&) {
    return f(x);
}

// The float32 form of each function that int8 runs as a table (docs/quantization_spec.md section
// 10), by op name, with the f32[1] attributes it reads into its params, in order (nullptr: none):
// a new one is its definition above and a line here (the registry asks is_float32_function).
struct Float32Function {
    const char* op;
    Float32Fn function;
    std::array<const char*, 2> attrs = {nullptr, nullptr};
};

constexpr Float32Function kFloat32Functions[] = {
    {"hardswish", without_params<hardswish>},
    {"hardsigmoid", without_params<hardsigmoid>},
    {"sigmoid", without_params<sigmoid>},
    {"tanh", [](float x, const FunctionParams&) { return std::tanh(x); }},
    {"silu", without_params<silu>},
    {"mish", without_params<mish>},
    {"gelu", without_params<gelu>},
    {"gelu_tanh", without_params<gelu_tanh>},
    {"leaky_relu", [](float x, const FunctionParams& a) { return leaky_relu(x, a[0]); },
     {"alpha", nullptr}},
    {"elu", [](float x, const FunctionParams& a) { return elu(x, a[0]); }, {"alpha", nullptr}},
    {"softplus", [](float x, const FunctionParams& a) { return softplus(x, a[0], a[1]); },
     {"beta", "threshold"}},
};

}  // namespace

QTK_KERNEL_FACTORY(make_add_int8_reference, AddInt8Reference)

std::vector<int8_t> add_int8_tables(const NodeView& node) {
    return AddInt8Reference(node).tables();
}

extern const OpAlgo kAddInt8Reference = {"add_int8_reference", IsaLevel::kScalar,
                                         make_add_int8_reference};

QTK_KERNEL_FACTORY(make_add_float32_reference, BroadcastFloat32Reference<std::plus<float>>)

extern const OpAlgo kAddFloat32Reference = {"add_float32_reference", IsaLevel::kScalar,
                                            make_add_float32_reference};

QTK_KERNEL_FACTORY(make_mul_int8_reference, MulInt8Reference)

extern const OpAlgo kMulInt8Reference = {"mul_int8_reference", IsaLevel::kScalar,
                                         make_mul_int8_reference};
QTK_KERNEL_FACTORY(make_mul_float32_reference, BroadcastFloat32Reference<std::multiplies<float>>)

extern const OpAlgo kMulFloat32Reference = {"mul_float32_reference", IsaLevel::kScalar,
                                            make_mul_float32_reference};

QTK_KERNEL_FACTORY(make_sub_float32_reference, BroadcastFloat32Reference<std::minus<float>>)
QTK_KERNEL_FACTORY(make_div_float32_reference, BroadcastFloat32Reference<std::divides<float>>)
QTK_KERNEL_FACTORY(make_clamp_int8_reference, ClampInt8Reference)

std::unique_ptr<OpKernel> make_clamp_float32_reference(const NodeView& node) {
    node.expect_attrs({"bounds"});
    return std::make_unique<UnaryFloat32Reference>(node, without_params<identity>,
                                                   FunctionParams{}, node.float_bounds("bounds"));
}

QTK_KERNEL_FACTORY(make_lut_int8_reference, LutInt8Reference)

std::vector<int8_t> lut_int8_tables(const NodeView& node) {
    return LutInt8Reference(node).tables();
}

extern const OpAlgo kLutInt8Reference = {"lut_int8_reference", IsaLevel::kScalar,
                                         make_lut_int8_reference};

bool is_float32_function(const std::string& op) {
    for (const Float32Function& entry : kFloat32Functions) {
        if (op == entry.op) {
            return true;
        }
    }
    return false;
}

std::unique_ptr<OpKernel> make_function_float32_reference(const NodeView& node) {
    for (const Float32Function& entry : kFloat32Functions) {
        if (node.op() != entry.op) {
            continue;
        }
        const char* const a0 = entry.attrs[0];
        const char* const a1 = entry.attrs[1];
        if (a0 == nullptr) {
            node.expect_attrs({});
        } else if (a1 == nullptr) {
            node.expect_attrs({a0});
        } else {
            node.expect_attrs({a0, a1});
        }
        FunctionParams params{};
        for (size_t i = 0; i < entry.attrs.size() && entry.attrs[i] != nullptr; ++i) {
            params[i] = node.floats(entry.attrs[i], 1)[0];
            if (!std::isfinite(params[i])) {
                node.fail(std::string("attribute '") + entry.attrs[i] + "' must be finite, got " +
                          std::to_string(params[i]));
            }
        }
        return std::make_unique<UnaryFloat32Reference>(node, entry.function, params,
                                                       FloatBounds{});
    }
    node.fail("op '" + node.op() + "' is registered as a float32 function but has no definition");
}

extern const OpAlgo kFunctionFloat32Reference = {"function_float32_reference", IsaLevel::kScalar,
                                                 make_function_float32_reference};

}  // namespace detail
}  // namespace qtk
