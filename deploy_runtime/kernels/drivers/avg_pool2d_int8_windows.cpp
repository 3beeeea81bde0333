// avg_pool2d int8 where every window is whole (no padding, floor mode; NCHW): each window's sum
// S = sum (q - z) over kh * kw values and one divisor d for all (divisor_override or kh * kw), so
// spec 6's round_half_away(S / d) = sign(S) floor((2|S| + d) / (2d)) divides by one constant,
// which a multiply and shift do exactly (ConstantDivisor) instead of a division per output. Other
// windows (padding, ceil mode, kernels over 255 rows, huge windows or divisors) take the
// reference's loop.
//
// A plane at a time, in passes over whole rows: the kernel's input rows summed column by column
// into int16 (|sum| <= 128 kh < 2^15), one row of column sums per output row; those split into
// stride_w phases (column j of phase p is column j stride_w + p), so that the window of output
// column o sums phase kx % stride_w at column o + kx / stride_w for each kx, a run of consecutive
// columns per kx, in int32; then every window sum divided at once. Where stride_w divides the
// width, the phases of the plane's rows of column sums laid end to end are each row's phases end
// to end, so the last two passes go over the plane at once (resnet-style 2x2 pools of 7x7 or
// 14x14 planes are mostly row ends otherwise), computing and dropping the windows past each row's
// last; else row by row. SSE2 (every x86-64's baseline) takes the passes 16, 8 and 8 columns a
// step, over-reading rows into the next (within the input) and writing into buffers' slack; a
// plain loop takes the rest, and every column elsewhere. Threads take planes.
#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "beside_reference.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_avg_pool2d_int8_reference(const NodeView& node);

namespace {

constexpr int64_t kMaxKernelRows = 255;  // int16 column sums: 128 * 255 < 2^15

// floor(n / D) = (n * M) >> k for 0 <= n <= max_numerator < 2^31 and 1 <= D < 2^31, with k the
// bit length of max_numerator * D and M = ceil(2^k / D) = (2^k + e) / D, 0 <= e < D:
// n M / 2^k = n / D + n e / (D 2^k) exceeds n / D by less than n / 2^k < 1 / D, the least
// distance from a non-integer n / D up to the next integer. 2^k <= 2 max_numerator D keeps M
// below 2^32 and n * M below 2^63.
struct ConstantDivisor {
    static constexpr int64_t kMaxOperand = (int64_t{1} << 31) - 1;

    ConstantDivisor(int64_t divisor, int64_t max_numerator) {
        const uint64_t bound = uint64_t(max_numerator) * uint64_t(divisor);
        while (shift < 63 && (uint64_t{1} << shift) <= bound) {
            ++shift;
        }
        multiplier =
            uint32_t(((uint64_t{1} << shift) + uint64_t(divisor) - 1) / uint64_t(divisor));
    }
    int64_t quotient(int64_t n) const { return int64_t((uint64_t(n) * multiplier) >> shift); }

    uint32_t multiplier = 0;
    int shift = 0;
};

// sums[i] = sum over r < count of rows[r][i], i < width, in int16 (rows[r] ascending). Whole
// vectors while they stay before `end` (the input's), which may pass `width`: sums holds 15 more.
void sum_rows(const int8_t* const* rows, int64_t count, int64_t width,
              [[maybe_unused]] const int8_t* end, int16_t* sums) {
    int64_t i = 0;
#if defined(__SSE2__)
    for (; i < width && end - rows[count - 1] >= i + 16; i += 16) {
        __m128i vlo = _mm_setzero_si128(), vhi = _mm_setzero_si128();
        for (int64_t r = 0; r < count; ++r) {
            const __m128i vx = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + i));
            // bytes into the high halves of words, shifted down with their sign
            vlo = _mm_add_epi16(vlo, _mm_srai_epi16(_mm_unpacklo_epi8(vx, vx), 8));
            vhi = _mm_add_epi16(vhi, _mm_srai_epi16(_mm_unpackhi_epi8(vx, vx), 8));
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + i), vlo);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + i + 8), vhi);
    }
#endif
    for (; i < width; ++i) {
        int32_t sum = 0;
        for (int64_t r = 0; r < count; ++r) {
            sum += rows[r][i];
        }
        sums[i] = int16_t(sum);
    }
}

// phases[p * pitch + j] = sums[j * stride + p] for j stride + p < width.
void split_phases(const int16_t* sums, int64_t width, int64_t stride, int64_t pitch,
                  int16_t* phases) {
    int64_t j = 0;
#if defined(__SSE2__)
    if (stride == 2) {
        for (; 2 * j + 16 <= width; j += 8) {
            const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sums + 2 * j));
            const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sums + 2 * j + 8));
            // even words sign-extended in place, odd ones shifted down; the packs keep them
            // (each fits int16) in order
            const __m128i veven = _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(v0, 16), 16),
                                                  _mm_srai_epi32(_mm_slli_epi32(v1, 16), 16));
            const __m128i vodd = _mm_packs_epi32(_mm_srai_epi32(v0, 16), _mm_srai_epi32(v1, 16));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(phases + j), veven);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(phases + pitch + j), vodd);
        }
    }
#endif
    for (int64_t p = 0; p < stride; ++p) {
        for (int64_t c = j; c * stride + p < width; ++c) {
            phases[p * pitch + c] = sums[c * stride + p];
        }
    }
}

// windows[o] += row[o] for o < count, int16 into int32.
void add_run(const int16_t* row, int64_t count, int32_t* windows) {
    int64_t o = 0;
#if defined(__SSE2__)
    for (; o + 8 <= count; o += 8) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + o));
        __m128i* w = reinterpret_cast<__m128i*>(windows + o);
        _mm_storeu_si128(w, _mm_add_epi32(_mm_loadu_si128(w),
                                          _mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16)));
        _mm_storeu_si128(w + 1, _mm_add_epi32(_mm_loadu_si128(w + 1),
                                              _mm_srai_epi32(_mm_unpackhi_epi16(v, v), 16)));
    }
#endif
    for (; o < count; ++o) {
        windows[o] += row[o];
    }
}

// y[o] = clamp(z + sign(S) floor((2|S| + d) / (2d)), int8) of S = windows[o] (the window sum of
// q, less the window's z), o < count.
void divide_row(const int32_t* windows, int64_t count, int32_t divisor, int32_t zero_point,
                const ConstantDivisor& twice_divisor, int8_t* y) {
    int64_t o = 0;
#if defined(__SSE2__)
    const __m128i vd = _mm_set1_epi32(divisor), vz = _mm_set1_epi32(zero_point);
    const __m128i vm = _mm_set1_epi32(int32_t(twice_divisor.multiplier));
    const __m128i vk = _mm_cvtsi32_si128(twice_divisor.shift);
    // 4 sums to their rounded quotients: n = 2|S| + d; pmuludq multiplies the even dwords into
    // 64-bit products, and below 2^32 each quotient is the low dword of its shifted product.
    const auto quotients = [&](__m128i vs) {
        const __m128i vsign = _mm_srai_epi32(vs, 31);
        const __m128i vabs = _mm_sub_epi32(_mm_xor_si128(vs, vsign), vsign);
        const __m128i vn = _mm_add_epi32(_mm_add_epi32(vabs, vabs), vd);
        const __m128i veven = _mm_srl_epi64(_mm_mul_epu32(vn, vm), vk);
        const __m128i vodd = _mm_srl_epi64(_mm_mul_epu32(_mm_srli_epi64(vn, 32), vm), vk);
        const __m128i vq = _mm_or_si128(veven, _mm_slli_epi64(vodd, 32));
        return _mm_add_epi32(_mm_sub_epi32(_mm_xor_si128(vq, vsign), vsign), vz);
    };
    for (; o + 8 <= count; o += 8) {
        const __m128i* w = reinterpret_cast<const __m128i*>(windows + o);
        const __m128i v0 = quotients(_mm_loadu_si128(w)), v1 = quotients(_mm_loadu_si128(w + 1));
        // the saturating packs are the clamp to int8
        const __m128i vy = _mm_packs_epi16(_mm_packs_epi32(v0, v1), _mm_setzero_si128());
        _mm_storel_epi64(reinterpret_cast<__m128i*>(y + o), vy);
    }
#endif
    for (; o < count; ++o) {
        const int64_t sum = windows[o];
        const int64_t magnitude = twice_divisor.quotient(2 * (sum < 0 ? -sum : sum) + divisor);
        y[o] = static_cast<int8_t>(arith::clamp((sum < 0 ? -magnitude : magnitude) + zero_point,
                                                arith::kInt8Min, arith::kInt8Max));
    }
}

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
        // n = 2|S| + d with |S| <= 255 window
        const int64_t max_numerator = 2 * 255 * window + divisor_;
        whole_windows_ = padding[0] == 0 && padding[1] == 0 && !ceil_mode &&
                         kernel_[0] <= kMaxKernelRows &&
                         max_numerator <= ConstantDivisor::kMaxOperand &&
                         2 * divisor_ <= ConstantDivisor::kMaxOperand;
        if (whole_windows_) {
            twice_divisor_ = ConstantDivisor(2 * divisor_, max_numerator);
        }
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
        // Output rows whose column sums go through the last two passes together, the windows
        // each of them holds there (the last ones past out_w where they are the plane's), and
        // the columns per phase, with room for those windows' reads past the last column.
        const int64_t together = width % sw == 0 ? out_h : 1;
        const int64_t row_windows = together > 1 ? width / sw : out_w;
        const int64_t columns = together * width, windows = together * row_windows;
        const int64_t pitch = (columns + sw - 1) / sw + (kw - 1) / sw;
        const int32_t window_zero = int32_t(kh * kw) * zero_point_;
        const int8_t* x = io.input<int8_t>(0);
        const int8_t* x_end = x + element_count(xs);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            // slack: sum_rows' last vector passes `columns` by up to 15, and at stride 1 the
            // last row's dropped windows read kw - 1 past it
            std::vector<int16_t> sums(static_cast<size_t>(columns + std::max<int64_t>(15, kw)));
            std::vector<int16_t> phases(static_cast<size_t>(sw * pitch));
            std::vector<int32_t> window_sums(static_cast<size_t>(windows));
            std::vector<int8_t> bytes(static_cast<size_t>(windows));
            std::vector<const int8_t*> rows(static_cast<size_t>(kh));
            for (int64_t plane = begin; plane < end; ++plane) {
                const int8_t* in = x + plane * height * width;
                for (int64_t oy0 = 0; oy0 < out_h; oy0 += together) {
                    for (int64_t i = 0; i < together; ++i) {
                        for (int64_t r = 0; r < kh; ++r) {
                            rows[size_t(r)] = in + ((oy0 + i) * sh + r) * width;
                        }
                        sum_rows(rows.data(), kh, width, x_end, sums.data() + i * width);
                    }
                    const int16_t* split = sums.data();
                    if (sw > 1) {
                        split_phases(sums.data(), columns, sw, pitch, phases.data());
                        split = phases.data();
                    }
                    std::fill(window_sums.begin(), window_sums.end(), -window_zero);
                    for (int64_t kx = 0; kx < kw; ++kx) {
                        add_run(split + kx % sw * pitch + kx / sw, windows, window_sums.data());
                    }
                    divide_row(window_sums.data(), windows, int32_t(divisor_), zero_point_,
                               twice_divisor_, bytes.data());
                    for (int64_t i = 0; i < together; ++i) {
                        std::copy_n(bytes.data() + i * row_windows, out_w,
                                    y + (plane * out_h + oy0 + i) * out_w);
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
    ConstantDivisor twice_divisor_{1, 1};
};

}  // namespace

// Portable: every level has it; the reference is last in algo_lists/avg_pool2d_int8.inc.
extern const OpAlgo kAvgPool2dInt8Windows = {"avg_pool2d_int8_windows", IsaLevel::kScalar,
                                             make_kernel<AvgPool2dInt8Windows>};

}  // namespace detail
}  // namespace qtk
