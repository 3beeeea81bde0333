// prelu, reference, on [N, C, ...] with one slope or one per channel (dim 1):
// - int8: docs/quantization_spec.md section 22, two requantizations of q - z_x (the slope's
//   multiplier signed), its own (scale, zero_point);
// - float32: torch's prelu, x > 0 ? x : a_c x, the slopes a float32 constant [1] or [C].
#include <cstdint>
#include <string>
#include <vector>

#include "op_algo.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxMultiplier = (int64_t{1} << 31) - 1;

// One slope, or one per channel: `count` (1 or C) checked against the input [N, C, ...].
int64_t check_slopes(const NodeView& node, const Value& x, int64_t count) {
    if (count != 1 && (x.shape.size() < 2 || x.shape[1] != count)) {
        node.fail(std::to_string(count) + " slopes for input " + to_string(x.shape) +
                  ": one, or one per channel (dim 1)");
    }
    return count;
}

// The channel of flat element i of x [N, C, ...], for per-channel slopes.
struct Channels {
    Channels(const Shape& x, int64_t slopes)
        : inner(slopes == 1 ? 1 : element_count(x) / (x[0] * x[1])), count(slopes) {}
    int64_t of(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
    int64_t inner, count;
};

class PReLUInt8Reference final : public OpKernel {
 public:
    explicit PReLUInt8Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({"positive_multiplier", "positive_shift", "multiplier", "shift",
                           "clamp"});
        const Value& x = node.activation_input(0, DType::kInt8);
        zero_point_ = x.zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        positive_multiplier_ = node.multipliers("positive_multiplier", 1)[0];
        positive_shift_ = node.shifts("positive_shift", 1)[0];
        // Signed: a negative slope's multiplier carries its sign (|M| < 2^31).
        const std::vector<int64_t> multipliers =
            node.int_list("multiplier", -kMaxMultiplier, kMaxMultiplier);
        const int64_t count = check_slopes(node, x, static_cast<int64_t>(multipliers.size()));
        multipliers_.assign(multipliers.begin(), multipliers.end());
        shifts_ = node.shifts("shift", static_cast<size_t>(count));
        const ClampRange clamp = node.clamp("clamp");
        lo_ = clamp.lo;
        hi_ = clamp.hi;
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Channels channels(*io.input_shapes[0], static_cast<int64_t>(multipliers_.size()));
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(*io.input_shapes[0]), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = apply(x[i], channels.of(i));
            }
        });
    }

    // Spec 22 for input q of channel c (slope c).
    int8_t apply(int8_t q, int64_t c) const {
        return arith::requantize_by_sign(int32_t{q} - zero_point_, positive_multiplier_,
                                         positive_shift_, multipliers_[size_t(c)],
                                         shifts_[size_t(c)], output_zero_point_, lo_, hi_);
    }

    int64_t slopes() const { return static_cast<int64_t>(multipliers_.size()); }

 private:
    int32_t zero_point_, output_zero_point_, positive_multiplier_, positive_shift_, lo_, hi_;
    std::vector<int32_t> multipliers_, shifts_;
};

class PReLUFloat32Reference final : public OpKernel {
 public:
    explicit PReLUFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs({});
        const Value& x = node.activation_input(0, DType::kFloat32);
        node.output(0, DType::kFloat32);
        const Value& weight = node.constant_input(1, "weight", DType::kFloat32, 1);
        check_slopes(node, x, weight.shape[0]);
        slopes_ = float32_values(weight);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Channels channels(*io.input_shapes[0], static_cast<int64_t>(slopes_.size()));
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(element_count(*io.input_shapes[0]), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = x[i] > 0 ? x[i] : slopes_[channels.of(i)] * x[i];
            }
        });
    }

 private:
    std::vector<float> slopes_;
};

}  // namespace

QTK_KERNEL_FACTORY(make_prelu_int8_reference, PReLUInt8Reference)

// The portable int8 algorithm, last in algo_lists/prelu_int8.inc.
extern const OpAlgo kPReLUInt8Reference = {"prelu_int8_reference", IsaLevel::kScalar,
                                           make_prelu_int8_reference};

std::vector<int8_t> prelu_int8_tables(const NodeView& node) {
    const PReLUInt8Reference prelu(node);
    std::vector<int8_t> tables(size_t(prelu.slopes()) * 256);
    for (int64_t c = 0; c < prelu.slopes(); ++c) {
        for (int q = -128; q < 128; ++q) {
            tables[size_t(c * 256 + q + 128)] = prelu.apply(static_cast<int8_t>(q), c);
        }
    }
    return tables;
}
QTK_KERNEL_FACTORY(make_prelu_float32_reference, PReLUFloat32Reference)

}  // namespace detail
}  // namespace qtk
