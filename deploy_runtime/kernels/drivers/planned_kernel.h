// The workspace_bytes and run of a kernel whose run lays out and cuts its work in a Plan built from
// the input shape and the thread count: both build the same Plan, so the workspace the session
// allocates is the one the run uses. Kernel befriends PlannedKernel and provides (privately)
//   struct Plan: Plan(const Kernel&, const Shape& input_shape, int threads), with a
//                WorkspaceLayout `workspace`;
//   void run_plan(const NodeIO&, ThreadPool&, const Plan&) const.
#pragma once

#include <string>
#include <vector>

#include "op_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

template <class Kernel, class Base>
class PlannedKernel : public Base {
 public:
    using Base::Base;

    size_t workspace_bytes(const std::vector<Shape>& input_shapes, const std::vector<Shape>&,
                           int threads) const final {
        return typename Kernel::Plan(kernel(), input_shapes[0], threads).workspace.bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const final {
        kernel().run_plan(io, pool,
                          typename Kernel::Plan(kernel(), *io.input_shapes[0], pool.threads()));
    }

 protected:
    // The kernel's own check of what its descriptor's fits() accepts: the registry checks first,
    // this guards a kernel built by name.
    static void require_fit(const NodeView& node, bool fits, const std::string& kernel) {
        if (!fits) {
            node.fail(kernel + " does not fit this conv2d");
        }
    }

 private:
    const Kernel& kernel() const { return static_cast<const Kernel&>(*this); }
};

}  // namespace detail
}  // namespace qtk
