// max_pool2d int8 (docs/quantization_spec.md section 6) by rows, any window: for each output row
// the maximum of its kernel_h input rows (a bytewise max over whole rows, vectorized per ISA by
// int8_vmax.h) goes into a row buffer padded with -128 on both sides, then each output takes the
// maximum of its kernel_w buffer entries with no bounds checks. Padding as -128 gives the
// reference's bytes: -128 never changes a maximum, and a window with no input element (dilation)
// yields -128 in both. Threads split the (n, c) planes.
#include <algorithm>
#include <vector>

#include "../x86/int8_vmax.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_max_pool2d_int8_reference(const NodeView& node);

namespace {

constexpr int64_t kMaxAttr = (int64_t{1} << 31) - 1;
constexpr int8_t kLowest = static_cast<int8_t>(arith::kInt8Min);

void vmax_rows_scalar(const int8_t* const* rows, size_t count, int64_t width, int8_t* y) {
    for (int64_t i = 0; i < width; ++i) {
        int8_t best = rows[0][i];
        for (size_t r = 1; r < count; ++r) {
            best = std::max(best, rows[r][i]);
        }
        y[i] = best;
    }
}

const Int8VmaxUkernel kInt8VmaxScalar = {vmax_rows_scalar};

class MaxPool2dInt8Rows final : public BesideReference {
 public:
    MaxPool2dInt8Rows(const NodeView& node, const Int8VmaxUkernel& vmax)
        : BesideReference(node, make_max_pool2d_int8_reference), vmax_(vmax) {
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
        const int64_t height = xs[2], width = xs[3], out_h = ys[2], out_w = ys[3];
        // The buffer holds input column ix at pad_w + ix, and -128 left and right of it as far as
        // any window reaches.
        const int64_t buffer_size = std::max(
            pad_[1] + width, (out_w - 1) * stride_[1] + (kernel_[1] - 1) * dilation_[1] + 1);
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            std::vector<int8_t> buffer(static_cast<size_t>(buffer_size), kLowest);
            int8_t* row_max = buffer.data() + pad_[1];
            std::vector<const int8_t*> rows(static_cast<size_t>(kernel_[0]));
            for (int64_t plane = begin; plane < end; ++plane) {
                const int8_t* x = io.input<int8_t>(0) + plane * height * width;
                int8_t* y = io.output<int8_t>(0) + plane * out_h * out_w;
                for (int64_t oy = 0; oy < out_h; ++oy, y += out_w) {
                    size_t count = 0;
                    for (int64_t ky = 0; ky < kernel_[0]; ++ky) {
                        const int64_t iy = oy * stride_[0] - pad_[0] + ky * dilation_[0];
                        if (iy >= 0 && iy < height) {
                            rows[count++] = x + iy * width;
                        }
                    }
                    if (count == 0) {
                        std::fill(row_max, row_max + width, kLowest);
                    } else {
                        vmax_.rows(rows.data(), count, width, row_max);
                    }
                    max_along_row(buffer.data(), out_w, y);
                }
            }
        });
    }

 private:
    void max_along_row(const int8_t* buffer, int64_t out_w, int8_t* y) const {
        for (int64_t ox = 0; ox < out_w; ++ox) {
            const int8_t* window = buffer + ox * stride_[1];
            int8_t best = window[0];
            for (int64_t kx = 1; kx < kernel_[1]; ++kx) {
                best = std::max(best, window[kx * dilation_[1]]);
            }
            y[ox] = best;
        }
    }

    const Int8VmaxUkernel& vmax_;
    int64_t kernel_[2], stride_[2], pad_[2], dilation_[2];  // (h, w)
};

template <const Int8VmaxUkernel& kVmax>
std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<MaxPool2dInt8Rows>(node, kVmax);
}

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const OpAlgo kMaxPool2dInt8RowsAvx512 = {"max_pool2d_int8_rows_avx512",
                                                IsaLevel::kAvx512Vnni, make<kInt8VmaxAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kMaxPool2dInt8RowsAvx2 = {"max_pool2d_int8_rows_avx2", IsaLevel::kAvx2,
                                              make<kInt8VmaxAvx2>};
#endif
extern const OpAlgo kMaxPool2dInt8Rows = {"max_pool2d_int8_rows", IsaLevel::kScalar,
                                          make<kInt8VmaxScalar>};

}  // namespace detail
}  // namespace qtk
