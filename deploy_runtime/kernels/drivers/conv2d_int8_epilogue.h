// How every optimized int8 conv2d algorithm finishes a row of output pixels of one channel (or, in
// channels-last layout, a run of channels of each of some pixels): the requantization of
// requantize_int8.h (a fused PReLU's two sides, spec 22, by sign where the ISA has that form,
// else value by value) and, where the graph pass fused one (conv2d.h), the residual add of
// vadd_int8.h over the bytes just written, while they are still in cache. Both are exact, so the row equals the reference's conv then add. Built
// with the baseline flags.
#pragma once

#include "../contracts/requantize_int8.h"
#include "../contracts/vadd_int8.h"
#include "conv2d.h"

namespace qtk {
namespace detail {

// The requantize and add tables of one ISA level, bundled so that a descriptor names its
// epilogue once (make_kernel<Kernel, micro-kernel, kInt8EpilogueAvx2>).
struct Int8EpilogueUkernels {
    const Int8RequantizeUkernel& requantize;
    const Int8VaddUkernel& vadd;
};

#if QTK_X86_AVX512_VNNI
inline constexpr Int8EpilogueUkernels kInt8EpilogueAvx512 = {kInt8RequantizeAvx512,
                                                             kInt8VaddAvx512};
#endif
#if QTK_X86_AVX2
inline constexpr Int8EpilogueUkernels kInt8EpilogueAvx2 = {kInt8RequantizeAvx2, kInt8VaddAvx2};
#endif
#if QTK_ARM_NEON
inline constexpr Int8EpilogueUkernels kInt8EpilogueNeon = {kInt8RequantizeNeon, kInt8VaddNeon};
#endif

class Conv2dInt8Epilogue {
 public:
    Conv2dInt8Epilogue(const Conv2dInt8Constants& k, const Int8EpilogueUkernels& ukernels)
        : k_(k),
          requantize_(ukernels.requantize),
          vadd_(ukernels.vadd),
          out_{k.output_zero_point, k.clamp.lo, k.clamp.hi},
          add_{k.residual.conv_zero_point,
               k.residual.conv_multiplier,
               k.residual.residual_zero_point,
               k.residual.residual_multiplier,
               k.residual.shift,
               k.residual.zero_point,
               k.residual.lo,
               k.residual.hi} {}

    // `rows` rows of `count` outputs of output channel oc, from acc + offset (row r at
    // acc + r * acc_stride), into rows * count consecutive bytes at y; `residual` points at the
    // residual's element of y[0] (ignored without a fused add).
    void rows(int64_t oc, const int32_t* acc, int64_t acc_stride, int64_t rows, int64_t count,
              int32_t offset, int8_t* y, const int8_t* residual) const {
        requantize_rows(oc, acc, acc_stride, rows, count, offset, y);
        add_residual(y, rows * count, 1, rows * count, residual);
    }

    // The requantization of `rows` alone, for a kernel that moves the bytes before the residual
    // add (add_residual).
    void requantize_rows(int64_t oc, const int32_t* acc, int64_t acc_stride, int64_t rows,
                         int64_t count, int32_t offset, int8_t* y) const {
        if (k_.fused_prelu() && requantize_.channel_by_sign != nullptr) {
            requantize_.channel_by_sign(acc, acc_stride, rows, count, offset, k_.multiplier[oc],
                                        k_.shift[oc], k_.negative_multiplier[oc],
                                        k_.negative_shift[oc], out_, y);
        } else if (k_.fused_prelu()) {
            for (int64_t r = 0; r < rows; ++r) {
                for (int64_t i = 0; i < count; ++i) {
                    y[r * count + i] = k_.requantize(oc, acc[r * acc_stride + i] + offset);
                }
            }
        } else {
            requantize_.channel(acc, acc_stride, rows, count, offset, k_.multiplier[oc],
                                k_.shift[oc], out_, y);
        }
    }

    // `pixels` channels-last output pixels of channels [oc, oc + count): pixel p's accumulators
    // at acc + p * acc_stride, plus offset[0, count), its bytes at y + p * y_stride (the
    // residual's alike).
    void pixels(int64_t oc, const int32_t* acc, int64_t acc_stride, int64_t pixels, int64_t count,
                const int32_t* offset, int8_t* y, int64_t y_stride, const int8_t* residual) const {
        if (k_.fused_prelu() && requantize_.channels_by_sign != nullptr) {
            requantize_.channels_by_sign(acc, acc_stride, pixels, count, offset,
                                         k_.multiplier.data() + oc, k_.shift.data() + oc,
                                         k_.negative_multiplier.data() + oc,
                                         k_.negative_shift.data() + oc, out_, y, y_stride);
        } else if (k_.fused_prelu()) {
            for (int64_t p = 0; p < pixels; ++p) {
                for (int64_t j = 0; j < count; ++j) {
                    y[p * y_stride + j] =
                        k_.requantize(oc + j, acc[p * acc_stride + j] + offset[j]);
                }
            }
        } else {
            requantize_.channels(acc, acc_stride, pixels, count, offset, k_.multiplier.data() + oc,
                                 k_.shift.data() + oc, out_, y, y_stride);
        }
        add_residual(y, y_stride, pixels, count, residual);
    }

    // The fused residual add alone (none without one) over `pixels` runs of `count` bytes
    // y_stride apart that a kernel has just requantized itself, the residual's alike.
    void add_residual(int8_t* y, int64_t y_stride, int64_t pixels, int64_t count,
                      const int8_t* residual) const {
        if (!k_.has_residual) {
            return;
        }
        if (count == y_stride) {  // whole pixels: one run
            vadd_.run(y, residual, pixels * count, add_, y);
            return;
        }
        for (int64_t p = 0; p < pixels; ++p) {
            vadd_.run(y + p * y_stride, residual + p * y_stride, count, add_, y + p * y_stride);
        }
    }

    void row(int64_t oc, const int32_t* acc, int32_t offset, int64_t count, int8_t* y,
             const int8_t* residual) const {
        rows(oc, acc, count, 1, count, offset, y, residual);
    }

    // The output's zero point and clamp, for micro-kernels that requantize in registers (a fused
    // PReLU's two sides too where they have the by-sign form, gemm_int8.h).
    const Int8Output& output() const { return out_; }

 private:
    const Conv2dInt8Constants& k_;
    const Int8RequantizeUkernel& requantize_;
    const Int8VaddUkernel& vadd_;
    const Int8Output out_;
    const Int8AddParams add_;
};

// What every optimized int8 conv kernel reads from its node before its own packing: the params, the
// constants and the epilogue over them.
class Conv2dInt8Kernel : public Conv2dKernel {
 protected:
    Conv2dInt8Kernel(const NodeView& node, const Int8EpilogueUkernels& epilogue)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kInt8, DType::kInt32)),
          constants_(node, params_),
          epilogue_(constants_, epilogue) {}

    // The fused residual (input 3), or null without one.
    const int8_t* residual(const NodeIO& io) const {
        return constants_.has_residual ? io.input<int8_t>(3) : nullptr;
    }

    const Conv2dInt8Constants constants_;
    const Conv2dInt8Epilogue epilogue_;
};

}  // namespace detail
}  // namespace qtk
