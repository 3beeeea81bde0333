// What every conv2d kernel shares, whichever algorithm computes it: the node's checked geometry and
// int8 constants, the output shapes, and the descriptor by which the registry picks an algorithm
// (the lists are src/algo_lists/conv2d_{int8,float32}.inc).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "cpu_features.h"
#include "op_kernel.h"
#include "qtk/arithmetic.h"

namespace qtk {
namespace detail {

// PyTorch's conv2d geometry: weight [O, C/groups, kh, kw], any stride, padding, dilation, groups.
struct Conv2dParams {
    int64_t out_channels, group_in_channels, kernel_h, kernel_w;
    int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
    // Activations channels-last (NHWC: x [N, H, W, C], y [N, H', W', O]), where the layout pass
    // (graph_passes.h) set the node's "layout" attribute; else NCHW, the file's layout.
    bool nhwc = false;
    // The output's height and width in the graph (0 where unknown, as in a bare geometry). Only
    // the default choice reads them (Conv2dAlgo::preferred); kernels take each run's shapes.
    int64_t out_h = 0, out_w = 0;
    // An int8 conv with a PReLU fused (spec 22): its sums below zero take other multipliers, which
    // kernels that requantize by one multiplier per channel in registers do not take.
    bool fused_prelu = false;

    int64_t products_per_output() const { return group_in_channels * kernel_h * kernel_w; }
    int64_t out_per_group() const { return out_channels / groups; }
    // 1x1, stride 1, no padding: each input channel plane is one row of the GEMM operand as is.
    bool pointwise() const {
        return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 &&
               pad_w == 0;
    }
};

// The geometry of weight [O, C/groups, kh, kw] and the window attributes stride, padding, dilation
// and groups (dividing O), as conv2d and conv_transpose2d read them; nhwc left false.
Conv2dParams read_conv2d_window(const NodeView& node, const Value& weight);

// Checks x, weight, bias [O], the fused residual of an int8 conv (input 3, optional) and y
// (activations and weight of `dtype`) and reads the window attributes; errors name the node.
Conv2dParams read_conv2d_params(const NodeView& node, DType dtype, DType bias_dtype);

// The int8 add (spec 3) that the runtime's graph pass (graph_passes.h) fused into the conv before
// it: y = add(conv result, residual), the conv result never stored. Operands in that order.
struct ResidualAdd {
    int32_t conv_zero_point, conv_multiplier, residual_zero_point, residual_multiplier, shift;
    int32_t zero_point, lo, hi;  // of the output

    int8_t apply(int8_t conv, int8_t residual) const {
        return arith::rescale_add(conv, conv_zero_point, conv_multiplier, residual,
                                  residual_zero_point, residual_multiplier, shift, zero_point, lo,
                                  hi);
    }
};

// The checked constants and requantization of an int8 conv2d node (spec 4) or of a conv2d_binary
// node (spec 24).
struct Conv2dInt8Constants {
    Conv2dInt8Constants(const NodeView& node, const Conv2dParams& params);

    // Spec 4, or spec 22's two sides with a fused PReLU.
    int8_t requantize(int64_t oc, int32_t acc) const {
        if (!fused_prelu()) {
            return arith::requantize(acc, multiplier[oc], shift[oc], output_zero_point, clamp.lo,
                                     clamp.hi);
        }
        return arith::requantize_by_sign(acc, multiplier[oc], shift[oc], negative_multiplier[oc],
                                         negative_shift[oc], output_zero_point, clamp.lo,
                                         clamp.hi);
    }
    bool fused_prelu() const { return !negative_multiplier.empty(); }

    const int8_t* weight;  // [O, C/groups, kh, kw], narrow range, owned by the model
    std::vector<int32_t> bias, multiplier, shift;
    // A fused PReLU's (spec 22) per output channel, the multiplier signed; empty without one.
    std::vector<int32_t> negative_multiplier, negative_shift;
    ClampRange clamp;
    int32_t input_zero_point, output_zero_point;  // output: of the conv result, before any residual
    bool has_residual = false;  // input 3, added to the conv result by `residual`
    ResidualAdd residual{};
    // conv2d_binary (spec 24): the weight is +-1, the input is read by its sign, +1 where
    // q >= thresholds[c] of its channel c (the attribute `thresholds`, RSign's, else the zero
    // point), and a padded position reads pad_value (0 or 1) instead of adding nothing.
    bool binary = false;
    int32_t pad_value = 0;
    std::vector<int32_t> thresholds;  // per input channel, in [-128, 128]; binary only
};

// The checked constants of a float32 conv2d node, decoded from little-endian once.
struct Conv2dFloat32Constants {
    explicit Conv2dFloat32Constants(const NodeView& node);

    std::vector<float> weight;  // [O, C/groups, kh, kw]
    std::vector<float> bias;    // [O]
    FloatBounds bounds;         // the fused activation, unbounded without the attribute
};

// The base of every conv2d kernel: the output shapes of spec 4 for an NCHW input, or NHWC (and a
// fused residual of the output's shape).
class Conv2dKernel : public OpKernel {
 public:
    Conv2dKernel(const NodeView& node, const Conv2dParams& params)
        : OpKernel(node.label()), params_(params) {}

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override;

 protected:
    const Conv2dParams params_;
};

// One way of computing a conv2d of one dtype. The registry keeps a list per dtype, fastest first,
// the reference last, and takes the first usable one unless QTK_CONV_ALGO names another. Every
// int8 algorithm gives the reference's bytes; float32 ones sum in another order and agree with the
// reference within the bound of docs/design.md (Winograd: docs/winograd.md). So the choice (and a
// per-layer Fast-Run timing) changes the time, and for float32 only the rounding.
struct Conv2dAlgo {
    const char* name;  // dtype, op, method, tile and ISA: "conv2d_int8_gemm_8x32c4_avx512_vnni""
    IsaLevel isa;      // the instructions it needs
    bool (*fits)(const Conv2dParams& params);  // the geometries it computes
    std::unique_ptr<OpKernel> (*make)(const NodeView& node);
    bool nchw = true, nhwc = false;  // the activation layouts it reads and writes
    // Where it should be the default among the algorithms that fit (nullptr: wherever it fits).
    // One that fits but is not preferred yields the default to those after it; Fast-Run and
    // QTK_CONV_ALGO still see it.
    bool (*preferred)(const Conv2dParams& params) = nullptr;

    bool usable(const Conv2dParams& params, IsaLevel cap) const {
        return isa <= cap && cpu_supports(isa) && fits_layout(params) && fits(params);
    }
    bool fits_layout(const Conv2dParams& params) const { return params.nhwc ? nhwc : nchw; }
};

bool fits_any_conv2d(const Conv2dParams& params);

}  // namespace detail
}  // namespace qtk
