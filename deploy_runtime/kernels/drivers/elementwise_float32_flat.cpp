// add and mul, float32, where both inputs have the output's shape (a residual add, a gate of the
// same size, a constant of the sample's shape at batch 1): one flat loop with no per-element index
// arithmetic; and where one has it and the other only its leading dims, 1 after them (a
// squeeze-excitation gate [N, C, 1, 1] on [N, C, H, W]): one value per run of outputs. Each
// element is the reference's float operation, operands in its order, and bounds, so the same
// bits. The reference's broadcast walk (an index per dimension per element) serves every other
// shape.
#include <algorithm>
#include <functional>

#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_add_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_mul_float32_reference(const NodeView& node);

namespace {

template <typename Op>
class ElementwiseFloat32Flat final : public BesideReference {
 public:
    ElementwiseFloat32Flat(const NodeView& node,
                           std::unique_ptr<OpKernel> (*make_reference)(const NodeView& node))
        : BesideReference(node, make_reference),  // checks the node
          a_(node, 0),
          b_(node, 1),
          bounds_(node.optional_float_bounds("bounds")) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        const int64_t a_run = run_of(ys, *io.input_shapes[0]);
        const int64_t b_run = run_of(ys, *io.input_shapes[1]);
        const float* a = a_.data(io);
        const float* b = b_.data(io);
        float* y = io.output<float>(0);
        if (a_run == 1 && b_run == 1) {
            pool.parallel_for(element_count(ys), [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                    y[i] = bounds_.apply(Op()(a[i], b[i]));
                }
            });
            return;
        }
        if (a_run == 0 || b_run == 0 || (a_run > 1 && b_run > 1)) {
            reference_->run(io, pool);
            return;
        }
        // One operand has a value per run of `run` outputs (the gate), the other one per output.
        const int64_t run = std::max(a_run, b_run);
        const bool a_gates = a_run > 1;
        const float* gate = a_gates ? a : b;
        const float* full = a_gates ? b : a;
        pool.parallel_for(element_count(ys) / run, [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const float g = gate[r];
                const float* f = full + r * run;
                float* out = y + r * run;
                if (a_gates) {
                    for (int64_t i = 0; i < run; ++i) {
                        out[i] = bounds_.apply(Op()(g, f[i]));
                    }
                } else {
                    for (int64_t i = 0; i < run; ++i) {
                        out[i] = bounds_.apply(Op()(f[i], g));
                    }
                }
            }
        });
    }

 private:
    // 1 where `x` has the output's shape; where it has the output's first dims and 1 after them,
    // the outputs per value of x (the product of the output's remaining dims); else 0.
    static int64_t run_of(const Shape& y, const Shape& x) {
        if (x.size() != y.size()) {
            return 0;
        }
        size_t leading = 0;
        while (leading < y.size() && x[leading] == y[leading]) {
            ++leading;
        }
        int64_t run = 1;
        for (size_t d = leading; d < y.size(); ++d) {
            if (x[d] != 1) {
                return 0;
            }
            run *= y[d];
        }
        return run;
    }

    const Float32Operand a_, b_;  // either may be a constant
    const FloatBounds bounds_;
};

std::unique_ptr<OpKernel> make_add(const NodeView& node) {
    return std::make_unique<ElementwiseFloat32Flat<std::plus<float>>>(node,
                                                                      make_add_float32_reference);
}

std::unique_ptr<OpKernel> make_mul(const NodeView& node) {
    return std::make_unique<ElementwiseFloat32Flat<std::multiplies<float>>>(
        node, make_mul_float32_reference);
}

}  // namespace

extern const OpAlgo kAddFloat32Flat = {"add_float32_flat", IsaLevel::kScalar, make_add};
extern const OpAlgo kMulFloat32Flat = {"mul_float32_flat", IsaLevel::kScalar, make_mul};

}  // namespace detail
}  // namespace qtk
