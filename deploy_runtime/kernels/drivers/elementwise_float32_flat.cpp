// add and mul, float32, where both inputs have the output's shape (a residual add, a gate of the
// same size, a constant of the sample's shape at batch 1): one flat loop with no per-element index
// arithmetic, each element the reference's float operation and bounds, so the same bits. The
// reference's broadcast walk (an index per dimension per element) serves every other shape.
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
        if (*io.input_shapes[0] != ys || *io.input_shapes[1] != ys) {
            reference_->run(io, pool);
            return;
        }
        const float* a = a_.data(io);
        const float* b = b_.data(io);
        float* y = io.output<float>(0);
        pool.parallel_for(element_count(ys), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                y[i] = bounds_.apply(Op()(a[i], b[i]));
            }
        });
    }

 private:
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
