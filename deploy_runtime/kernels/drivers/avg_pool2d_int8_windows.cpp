// avg_pool2d int8 where every window is whole (no padding, floor mode; NCHW): each window's sum
// S = sum (q - z) over kh * kw values and one divisor d for all (divisor_override or kh * kw), so
// spec 6's round_half_away(S / d) = sign(S) floor((2|S| + d) / (2d)) divides by one constant,
// which a multiply and shift do exactly (ConstantDivisor) instead of a division per output. Other
// windows (padding, ceil mode, kernels over 255 rows or 64 columns, huge windows or divisors) take the
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
// last; else row by row. The passes are avg_pool_int8.h's, AVX-512 where the CPU has it; the
// portable ones here take SSE2 (every x86-64's baseline) 16, 8 and 8 columns a step, over-reading
// rows into the next (within the input) and writing into buffers' slack, and a plain loop the
// rest, and every column elsewhere. Where the level has it, 2x2 windows at stride 2 take one pass
// instead (pool2x2: each row's pairs summed in registers; BiRealNet18's three shortcut pools 45 ->
// 34 us at 1 thread, Zen 4).
// Threads take planes.
#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../contracts/avg_pool_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_avg_pool2d_int8_reference(const NodeView& node);

namespace {

constexpr int64_t kMaxKernelRows = 255;  // int16 column sums: 128 * 255 < 2^15
constexpr int64_t kMaxKernelColumns = 64;  // window columns (runs) for the fast path
constexpr int64_t kBatchColumns = 8192;    // input columns per pass of joined planes

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

    uint32_t multiplier = 0;
    int shift = 0;
};

// The portable passes (avg_pool_int8.h's contracts).

// Whole vectors while they stay before `end`.
void sum_rows(const int8_t* x, int64_t width, int64_t kernel_rows, int64_t groups,
              int64_t group_pitch, [[maybe_unused]] const int8_t* end, int16_t* sums) {
    for (int64_t g = 0; g < groups; ++g, x += group_pitch, sums += width) {
        int64_t i = 0;
#if defined(__SSE2__)
        const int8_t* last = x + (kernel_rows - 1) * width;  // the rows' last, read furthest
        for (; i < width && end - last >= i + 16; i += 16) {
            __m128i vlo = _mm_setzero_si128(), vhi = _mm_setzero_si128();
            for (int64_t r = 0; r < kernel_rows; ++r) {
                const __m128i vx =
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + r * width + i));
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
            for (int64_t r = 0; r < kernel_rows; ++r) {
                sum += x[r * width + i];
            }
            sums[i] = int16_t(sum);
        }
    }
}

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

void divide_runs(const int16_t* const* runs, int64_t count_runs, int64_t count, int32_t offset,
                 const Int8PoolDivisor& d, int8_t* y) {
    int64_t o = 0;
#if defined(__SSE2__)
    const __m128i vd = _mm_set1_epi32(d.divisor), vz = _mm_set1_epi32(d.zero_point);
    const __m128i vm = _mm_set1_epi32(int32_t(d.multiplier));
    const __m128i vk = _mm_cvtsi32_si128(d.shift);
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
        __m128i v0 = _mm_set1_epi32(offset), v1 = v0;
        for (int64_t k = 0; k < count_runs; ++k) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(runs[k] + o));
            v0 = _mm_add_epi32(v0, _mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16));
            v1 = _mm_add_epi32(v1, _mm_srai_epi32(_mm_unpackhi_epi16(v, v), 16));
        }
        // the saturating packs are the clamp to int8
        const __m128i vy =
            _mm_packs_epi16(_mm_packs_epi32(quotients(v0), quotients(v1)), _mm_setzero_si128());
        _mm_storel_epi64(reinterpret_cast<__m128i*>(y + o), vy);
    }
#endif
    for (; o < count; ++o) {
        int64_t sum = offset;
        for (int64_t k = 0; k < count_runs; ++k) {
            sum += runs[k][o];
        }
        const int64_t magnitude = int64_t(
            (uint64_t(2 * (sum < 0 ? -sum : sum) + d.divisor) * d.multiplier) >> d.shift);
        y[o] = static_cast<int8_t>(arith::clamp((sum < 0 ? -magnitude : magnitude) + d.zero_point,
                                                arith::kInt8Min, arith::kInt8Max));
    }
}

const Int8AvgPoolUkernel kInt8AvgPoolPortable = {sum_rows, split_phases, divide_runs, nullptr};

class AvgPool2dInt8Windows final : public BesideReference {
 public:
    AvgPool2dInt8Windows(const NodeView& node, const Int8AvgPoolUkernel& passes)
        : BesideReference(node, make_avg_pool2d_int8_reference),  // checks every attribute
          passes_(passes),
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
                         kernel_[0] <= kMaxKernelRows && kernel_[1] <= kMaxKernelColumns &&
                         max_numerator <= ConstantDivisor::kMaxOperand &&
                         2 * divisor_ <= ConstantDivisor::kMaxOperand;
        if (whole_windows_) {
            const ConstantDivisor twice(2 * divisor_, max_numerator);
            divisor_plan_ = {int32_t(divisor_), zero_point_, twice.multiplier, twice.shift};
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
        const int64_t planes = xs[0] * xs[1];
        const int32_t window_zero = int32_t(kh * kw) * zero_point_;
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && passes_.pool2x2 != nullptr) {
            // An even height: the planes' pairs of rows follow one another alike, so a range of
            // planes is one call.
            const bool joined = height == 2 * out_h;
            pool.parallel_for(planes, [&](int64_t begin, int64_t end) {
                for (int64_t plane = begin; plane < end; plane = joined ? end : plane + 1) {
                    passes_.pool2x2(x + plane * height * width, width,
                                    (joined ? end - plane : 1) * out_h, -window_zero,
                                    divisor_plan_, y + plane * out_h * out_w);
                }
            });
            return;
        }
        // Output rows whose column sums go through the last two passes together: a plane's
        // (out_h where stride_w divides the width, else 1), or a batch of planes' where the
        // windows tile each plane's rows (height = out_h stride_h, which whole windows allow only
        // where kernel_h <= stride_h), so that the planes laid end to end are one image of their
        // output rows (a 7x7 plane's 2x2 pool is a few vectors: per-plane calls cost more than its
        // passes), of about kBatchColumns columns and at least 2 batches a thread.
        const bool planes_join = width % sw == 0 && height == out_h * sh;
        const int64_t batch_planes =
            !planes_join ? 1
                         : std::clamp<int64_t>(kBatchColumns / (height * width), 1,
                                               (planes + 2 * pool.threads() - 1) /
                                                   (2 * pool.threads()));
        const int64_t together = width % sw == 0 ? batch_planes * out_h : 1;
        // The windows each of those rows holds there (the last ones past out_w where they are
        // the plane's: computed, then dropped), and the columns per phase, with room for those
        // windows' reads past the last column.
        const int64_t row_windows = together > 1 ? width / sw : out_w;
        const int64_t columns = together * width;
        const int64_t pitch = (columns + sw - 1) / sw + (kw - 1) / sw;
        const bool in_place = row_windows == out_w;  // the windows are y's rows
        const int8_t* x_end = x + element_count(xs);
        // Output rows [row, row + rows) of the planes laid end to end, within a plane or planes'
        // whole rows.
        const auto pass = [&](int64_t row, int64_t rows, int16_t* sums, int16_t* phases,
                              int8_t* bytes) {
            const int64_t plane = row / out_h, oy = row % out_h;
            passes_.sum_rows(x + (plane * height + oy * sh) * width, width, kh, rows, sh * width,
                             x_end, sums);
            const int16_t* split = sums;
            if (sw > 1) {
                passes_.split_phases(sums, rows * width, sw, pitch, phases);
                split = phases;
            }
            const int16_t* runs[kMaxKernelColumns];
            for (int64_t kx = 0; kx < kw; ++kx) {
                runs[kx] = split + kx % sw * pitch + kx / sw;
            }
            int8_t* out = y + row * out_w;
            passes_.divide_runs(runs, kw, rows * row_windows, -window_zero, divisor_plan_,
                                in_place ? out : bytes);
            for (int64_t i = 0; i < rows && !in_place; ++i) {
                std::copy_n(bytes + i * row_windows, out_w, out + i * out_w);
            }
        };
        const int64_t passes = (planes * out_h + together - 1) / together;
        pool.parallel_for(passes, [&](int64_t begin, int64_t end) {
            // slack: sum_rows' last vector passes `columns` by up to 15, and at stride 1 the
            // last row's dropped windows read kw - 1 past it
            std::vector<int16_t> sums(static_cast<size_t>(columns + std::max<int64_t>(15, kw)));
            std::vector<int16_t> phases(static_cast<size_t>(sw * pitch));
            std::vector<int8_t> bytes(in_place ? 0 : static_cast<size_t>(together * row_windows));
            for (int64_t k = begin; k < end; ++k) {
                const int64_t row = k * together;
                pass(row, std::min(together, planes * out_h - row), sums.data(), phases.data(),
                     bytes.data());
            }
        });
    }

 private:
    const Int8AvgPoolUkernel& passes_;
    const std::vector<int64_t> kernel_, stride_;
    const int32_t zero_point_;
    int64_t divisor_ = 1;
    bool whole_windows_ = false;
    Int8PoolDivisor divisor_plan_{};
};

template <const Int8AvgPoolUkernel& kPasses>
std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<AvgPool2dInt8Windows>(node, kPasses);
}

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const OpAlgo kAvgPool2dInt8WindowsAvx512 = {"avg_pool2d_int8_windows_avx512",
                                                   IsaLevel::kAvx512Vnni,
                                                   make<kInt8AvgPoolAvx512>};
#endif
// Portable: every level has it; the reference is last in algo_lists/avg_pool2d_int8.inc.
extern const OpAlgo kAvgPool2dInt8Windows = {"avg_pool2d_int8_windows", IsaLevel::kScalar,
                                             make<kInt8AvgPoolPortable>};

}  // namespace detail
}  // namespace qtk
