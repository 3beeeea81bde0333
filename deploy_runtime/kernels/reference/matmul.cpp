// matmul, float32 reference: torch.matmul of a [..., M, K] and b [..., K, P] with rank >= 2 each,
// the leading (batch) dims broadcast as numpy's (right-aligned, equal or 1). a is an activation; b
// an activation of a's rank (attention: q @ k^T, weights @ v) or a float32 constant. The output's
// dim 0 must follow the batch, so a constant b has a lower rank than a, or dim 0 = 1, or both have
// rank 2 (a's dim 0 is then its rows).
#include "op_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

Shape batch_dims(const Shape& matrices) { return Shape(matrices.begin(), matrices.end() - 2); }

class MatmulFloat32Reference final : public OpKernel {
 public:
    explicit MatmulFloat32Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs({});
        const Value& a = node.activation_input(0, DType::kFloat32);
        const Value& b = node.float32_operand(1);
        node.output(0, DType::kFloat32);
        for (const Value* v : {&a, &b}) {
            if (v->shape.size() < 2) {
                node.fail("'" + v->name + "' has shape " + to_string(v->shape) +
                          "; matmul's inputs have rank >= 2 ([..., rows, columns])");
            }
        }
        const size_t rank_a = a.shape.size(), rank_b = b.shape.size();
        if (!b.constant && rank_b != rank_a) {
            node.fail("inputs of ranks " + std::to_string(rank_a) + " and " +
                      std::to_string(rank_b) +
                      ": two activations need equal ranks, so that their batch dims line up");
        }
        if (b.constant && rank_b > rank_a) {
            node.fail("constant '" + b.name + "' has rank " + std::to_string(rank_b) +
                      ", above input 0's " + std::to_string(rank_a) +
                      ": the output's dim 0 would not follow the batch");
        }
        if (b.constant && rank_b == rank_a && rank_a > 2 && b.shape[0] != 1) {
            node.fail("constant '" + b.name + "' has shape " + to_string(b.shape) +
                      "; its dim 0 faces the batch, so it must be 1 (or drop it: a lower rank " +
                      "broadcasts)");
        }
        b_ = Float32Operand(node, 1);
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& a = inputs[0];
        const Shape& b = inputs[1];
        const int64_t k = a[a.size() - 1];
        if (b[b.size() - 2] != k) {
            fail("input 0 " + to_string(a) + " has " + std::to_string(k) +
                 " columns but input 1 " + to_string(b) + " has " +
                 std::to_string(b[b.size() - 2]) + " rows");
        }
        Shape out;
        if (!broadcast_shapes(batch_dims(a), batch_dims(b), &out)) {
            fail("the batch dims of " + to_string(a) + " and " + to_string(b) +
                 " do not broadcast (right-aligned, each dim equal or 1)");
        }
        out.push_back(a[a.size() - 2]);
        out.push_back(b[b.size() - 1]);
        return {out};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& as = *io.input_shapes[0];
        const Shape& bs = *io.input_shapes[1];
        const Shape& ys = *io.output_shapes[0];
        const int64_t m = as[as.size() - 2], k = as[as.size() - 1], p = bs[bs.size() - 1];
        const Shape batch = batch_dims(ys);
        // Strides in elements: each batch index steps a whole matrix (0 where broadcast).
        StridedWalk<2>::Strides strides = {broadcast_strides(batch_dims(as), batch.size()),
                                           broadcast_strides(batch_dims(bs), batch.size())};
        for (int64_t& s : strides[0]) {
            s *= m * k;
        }
        for (int64_t& s : strides[1]) {
            s *= k * p;
        }
        const float* a = io.input<float>(0);
        const float* b = b_.data(io);
        float* y = io.output<float>(0);
        // One task per output row; sums in double, rounded once.
        pool.parallel_for(element_count(batch) * m, [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
                const StridedWalk<2> matrix(batch, strides, row / m);
                const float* a_row = a + matrix.offset(0) + row % m * k;
                const float* b_matrix = b + matrix.offset(1);
                for (int64_t j = 0; j < p; ++j) {
                    double acc = 0;
                    for (int64_t i = 0; i < k; ++i) {
                        acc += double{a_row[i]} * double{b_matrix[i * p + j]};
                    }
                    y[row * p + j] = static_cast<float>(acc);
                }
            }
        });
    }

 private:
    Float32Operand b_;
};

}  // namespace

std::unique_ptr<OpKernel> make_matmul_float32_reference(const NodeView& node) {
    return std::make_unique<MatmulFloat32Reference>(node);
}

}  // namespace detail
}  // namespace qtk
