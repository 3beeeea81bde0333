// avg_pool2d int8 where every window is whole (no padding, floor mode; NCHW): each window's sum
// S = sum (q - z) over kh * kw values and one divisor d for all (divisor_override or kh * kw), so
// spec 6's round_half_away(S / d) = sign(S) floor((2|S| + d) / (2d)) divides by one constant,
// which a multiply and shift do exactly (below) instead of a division per output. Other windows
// (padding, ceil mode, huge windows or divisors) take the reference's loop. Threads take planes.
// Portable; built with the baseline flags.
#include <algorithm>
#include <cstdint>

#include "beside_reference.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_avg_pool2d_int8_reference(const NodeView& node);

namespace {

// floor(n / D) = (n * M) >> 40 with M = ceil(2^40 / D), exact for n < 2^24 and D < 2^16:
// n M / 2^40 exceeds n / D by less than n / 2^40 < 2^-16 < 1 / D, the least distance from a
// non-integer n / D up to the next integer. n * M < 2^24 2^40 fits uint64.
struct ConstantDivisor {
    static constexpr int kShift = 40;
    static constexpr int64_t kMaxNumerator = int64_t{1} << 24, kMaxDivisor = int64_t{1} << 16;

    explicit ConstantDivisor(int64_t divisor)
        : multiplier(((uint64_t{1} << kShift) + uint64_t(divisor) - 1) / uint64_t(divisor)) {}
    int64_t quotient(int64_t n) const { return int64_t((uint64_t(n) * multiplier) >> kShift); }

    uint64_t multiplier;
};

class AvgPool2dInt8Windows final : public BesideReference {
 public:
    explicit AvgPool2dInt8Windows(const NodeView& node)
        : BesideReference(node, make_avg_pool2d_int8_reference),  // checks every attribute
          kernel_(node.ints("kernel", 2, 1, int64_t{1} << 31)),
          stride_(node.ints("stride", 2, 1, int64_t{1} << 31)),
          zero_point_(node.activation_input(0, DType::kInt8).zero_point) {
        const std::vector<int64_t> padding = node.ints("padding", 2, 0, int64_t{1} << 31);
        const bool ceil_mode =
            node.has_attr("ceil_mode") && node.int_scalar("ceil_mode", 0, 1) == 1;
        divisor_ = node.has_attr("divisor_override")
                       ? node.int_scalar("divisor_override", 1, (int64_t{1} << 31) - 1)
                       : kernel_[0] * kernel_[1];
        const int64_t window = kernel_[0] * kernel_[1];
        whole_windows_ = padding[0] == 0 && padding[1] == 0 && !ceil_mode &&
                         2 * divisor_ < ConstantDivisor::kMaxDivisor &&
                         2 * 255 * window + divisor_ < ConstantDivisor::kMaxNumerator;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        if (!whole_windows_) {
            reference_->run(io, pool);
            return;
        }
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t height = xs[2], width = xs[3], out_h = ys[2], out_w = ys[3];
        const int64_t kh = kernel_[0], kw = kernel_[1], sh = stride_[0], sw = stride_[1];
        const int32_t window_zero = int32_t(kh * kw) * zero_point_;
        const ConstantDivisor twice_divisor(2 * divisor_);
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int8_t* in = x + plane * height * width;
                int8_t* out = y + plane * out_h * out_w;
                for (int64_t oy = 0; oy < out_h; ++oy) {
                    for (int64_t ox = 0; ox < out_w; ++ox) {
                        const int8_t* corner = in + oy * sh * width + ox * sw;
                        int32_t sum = -window_zero;
                        for (int64_t ky = 0; ky < kh; ++ky) {
                            for (int64_t kx = 0; kx < kw; ++kx) {
                                sum += corner[ky * width + kx];
                            }
                        }
                        const int64_t magnitude =
                            twice_divisor.quotient(2 * int64_t(sum < 0 ? -sum : sum) + divisor_);
                        out[oy * out_w + ox] = static_cast<int8_t>(arith::clamp(
                            (sum < 0 ? -magnitude : magnitude) + zero_point_, arith::kInt8Min,
                            arith::kInt8Max));
                    }
                }
            }
        });
    }

 private:
    const std::vector<int64_t> kernel_, stride_;
    const int32_t zero_point_;
    int64_t divisor_ = 1;
    bool whole_windows_ = false;
};

}  // namespace

// Portable: every level has it; the reference is last in algo_lists/avg_pool2d_int8.inc.
extern const OpAlgo kAvgPool2dInt8Windows = {"avg_pool2d_int8_windows", IsaLevel::kScalar,
                                             make_kernel<AvgPool2dInt8Windows>};

}  // namespace detail
}  // namespace qtk
