// layer_norm, group_norm, softmax and l2_normalize, reference. All work on lanes (rows) that are
// independent of each other: layer_norm on the last `axes` dims of each sample, group_norm on one
// group's channels with all their positions, softmax and l2_normalize along one axis.
// - float32 (the float parts of a model): torch's definitions, accumulated in double.
// - int8: softmax by spec 18's table, layer_norm and group_norm by spec 19, l2_normalize by
//   spec 19.1 (docs/quantization_spec.md), through the one arithmetic header.
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

// The rows of layer_norm and group_norm: consecutive runs of `length` values, value i of row r in
// channel r % groups * channels_per_group + i / positions. layer_norm's rows are the last `axes`
// dims of each sample, one channel per value (groups = positions = 1); group_norm's are one
// group's channels at all their positions ([N, C, ...], a group's channels consecutive).
struct NormRows {
    int64_t groups, channels_per_group, positions, length;

    static NormRows per_value(int64_t channels) { return {1, channels, 1, channels}; }
    static NormRows grouped(const Shape& x, int64_t groups) {
        const int64_t positions = element_count(x) / (x[0] * x[1]);
        return {groups, x[1] / groups, positions, x[1] / groups * positions};
    }

    // row(xr, yr, channel) for each row of input 0 into output 0, channel(i) value i's channel.
    template <typename T, typename Row>
    void for_each(const NodeIO& io, ThreadPool& pool, Row row) const {
        const T* x = io.input<T>(0);
        T* y = io.output<T>(0);
        pool.parallel_for(element_count(*io.input_shapes[0]) / length, [&](int64_t begin,
                                                                           int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const int64_t first_channel = r % groups * channels_per_group;
                row(x + r * length, y + r * length, [&](int64_t i) {
                    return static_cast<size_t>(first_channel + i / positions);
                });
            }
        });
    }
};

// group_norm's "groups" attribute: in [1, C], dividing the C channels of x [N, C, ...].
int64_t read_groups(const NodeView& node, const Shape& x) {
    const int64_t groups = node.int_scalar("groups", 1, x[1]);
    if (x[1] % groups != 0) {
        node.fail("groups = " + std::to_string(groups) + " does not divide the " +
                  std::to_string(x[1]) + " channels of " + to_string(x));
    }
    return groups;
}

// torch's layer_norm and group_norm on float32 rows: y = (x - mean) / sqrt(var + eps) *
// weight[c] + bias[c], var biased, accumulated and computed in double, rounded once.
void norm_rows_float32(const NormRows& rows, float eps, const std::vector<float>& weight,
                       const std::vector<float>& bias, const NodeIO& io, ThreadPool& pool) {
    const int64_t length = rows.length;
    rows.for_each<float>(io, pool, [&](const float* xr, float* yr, auto channel) {
        double sum = 0;
        for (int64_t i = 0; i < length; ++i) {
            sum += xr[i];
        }
        const double mean = sum / static_cast<double>(length);
        double squares = 0;
        for (int64_t i = 0; i < length; ++i) {
            squares += (xr[i] - mean) * (xr[i] - mean);
        }
        const double inv_std = 1.0 / std::sqrt(squares / static_cast<double>(length) + double{eps});
        for (int64_t i = 0; i < length; ++i) {
            const size_t c = channel(i);
            yr[i] = static_cast<float>((xr[i] - mean) * inv_std * weight[c] + bias[c]);
        }
    });
}

// The opening the float32 layer_norm and l2_normalize share: `inputs` inputs (the first a float32
// activation of rank >= 2, dim 0 the batch, never normalized), one output, the dims attribute in
// [1, rank) and a finite eps: > 0, or >= 0 where torch allows 0 (F.normalize).
std::pair<size_t, float> read_float_norm(const NodeView& node, size_t inputs, const char* dims,
                                         bool eps_may_be_zero) {
    node.expect_input_count(inputs);
    node.expect_output_count(1);
    node.expect_attrs({dims, "eps"});
    const Value& x = node.activation_input(0, DType::kFloat32);
    node.output(0, DType::kFloat32);
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (rank < 2) {
        node.fail("input must have rank >= 2 (dim 0 is the batch, which is not normalized)");
    }
    const size_t dim = static_cast<size_t>(node.int_scalar(dims, 1, rank - 1));
    const float eps = node.floats("eps", 1)[0];
    if (!(eps_may_be_zero ? eps >= 0.0f : eps > 0.0f) || std::isinf(eps)) {
        node.fail("attribute 'eps' = " + std::to_string(eps) + " must be finite and " +
                  (eps_may_be_zero ? ">= 0" : "> 0"));
    }
    return {dim, eps};
}

// torch.nn.functional.layer_norm: y = (x - mean) / sqrt(var + eps) * weight + bias over each group
// of the last `axes` dims, var biased. Accumulated and computed in double, rounded once.
class LayerNormFloat32Reference final : public OpKernel {
 public:
    explicit LayerNormFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        std::tie(axes_, eps_) = read_float_norm(node, 3, "axes", false);
        const Value& x = node.activation_input(0, DType::kFloat32);
        const Value& weight = node.constant_input(1, "weight", DType::kFloat32, axes_);
        const Value& bias = node.constant_input(2, "bias", DType::kFloat32, axes_);
        const Shape normalized(x.shape.end() - static_cast<std::ptrdiff_t>(axes_), x.shape.end());
        for (const Value* v : {&weight, &bias}) {
            if (v->shape != normalized) {
                node.fail("'" + v->name + "' has shape " + to_string(v->shape) + ", expected " +
                          to_string(normalized) + " (the last " + std::to_string(axes_) +
                          " dims of the input " + to_string(x.shape) + ")");
            }
        }
        weight_ = float32_values(weight);
        bias_ = float32_values(bias);
        rows_ = NormRows::per_value(static_cast<int64_t>(weight_.size()));
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        // The dims after the batch are the file's (the session changes only N), so the weight's
        // shape checked at load still fits.
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        norm_rows_float32(rows_, eps_, weight_, bias_, io, pool);
    }

 private:
    size_t axes_;
    NormRows rows_;
    float eps_;
    std::vector<float> weight_, bias_;  // decoded from little-endian once
};

// torch.softmax along `axis`: exp(x - max) in float32, divided by their sum (in double).
class SoftmaxFloat32Reference final : public OpKernel {
 public:
    explicit SoftmaxFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({"axis"});
        const Value& x = node.activation_input(0, DType::kFloat32);
        node.output(0, DType::kFloat32);
        const int64_t rank = static_cast<int64_t>(x.shape.size());
        if (rank < 2) {
            node.fail("input must have rank >= 2 (axis 0 is the batch)");
        }
        axis_ = static_cast<size_t>(node.int_scalar("axis", 1, rank - 1));
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};  // the rank is the file's: axis_ fits it
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t length = xs[axis_];
        int64_t inner = 1;  // the elements of one axis step: the lane's stride
        for (size_t d = axis_ + 1; d < xs.size(); ++d) {
            inner *= xs[d];
        }
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(element_count(xs) / length, [&](int64_t begin, int64_t end) {
            for (int64_t lane = begin; lane < end; ++lane) {
                const int64_t first = lane / inner * length * inner + lane % inner;
                const float* xl = x + first;
                float* yl = y + first;
                // A NaN anywhere makes the whole lane NaN, as in torch, whichever max it picks.
                float max = xl[0];
                for (int64_t i = 1; i < length; ++i) {
                    max = xl[i * inner] > max ? xl[i * inner] : max;
                }
                double sum = 0;
                for (int64_t i = 0; i < length; ++i) {
                    yl[i * inner] = std::exp(xl[i * inner] - max);
                    sum += yl[i * inner];
                }
                for (int64_t i = 0; i < length; ++i) {
                    yl[i * inner] = static_cast<float>(yl[i * inner] / sum);
                }
            }
        });
    }

 private:
    size_t axis_;
};

// The lanes along one axis of a tensor: lane l's i-th value lies at first(l) + i * inner.
struct AxisLanes {
    int64_t length, inner, count;

    AxisLanes(const Shape& shape, size_t axis) : length(shape[axis]), inner(1) {
        for (size_t d = axis + 1; d < shape.size(); ++d) {
            inner *= shape[d];
        }
        count = element_count(shape) / length;
    }
    int64_t first(int64_t lane) const { return lane / inner * length * inner + lane % inner; }
};

// torch.nn.functional.group_norm: each sample's channels split into `groups` consecutive groups,
// each group's values (its channels at all positions) normalized by their mean and biased
// variance, then per channel y = . * weight[c] + bias[c]. In double, rounded once.
class GroupNormFloat32Reference final : public OpKernel {
 public:
    explicit GroupNormFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(3);
        node.expect_output_count(1);
        node.expect_attrs({"groups", "eps"});
        const Value& x = node.activation_input(0, DType::kFloat32);
        node.output(0, DType::kFloat32);
        if (x.shape.size() < 2) {
            node.fail("input must have rank >= 2 ([N, C, ...])");
        }
        const int64_t channels = x.shape[1];
        const int64_t groups = read_groups(node, x.shape);
        eps_ = node.floats("eps", 1)[0];
        if (!(eps_ > 0.0f) || std::isinf(eps_)) {
            node.fail("attribute 'eps' = " + std::to_string(eps_) + " must be finite and > 0");
        }
        for (size_t i : {size_t{1}, size_t{2}}) {
            const Value& v = node.constant_input(i, i == 1 ? "weight" : "bias", DType::kFloat32, 1);
            if (v.shape[0] != channels) {
                node.fail("'" + v.name + "' has shape " + to_string(v.shape) + ", expected [" +
                          std::to_string(channels) + "] (the channels of the input " +
                          to_string(x.shape) + ")");
            }
        }
        weight_ = float32_values(node.input_value(1));
        bias_ = float32_values(node.input_value(2));
        rows_ = NormRows::grouped(x.shape, groups);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};  // C and the positions are the file's: the checks above still hold
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        norm_rows_float32(rows_, eps_, weight_, bias_, io, pool);
    }

 private:
    NormRows rows_;
    float eps_;
    std::vector<float> weight_, bias_;
};

// torch.nn.functional.normalize(x, p=2, dim=axis, eps): x / max(||x||_2, eps) along the axis;
// the norm summed in double and rounded to float32, the division in float32 (as torch).
class L2NormalizeFloat32Reference final : public OpKernel {
 public:
    explicit L2NormalizeFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        std::tie(axis_, eps_) = read_float_norm(node, 1, "axis", true);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const AxisLanes lanes(*io.input_shapes[0], axis_);
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(lanes.count, [&](int64_t begin, int64_t end) {
            for (int64_t lane = begin; lane < end; ++lane) {
                const float* xl = x + lanes.first(lane);
                float* yl = y + lanes.first(lane);
                double squares = 0;
                for (int64_t i = 0; i < lanes.length; ++i) {
                    squares += double{xl[i * lanes.inner]} * xl[i * lanes.inner];
                }
                // std::max(norm, eps) would drop a NaN norm; torch's clamp_min keeps it.
                const float norm = static_cast<float>(std::sqrt(squares));
                const float denominator = norm < eps_ ? eps_ : norm;
                for (int64_t i = 0; i < lanes.length; ++i) {
                    yl[i * lanes.inner] = xl[i * lanes.inner] / denominator;
                }
            }
        });
    }

 private:
    size_t axis_;
    float eps_;
};

// The axis of the int8 ops that work along one axis (softmax, l2_normalize): rank >= 2, axis in
// [1, rank), and rows no longer than `max_row`; `beyond` says why, after "rows ... are ".
size_t read_row_axis(const NodeView& node, const Shape& shape, int64_t max_row,
                     const std::string& beyond) {
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (rank < 2) {
        node.fail("input must have rank >= 2 (axis 0 is the batch)");
    }
    const size_t axis = static_cast<size_t>(node.int_scalar("axis", 1, rank - 1));
    if (shape[axis] > max_row) {
        node.fail("rows of " + std::to_string(shape[axis]) + " values along axis " +
                  std::to_string(axis) + " are " + beyond);
    }
    return axis;
}

// Spec 18 along `axis`: each lane by arith::softmax_row from the table of 256 exponentials.
class SoftmaxInt8Reference final : public OpKernel {
 public:
    explicit SoftmaxInt8Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs({"axis", "multiplier", "clamp"});
        const Value& x = node.activation_input(0, DType::kInt8);
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        axis_ = read_row_axis(node, x.shape, arith::kSoftmaxMaxRow,
                              "longer than 2^20, which bounds the integer sum "
                              "(docs/quantization_spec.md section 18)");
        multiplier_ =
            static_cast<int32_t>(node.int_scalar("multiplier", 1, arith::kSoftmaxMaxMultiplier));
        clamp_ = node.clamp("clamp");
        const Value& table = node.constant_input(1, "table", DType::kInt32, 1);
        if (table.shape[0] != 256) {
            node.fail("table '" + table.name + "' has shape " + to_string(table.shape) +
                      ", expected [256] (one exponential per distance 0 .. 255)");
        }
        table_ = int32_values(table);
        for (size_t d = 0; d < table_.size(); ++d) {
            if (table_[d] < 0 || table_[d] > arith::kSoftmaxTableOne ||
                (d == 0 && table_[d] != arith::kSoftmaxTableOne)) {
                node.fail("table '" + table.name + "'[" + std::to_string(d) + "] = " +
                          std::to_string(table_[d]) +
                          (d == 0 ? " must be 2^20 (exp(0) in Q20)"
                                  : " is outside [0, 2^20] (exponentials <= 1 in Q20)"));
            }
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};  // the row length is the file's: checked at load
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const AxisLanes lanes(*io.input_shapes[0], axis_);
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(lanes.count, [&](int64_t begin, int64_t end) {
            for (int64_t lane = begin; lane < end; ++lane) {
                arith::softmax_row(x + lanes.first(lane), y + lanes.first(lane), lanes.length,
                                   lanes.inner, table_.data(), multiplier_, output_zero_point_,
                                   clamp_.lo, clamp_.hi);
            }
        });
    }

 private:
    size_t axis_;
    int32_t multiplier_, output_zero_point_;
    ClampRange clamp_;
    std::vector<int32_t> table_;  // decoded from little-endian once
};

// Spec 19: layer_norm (rows: the last `axes` dims, one channel per position of the row) and
// group_norm (rows: one group's channels at all positions, the channel that of the value). Each
// row by arith::norm_row and arith::normalized_q16, then the per-channel affine part.
class NormInt8Reference final : public OpKernel {
 public:
    NormInt8Reference(const NodeView& node, bool grouped) : OpKernel(node.label()) {
        node.expect_input_count(3);
        node.expect_output_count(1);
        if (grouped) {
            node.expect_attrs({"groups", "eps_term", "multiplier", "shift", "clamp"});
        } else {
            node.expect_attrs({"axes", "eps_term", "multiplier", "shift", "clamp"});
        }
        const Value& x = node.activation_input(0, DType::kInt8);
        input_zero_point_ = x.zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        const int64_t rank = static_cast<int64_t>(x.shape.size());
        if (rank < 2) {
            node.fail("input must have rank >= 2 (dim 0 is the batch, which is not normalized)");
        }
        int64_t channels = 0;
        if (grouped) {  // [N, C, ...]: the channels of a group are consecutive
            channels = x.shape[1];
            rows_ = NormRows::grouped(x.shape, read_groups(node, x.shape));
        } else {  // one channel per value of the row
            const int64_t axes = node.int_scalar("axes", 1, rank - 1);
            channels = element_count(Shape(x.shape.end() - axes, x.shape.end()));
            rows_ = NormRows::per_value(channels);
        }
        if (rows_.length > arith::kNormMaxRow) {
            node.fail("rows of " + std::to_string(rows_.length) +
                      " values are longer than 2^14, which bounds the integer normalization " +
                      "(docs/quantization_spec.md section 19)");
        }
        eps_term_ = node.int_scalar("eps_term", 1, arith::kNormMaxEpsTerm);
        multiplier_ = node.multipliers("multiplier", static_cast<size_t>(channels));
        shift_ = node.shifts("shift", static_cast<size_t>(channels));
        clamp_ = node.clamp("clamp");
        const Value& weight = node.constant_input(1, "weight", DType::kInt8, 1);
        const Value& bias = node.constant_input(2, "bias", DType::kInt32, 1);
        for (const Value* v : {&weight, &bias}) {
            if (v->shape[0] != channels) {
                node.fail("'" + v->name + "' has shape " + to_string(v->shape) + ", expected [" +
                          std::to_string(channels) + "] (one per channel" +
                          (grouped ? "" : " of the normalized dims") + " of the input " +
                          to_string(x.shape) + ")");
            }
        }
        weight_.assign(reinterpret_cast<const int8_t*>(weight.data),
                       reinterpret_cast<const int8_t*>(weight.data) + channels);
        bias_ = int32_values(bias);
        for (size_t c = 0; c < bias_.size(); ++c) {
            if (bias_[c] < -arith::kNormMaxBias || bias_[c] > arith::kNormMaxBias) {
                node.fail("bias '" + bias.name + "'[" + std::to_string(c) + "] = " +
                          std::to_string(bias_[c]) + " is outside [-2^30, 2^30], which keeps " +
                          "the accumulator in int32 (docs/quantization_spec.md section 19)");
            }
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};  // all but the batch are the file's dims: rows checked at load
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t length = rows_.length;
        rows_.for_each<int8_t>(io, pool, [&](const int8_t* xr, int8_t* yr, auto channel) {
            const arith::NormRow stats =
                arith::norm_row(xr, length, 1, input_zero_point_, eps_term_);
            for (int64_t i = 0; i < length; ++i) {
                const size_t c = channel(i);
                yr[i] = arith::norm_affine(arith::normalized_q16(stats, xr[i], input_zero_point_),
                                           weight_[c], bias_[c], multiplier_[c], shift_[c],
                                           output_zero_point_, clamp_.lo, clamp_.hi);
            }
        });
    }

 private:
    NormRows rows_;
    int64_t eps_term_;
    int32_t input_zero_point_, output_zero_point_;
    std::vector<int8_t> weight_;
    std::vector<int32_t> bias_, multiplier_, shift_;
    ClampRange clamp_;
};

// Spec 19.1 along `axis`: each lane by arith::l2_row and arith::normalized_q16 (spec 19's row
// with C = 1, sx = 0, V = max(S, E)), then one requantization by 2^-16 / s_y.
class L2NormalizeInt8Reference final : public OpKernel {
 public:
    explicit L2NormalizeInt8Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({"axis", "eps_term", "multiplier", "shift", "clamp"});
        const Value& x = node.activation_input(0, DType::kInt8);
        input_zero_point_ = x.zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        axis_ = read_row_axis(node, x.shape, arith::kL2NormMaxRow,
                              "2^45 or longer, which the integer sum of squares does not bound "
                              "(docs/quantization_spec.md section 19.1)");
        eps_term_ = node.int_scalar("eps_term", 1, arith::kNormMaxEpsTerm);
        multiplier_ = node.multipliers("multiplier", 1)[0];
        shift_ = node.shifts("shift", 1)[0];
        clamp_ = node.clamp("clamp");
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};  // the row length is the file's: checked at load
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const AxisLanes lanes(*io.input_shapes[0], axis_);
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(lanes.count, [&](int64_t begin, int64_t end) {
            for (int64_t lane = begin; lane < end; ++lane) {
                const int8_t* xl = x + lanes.first(lane);
                int8_t* yl = y + lanes.first(lane);
                const arith::NormRow row =
                    arith::l2_row(xl, lanes.length, lanes.inner, input_zero_point_, eps_term_);
                for (int64_t i = 0; i < lanes.length; ++i) {
                    // |t| <= 2^16: the accumulator of requantize (int32).
                    const int64_t t =
                        arith::normalized_q16(row, xl[i * lanes.inner], input_zero_point_);
                    yl[i * lanes.inner] =
                        arith::requantize(static_cast<int32_t>(t), multiplier_, shift_,
                                          output_zero_point_, clamp_.lo, clamp_.hi);
                }
            }
        });
    }

 private:
    size_t axis_;
    int64_t eps_term_;
    int32_t input_zero_point_, output_zero_point_, multiplier_, shift_;
    ClampRange clamp_;
};

}  // namespace

QTK_KERNEL_FACTORY(make_l2_normalize_int8_reference, L2NormalizeInt8Reference)
QTK_KERNEL_FACTORY(make_layer_norm_float32_reference, LayerNormFloat32Reference)
QTK_KERNEL_FACTORY(make_softmax_float32_reference, SoftmaxFloat32Reference)
QTK_KERNEL_FACTORY(make_group_norm_float32_reference, GroupNormFloat32Reference)
QTK_KERNEL_FACTORY(make_l2_normalize_float32_reference, L2NormalizeFloat32Reference)
QTK_KERNEL_FACTORY(make_softmax_int8_reference, SoftmaxInt8Reference)

std::unique_ptr<OpKernel> make_layer_norm_int8_reference(const NodeView& node) {
    return std::make_unique<NormInt8Reference>(node, false);
}

std::unique_ptr<OpKernel> make_group_norm_int8_reference(const NodeView& node) {
    return std::make_unique<NormInt8Reference>(node, true);
}

}  // namespace detail
}  // namespace qtk
