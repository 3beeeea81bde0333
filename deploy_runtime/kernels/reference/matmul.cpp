// matmul, reference: torch.matmul of a [..., M, K] and b [..., K, P] with rank >= 2 each, the
// leading (batch) dims broadcast as numpy's (right-aligned, equal or 1); with transpose_b = 1, b
// is read as [..., P, K] (a @ b^T: attention's q k^T without a permute of k).
// - int8 (docs/quantization_spec.md section 17): a and b int8 activations of equal rank, the sum
//   of (a - z_a)(b - z_b) exact in int32 (K <= kMaxInt8Depth), requantized once by arith.
// - float32: a is an activation; b an activation of a's rank (q @ k^T, weights @ v) or a float32
//   constant. The output's dim 0 must follow the batch, so a constant b has a lower rank than a,
//   or dim 0 = 1, or both have rank 2 (a's dim 0 is then its rows). Sums in double, rounded once.
#include "op_kernel.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

// Spec 17's bound: K products of up to 255 * 255 stay below 2^31 for K <= 33025.
constexpr int64_t kMaxInt8Depth = ((int64_t{1} << 31) - 1) / (255 * 255);

Shape batch_dims(const Shape& matrices) { return Shape(matrices.begin(), matrices.end() - 2); }

// What both dtypes share: input checks, transpose_b, shapes, and the walk over output rows.
class MatmulReference : public OpKernel {
 protected:
    // Checks the node's inputs, output and attributes (`attrs` besides the optional transpose_b)
    // for input 0's dtype: b is an int8 activation for int8, a float32 operand for float32.
    MatmulReference(const NodeView& node, DType dtype, std::initializer_list<const char*> attrs)
        : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs(attrs, {"transpose_b"});
        transpose_b_ = node.has_attr("transpose_b") && node.int_scalar("transpose_b", 0, 1) == 1;
        const Value& a = node.activation_input(0, dtype);
        const Value& b =
            dtype == DType::kInt8 ? node.activation_input(1, dtype) : node.float32_operand(1);
        node.output(0, dtype);
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
    }

    // b's dims as [..., K, P] whatever transpose_b says.
    int64_t b_depth(const Shape& b) const { return b[b.size() - (transpose_b_ ? 1 : 2)]; }
    int64_t b_columns(const Shape& b) const { return b[b.size() - (transpose_b_ ? 2 : 1)]; }

 public:
    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& a = inputs[0];
        const Shape& b = inputs[1];
        const int64_t k = a[a.size() - 1];
        if (b_depth(b) != k) {
            fail("input 0 " + to_string(a) + " has " + std::to_string(k) + " columns but input 1 " +
                 to_string(b) + " has " + std::to_string(b_depth(b)) +
                 (transpose_b_ ? " columns (transpose_b: b is [..., P, K])" : " rows"));
        }
        Shape out;
        if (!broadcast_shapes(batch_dims(a), batch_dims(b), &out)) {
            fail("the batch dims of " + to_string(a) + " and " + to_string(b) +
                 " do not broadcast (right-aligned, each dim equal or 1)");
        }
        out.push_back(a[a.size() - 2]);
        out.push_back(b_columns(b));
        return {out};
    }

 protected:
    // Calls row_fn(row, a_row, b_matrix) for every output row (flat over the batch dims and M):
    // a_row the offset of its K values of a, b_matrix that of its [K, P] (or [P, K]) matrix of b.
    template <typename RowFn>
    void for_each_row(const NodeIO& io, ThreadPool& pool, const RowFn& row_fn) const {
        const Shape& as = *io.input_shapes[0];
        const Shape& bs = *io.input_shapes[1];
        const Shape& ys = *io.output_shapes[0];
        const int64_t m = as[as.size() - 2], k = as[as.size() - 1], p = b_columns(bs);
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
        pool.parallel_for(element_count(batch) * m, [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
                const StridedWalk<2> matrix(batch, strides, row / m);
                row_fn(row, matrix.offset(0) + row % m * k, matrix.offset(1));
            }
        });
    }

    bool transpose_b_ = false;
};

class MatmulFloat32Reference final : public MatmulReference {
 public:
    explicit MatmulFloat32Reference(const NodeView& node)
        : MatmulReference(node, DType::kFloat32, {}), b_(node, 1) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& bs = *io.input_shapes[1];
        const int64_t k = b_depth(bs), p = b_columns(bs);
        // b[i][j] of the [K, P] matrix lies at i * p + j, or at j * k + i with transpose_b.
        const int64_t b_row_step = transpose_b_ ? 1 : p, b_column_step = transpose_b_ ? k : 1;
        const float* a = io.input<float>(0);
        const float* b = b_.data(io);
        float* y = io.output<float>(0);
        for_each_row(io, pool, [&](int64_t row, int64_t a_row, int64_t b_matrix) {
            for (int64_t j = 0; j < p; ++j) {
                const float* b_column = b + b_matrix + j * b_column_step;
                double acc = 0;
                for (int64_t i = 0; i < k; ++i) {
                    acc += double{a[a_row + i]} * double{b_column[i * b_row_step]};
                }
                y[row * p + j] = static_cast<float>(acc);
            }
        });
    }

 private:
    Float32Operand b_;
};

class MatmulInt8Reference final : public MatmulReference {
 public:
    explicit MatmulInt8Reference(const NodeView& node)
        : MatmulReference(node, DType::kInt8, {"multiplier", "shift", "clamp"}) {
        a_zero_point_ = node.activation_input(0, DType::kInt8).zero_point;
        b_zero_point_ = node.activation_input(1, DType::kInt8).zero_point;
        output_zero_point_ = node.output(0, DType::kInt8).zero_point;
        multiplier_ = node.multipliers("multiplier", 1)[0];
        shift_ = node.shifts("shift", 1)[0];
        clamp_ = node.clamp("clamp");
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const int64_t k = inputs[0].back();
        if (k > kMaxInt8Depth) {
            fail("K = " + std::to_string(k) + " products of up to 255 * 255 could overflow the " +
                 "int32 accumulator (K <= " + std::to_string(kMaxInt8Depth) +
                 ", docs/quantization_spec.md section 17); keep this matmul float (qtk's " +
                 "converter refuses it too)");
        }
        return MatmulReference::infer_shapes(inputs);
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& bs = *io.input_shapes[1];
        const int64_t k = b_depth(bs), p = b_columns(bs);
        const int64_t b_row_step = transpose_b_ ? 1 : p, b_column_step = transpose_b_ ? k : 1;
        const int8_t* a = io.input<int8_t>(0);
        const int8_t* b = io.input<int8_t>(1);
        int8_t* y = io.output<int8_t>(0);
        for_each_row(io, pool, [&](int64_t row, int64_t a_row, int64_t b_matrix) {
            for (int64_t j = 0; j < p; ++j) {
                const int8_t* b_column = b + b_matrix + j * b_column_step;
                int32_t acc = 0;  // |acc| <= K * 255 * 255 < 2^31 (infer_shapes checked K)
                for (int64_t i = 0; i < k; ++i) {
                    acc += (int32_t{a[a_row + i]} - a_zero_point_) *
                           (int32_t{b_column[i * b_row_step]} - b_zero_point_);
                }
                y[row * p + j] = arith::requantize(acc, multiplier_, shift_, output_zero_point_,
                                                   clamp_.lo, clamp_.hi);
            }
        });
    }

 private:
    int32_t a_zero_point_, b_zero_point_, output_zero_point_;
    int32_t multiplier_, shift_;
    ClampRange clamp_;
};

}  // namespace

std::unique_ptr<OpKernel> make_matmul_float32_reference(const NodeView& node) {
    return std::make_unique<MatmulFloat32Reference>(node);
}

std::unique_ptr<OpKernel> make_matmul_int8_reference(const NodeView& node) {
    return std::make_unique<MatmulInt8Reference>(node);
}

}  // namespace detail
}  // namespace qtk
