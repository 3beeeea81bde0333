// quantize and dequantize, reference: docs/quantization_spec.md section 1, where a mixed-precision
// model passes between its float and int8 parts (spec 15).
#include "int8_quantize.h"
#include "op_algo.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

void quantize_int8_scalar(const float* x, int64_t count, float inv_scale, int32_t zero_point,
                          int8_t* y) {
    for (int64_t i = 0; i < count; ++i) {
        y[i] = arith::quantize(x[i], inv_scale, zero_point);
    }
}

// One activation in, one of the same shape out.
class ConvertReference : public OpKernel {
 public:
    ConvertReference(const NodeView& node, DType from, DType to) : OpKernel(node.label()) {
        node.expect_input_count(1);
        node.expect_output_count(1);
        node.expect_attrs({});
        node.activation_input(0, from);
        node.output(0, to);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return {inputs[0]};
    }
};

// float32 -> int8 with the output's (scale, zero_point).
class QuantizeReference final : public ConvertReference {
 public:
    explicit QuantizeReference(const NodeView& node)
        : ConvertReference(node, DType::kFloat32, DType::kInt8) {
        const Value& y = node.output(0, DType::kInt8);
        inv_scale_ = arith::inverse_scale(y.scale);
        zero_point_ = y.zero_point;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const float* x = io.input<float>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            quantize_int8_scalar(x + begin, end - begin, inv_scale_, zero_point_, y + begin);
        });
    }

 private:
    float inv_scale_;
    int32_t zero_point_;
};

// int8 -> float32 with the input's (scale, zero_point).
class DequantizeReference final : public ConvertReference {
 public:
    explicit DequantizeReference(const NodeView& node)
        : ConvertReference(node, DType::kInt8, DType::kFloat32) {
        const Value& x = node.activation_input(0, DType::kInt8);
        scale_ = x.scale;
        zero_point_ = x.zero_point;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* x = io.input<int8_t>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = arith::dequantize(x[i], scale_, zero_point_);
            }
        });
    }

 private:
    float scale_;
    int32_t zero_point_;
};

}  // namespace

extern const Int8QuantizeUkernel kInt8QuantizeScalar = {quantize_int8_scalar};

Int8QuantizePlan int8_quantize_plan(float inv_scale, int32_t zero_point) {
    const arith::QuantizeBounds bounds = arith::quantize_bounds(zero_point);
    return {inv_scale, bounds.lo, bounds.hi, zero_point};
}

QTK_KERNEL_FACTORY(make_quantize_reference, QuantizeReference)

extern const OpAlgo kQuantizeInt8Reference = {"quantize_int8_reference", IsaLevel::kScalar,
                                              make_quantize_reference};

QTK_KERNEL_FACTORY(make_dequantize_reference, DequantizeReference)

}  // namespace detail
}  // namespace qtk
