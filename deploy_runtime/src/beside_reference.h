// The base of an optimized kernel that keeps its op's reference kernel beside it: the reference
// checks the node and infers the shapes (the op's contract, written once); the optimized kernel
// reads the attributes it needs, already checked, and computes the reference's bytes faster.
#pragma once

#include <memory>
#include <vector>

#include "op_kernel.h"

namespace qtk {
namespace detail {

class BesideReference : public OpKernel {
 public:
    BesideReference(const NodeView& node,
                    std::unique_ptr<OpKernel> (*make_reference)(const NodeView& node))
        : OpKernel(node.label()), reference_(make_reference(node)) {}

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        return reference_->infer_shapes(inputs);
    }

 protected:
    const std::unique_ptr<OpKernel> reference_;
};

}  // namespace detail
}  // namespace qtk
