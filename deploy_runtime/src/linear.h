// What every linear kernel shares, whichever algorithm computes it: the node's checked shapes and
// int8 constants, the output shape, and the descriptor by which the registry picks an int8
// algorithm (the list is src/algo_lists/linear_int8.inc).
#pragma once

#include <memory>
#include <vector>

#include "op_algo.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"

namespace qtk {
namespace detail {

// The base of every linear kernel: checks x, weight [O, K], bias [O] and y (activations and weight
// of `dtype`); infers [..., O] from x [..., K] of rank 2 or more, as torch's nn.Linear. Every
// leading dimension (the batch among them) counts as rows: the kernels see x as [rows(x), K] and y
// as [rows(x), O], which is the same memory, so no dimension is reshaped in the graph (spec 14).
class LinearKernel : public OpKernel {
 public:
    LinearKernel(const NodeView& node, DType dtype, DType bias_dtype);

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override;

    // The product of every dimension of x but the last.
    static int64_t rows(const Shape& x);

 protected:
    int64_t out_features_, in_features_;
};

// The checked constants and requantization of an int8 linear node (spec 4).
struct LinearInt8Constants {
    LinearInt8Constants(const NodeView& node, int64_t out_features, int64_t in_features);

    int8_t requantize(int64_t o, int32_t acc) const {
        return arith::requantize(acc, multiplier[o], shift[o], output_zero_point, clamp.lo,
                                 clamp.hi);
    }

    const int8_t* weight;  // [O, K], narrow range, owned by the model
    std::vector<int32_t> bias, multiplier, shift;
    ClampRange clamp;
    int32_t input_zero_point, output_zero_point;
};

// One way of computing an int8 linear; every one fits every layer and gives the reference's bytes.
using LinearAlgo = OpAlgo;

}  // namespace detail
}  // namespace qtk
