// max_pool2d by rows, int8 (docs/quantization_spec.md section 6) and float32, any window: for
// each output row the maximum of its kernel_h input rows (an elementwise max over whole rows,
// vectorized per ISA by vmax.h) goes into a row buffer padded with the dtype's lowest value on
// both sides, then the same elementwise max over kernel_w shifted views of the buffer gives the
// maximum of the window starting at each column, of which the outputs take every stride-th: both
// passes over whole vectors, with no bounds checks. The padding gives the reference's bytes:
// int8's -128 and float32's -infinity never change a maximum, and a window with no input element
// (dilation) yields them in both. float32's maximum (src/float32_max.h) does not depend on the
// order, so rows first and columns after agree with the reference's window order (up to which
// NaN, where a window holds NaNs of different bit patterns). Channels-last (where the layout pass
// put the node: graph_passes.h) the same passes run over a sample's rows of pixels, each pixel's
// C channels one element group: the rows are C times longer and a column step is C elements.
// Ceil mode (its output size is the reference's) needs nothing more: rows past the input are
// skipped like padding rows, and the buffer reaches as far right as the last window does.
// Where the ISA has one, a stride-2 row kernel (vmax.h) does all three passes of an NCHW row
// (stride_w 2, dilation_w 1) in one call. Threads split the output rows.
#include <algorithm>
#include <limits>
#include <vector>

#include "../contracts/vmax.h"
#include "beside_reference.h"
#include "even_bytes.h"
#include "float32_max.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_max_pool2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_max_pool2d_float32_reference(const NodeView& node);

namespace {

constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;

// What a dtype's max pool needs: its padding value, its maximum and its reference.
struct Int8Max {
    using T = int8_t;
    static T lowest() { return static_cast<int8_t>(arith::kInt8Min); }
    static T larger(T best, T x) { return std::max(best, x); }
    static constexpr auto make_reference = make_max_pool2d_int8_reference;
};

struct Float32Max {
    using T = float;
    static T lowest() { return -std::numeric_limits<float>::infinity(); }
    static T larger(T best, T x) { return float32_max(best, x); }
    static constexpr auto make_reference = make_max_pool2d_float32_reference;
};

template <typename Max>
void vmax_rows_scalar(const typename Max::T* const* rows, size_t count, int64_t width,
                      typename Max::T* y) {
    for (int64_t i = 0; i < width; ++i) {
        typename Max::T best = rows[0][i];
        for (size_t r = 1; r < count; ++r) {
            best = Max::larger(best, rows[r][i]);
        }
        y[i] = best;
    }
}

const VmaxUkernel<int8_t> kInt8VmaxScalar = {vmax_rows_scalar<Int8Max>};
const VmaxUkernel<float> kFloat32VmaxScalar = {vmax_rows_scalar<Float32Max>};

// y[i] = x[i * stride] for i < count, in groups of `group` elements.
template <typename T>
void take_every(const T* x, int64_t stride, int64_t count, int64_t group, T* y) {
    if (group > 1) {
        for (int64_t i = 0; i < count; ++i) {
            std::copy(x + i * stride * group, x + (i * stride + 1) * group, y + i * group);
        }
        return;
    }
    int64_t i = 0;
    if constexpr (sizeof(T) == 1) {
        if (stride == 2) {
            i = copy_even_bytes(reinterpret_cast<const int8_t*>(x), count,
                                reinterpret_cast<int8_t*>(y));
        }
    }
    for (; i < count; ++i) {
        y[i] = x[i * stride];
    }
}

template <typename Max>
class MaxPool2dRows final : public BesideReference {
 public:
    using T = typename Max::T;

    MaxPool2dRows(const NodeView& node, const VmaxUkernel<T>& vmax,
                  const MaxPoolStride2Ukernel<T>* stride2)
        : BesideReference(node, Max::make_reference),
          vmax_(vmax),
          stride2_(stride2),
          nhwc_(node.channels_last()) {
        // Checked by the reference.
        const std::vector<int64_t> kernel = node.ints("kernel", 2, 1, kMaxAttr);
        const std::vector<int64_t> stride = node.ints("stride", 2, 1, kMaxAttr);
        const std::vector<int64_t> padding = node.ints("padding", 2, 0, kMaxAttr);
        const std::vector<int64_t> dilation = node.ints("dilation", 2, 1, kMaxAttr);
        for (int d = 0; d < 2; ++d) {
            kernel_[d] = kernel[size_t(d)];
            stride_[d] = stride[size_t(d)];
            pad_[d] = padding[size_t(d)];
            dilation_[d] = dilation[size_t(d)];
        }
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        // Planes of rows of pixels of `group` elements: (n, c) planes of single elements in NCHW,
        // samples of C-channel pixels channels-last.
        const int64_t planes = nhwc_ ? xs[0] : xs[0] * xs[1], group = nhwc_ ? xs[3] : 1;
        const int64_t height = xs[nhwc_ ? 1 : 2], width = xs[nhwc_ ? 2 : 3];
        const int64_t out_h = ys[nhwc_ ? 1 : 2], out_w = ys[nhwc_ ? 2 : 3];
        // The buffer holds input column ix at pad_w + ix, and the lowest value left and right of
        // it as far as any window reaches.
        const int64_t buffer_size = std::max(
            pad_[1] + width, (out_w - 1) * stride_[1] + (kernel_[1] - 1) * dilation_[1] + 1);
        const int64_t window_starts = (out_w - 1) * stride_[1] + 1;
        const bool whole_row = stride2_ != nullptr && !nhwc_ && stride_[1] == 2 &&
                               dilation_[1] == 1 && kernel_[1] <= 64;
        pool.parallel_for(planes * out_h, [&](int64_t begin, int64_t end) {
            std::vector<T> buffer(size_t(buffer_size * group), Max::lowest());
            T* row_max = buffer.data() + pad_[1] * group;
            std::vector<const T*> rows(static_cast<size_t>(kernel_[0]));
            std::vector<const T*> taps(static_cast<size_t>(kernel_[1]));
            for (int64_t kx = 0; kx < kernel_[1]; ++kx) {
                taps[size_t(kx)] = buffer.data() + kx * dilation_[1] * group;
            }
            std::vector<T> window_max(stride_[1] > 1 ? size_t(window_starts * group) : 0);
            for (int64_t task = begin; task < end; ++task) {
                const int64_t plane = task / out_h, oy = task % out_h;
                const T* x = io.input<T>(0) + plane * height * width * group;
                T* y = io.output<T>(0) + task * out_w * group;
                size_t count = 0;
                for (int64_t ky = 0; ky < kernel_[0]; ++ky) {
                    const int64_t iy = oy * stride_[0] - pad_[0] + ky * dilation_[0];
                    if (iy >= 0 && iy < height) {
                        rows[count++] = x + iy * width * group;
                    }
                }
                if (count != 0 && whole_row) {
                    stride2_->row(rows.data(), count, width, kernel_[1], pad_[1], out_w, y);
                    continue;
                }
                if (count == 0) {
                    std::fill(row_max, row_max + width * group, Max::lowest());
                } else {
                    vmax_.rows(rows.data(), count, width * group, row_max);
                }
                if (stride_[1] == 1) {
                    vmax_.rows(taps.data(), taps.size(), out_w * group, y);
                    continue;
                }
                vmax_.rows(taps.data(), taps.size(), window_starts * group, window_max.data());
                take_every(window_max.data(), stride_[1], out_w, group, y);
            }
        });
    }

 private:
    const VmaxUkernel<T>& vmax_;
    const MaxPoolStride2Ukernel<T>* const stride2_;  // null where the ISA has none
    const bool nhwc_;
    int64_t kernel_[2], stride_[2], pad_[2], dilation_[2];  // (h, w)
};

template <typename Max, const VmaxUkernel<typename Max::T>& kVmax>
std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<MaxPool2dRows<Max>>(node, kVmax, nullptr);
}

template <typename Max, const VmaxUkernel<typename Max::T>& kVmax,
          const MaxPoolStride2Ukernel<typename Max::T>& kStride2>
std::unique_ptr<OpKernel> make_with_stride2(const NodeView& node) {
    return std::make_unique<MaxPool2dRows<Max>>(node, kVmax, &kStride2);
}

}  // namespace

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kMaxPool2dInt8RowsAvx512Vbmi = {
    "max_pool2d_int8_rows_avx512_vbmi", IsaLevel::kAvx512Vbmi,
    make_with_stride2<Int8Max, kInt8VmaxAvx512, kInt8MaxPoolStride2Avx512Vbmi>};
#endif
#if QTK_X86_AVX512_VNNI
extern const OpAlgo kMaxPool2dInt8RowsAvx512 = {"max_pool2d_int8_rows_avx512",
                                                IsaLevel::kAvx512Vnni,
                                                make<Int8Max, kInt8VmaxAvx512>};
extern const OpAlgo kMaxPool2dFloat32RowsAvx512 = {"max_pool2d_float32_rows_avx512",
                                                   IsaLevel::kAvx512Vnni,
                                                   make<Float32Max, kFloat32VmaxAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kMaxPool2dInt8RowsAvx2 = {"max_pool2d_int8_rows_avx2", IsaLevel::kAvx2,
                                              make<Int8Max, kInt8VmaxAvx2>};
extern const OpAlgo kMaxPool2dFloat32RowsAvx2 = {"max_pool2d_float32_rows_avx2", IsaLevel::kAvx2,
                                                 make<Float32Max, kFloat32VmaxAvx2>};
#endif
#if QTK_ARM_NEON
extern const OpAlgo kMaxPool2dInt8RowsNeon = {"max_pool2d_int8_rows_neon", IsaLevel::kNeon,
                                              make<Int8Max, kInt8VmaxNeon>};
extern const OpAlgo kMaxPool2dFloat32RowsNeon = {"max_pool2d_float32_rows_neon", IsaLevel::kNeon,
                                                 make<Float32Max, kFloat32VmaxNeon>};
#endif
extern const OpAlgo kMaxPool2dInt8Rows = {"max_pool2d_int8_rows", IsaLevel::kScalar,
                                          make<Int8Max, kInt8VmaxScalar>};
extern const OpAlgo kMaxPool2dFloat32Rows = {"max_pool2d_float32_rows", IsaLevel::kScalar,
                                             make<Float32Max, kFloat32VmaxScalar>};

}  // namespace detail
}  // namespace qtk
