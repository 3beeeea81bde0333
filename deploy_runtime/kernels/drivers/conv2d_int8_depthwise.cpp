// conv2d int8, depthwise (groups = input = output channels), 3x3 and 5x5, stride 1 and 2, any
// padding, dilation 1, on x86 at AVX2 and on aarch64 at NEON, NCHW (docs/quantization_spec.md
// section 4). The micro-kernels (depthwise_int8.h) and the epilogue (conv2d_int8_epilogue.h) are
// per ISA; this file, built with the baseline flags and no intrinsics, pads and packs the input
// rows and cuts the work.
//
// Exact by construction. The micro-kernels sum x w over every tap, padding included, where x = z;
// sum (x - z) w = sum x w - z sum w, so one constant per channel, bias - z sum w (computed at
// load), turns their sums into the spec's accumulator, and a padded tap adds (z - z) w = 0, as in
// the reference. |sum x w| and |z sum w| are at most 25 * 128 * 127: no int32 step overflows.
//
// Work: one task per (sample, channel) plane. Output row oy reads the padded input rows s oy to
// s oy + k - 1; each is packed into int16 pairs once, into a ring of k rows: straight from the
// input where both columns of a pair lie inside it, from z at the edges. The rows' accumulators
// go one after another into a plane buffer (a row's padding lanes are overwritten by the next
// row), which one epilogue call then requantizes: small planes (7x7, 14x14) spend most of their
// time in per-row overhead otherwise.
#include <algorithm>

#include "../contracts/depthwise_int8.h"
#include "conv2d_int8_depthwise.h"
#include "conv2d_int8_epilogue.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Two int8 as the int16 pair of depthwise_int8.h, `first` in the low half.
int32_t int16_pair(int8_t first, int8_t second) {
    return int32_t(uint16_t(first)) | int32_t(uint32_t(second) << 16);
}

// The scratch of one thread for output planes of `out_w` x `out_h` pixels (depthwise_int8.h's
// bounds): the ring of k pair rows, then the accumulators of the plane, the last row's padded to
// whole vectors.
struct RowLayout {
    int64_t acc;    // int32 accumulators of the plane
    int64_t pairs;  // int32 pairs of one packed input row: what the micro-kernel reads

    RowLayout(const Conv2dParams& p, int64_t out_w, int64_t plane_pixels)
        : acc(plane_pixels + kDepthwiseMaxLanes),
          pairs(ceil_div(out_w, kDepthwiseMaxLanes) * kDepthwiseMaxLanes +
                (p.kernel_w - 1) / p.stride_w) {}

    size_t bytes(const Conv2dParams& p) const { return size_t((p.kernel_h * pairs + acc) * 4); }
};

// Where pack_row reads the input row straight (pairs [first, last)) and which pairs it fills at
// all ([0, beyond)): shapes only, so computed once per run.
struct PairSpan {
    int64_t first, last, beyond;

    PairSpan(const Conv2dParams& p, int64_t width, int64_t count) {
        const int64_t s = p.stride_w, pad = p.pad_w;
        beyond = std::min(count, ceil_div(width + 2 * pad, s));
        first = std::min(beyond, ceil_div(pad, s));
        const int64_t span = width - 2 + pad;  // s (last - 1) <= span
        last = span < 0 ? first : std::max(first, std::min(beyond, span / s + 1));
    }
};

class Conv2dInt8Depthwise final : public Conv2dInt8Kernel {
 public:
    Conv2dInt8Depthwise(const NodeView& node, const Int8DepthwiseUkernel& ukernel,
                        const Int8EpilogueUkernels& epilogue)
        : Conv2dInt8Kernel(node, epilogue),
          pack_pairs_(ukernel.pack_pairs),
          row_(ukernel.row[params_.kernel_h == 5][params_.stride_h == 2]),
          acc_init_(depthwise_acc_init(constants_, params_)) {
        if (!fits_depthwise(params_)) {  // the registry checks first
            node.fail("the depthwise kernel does not fit this conv2d");
        }
        pack_weights();
    }

    size_t workspace_bytes(const std::vector<Shape>&, const std::vector<Shape>& output_shapes,
                           int threads) const override {
        const Shape& ys = output_shapes[0];
        return WorkspaceLayout{0, RowLayout(params_, ys[3], ys[2] * ys[3]).bytes(params_), threads}
            .bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const RowLayout layout(params_, ys[3], ys[2] * ys[3]);
        const PairSpan span(params_, xs[3], layout.pairs);
        const WorkspaceLayout workspace{0, layout.bytes(params_), pool.threads()};
        pool.parallel_for_slots(xs[0] * xs[1], [&](int64_t slot, int64_t begin, int64_t end) {
            uint8_t* scratch = workspace.slot(io.workspace, slot);
            std::fill(scratch, scratch + layout.bytes(params_), uint8_t{0});
            for (int64_t plane = begin; plane < end; ++plane) {
                run_plane(io, layout, span, plane, scratch);
            }
        });
    }

 private:
    // Weights [C, 1, k, k] -> per channel, per row, the int16 pairs (w[2p], w[2p + 1] or 0).
    void pack_weights() {
        const int64_t k = params_.kernel_h, pairs = (k + 1) / 2;
        weight_pairs_.resize(size_t(params_.out_channels * k * pairs));
        for (int64_t c = 0; c < params_.out_channels; ++c) {
            const int8_t* w = constants_.weight + c * k * k;
            int32_t* dst = weight_pairs_.data() + c * k * pairs;
            for (int64_t ky = 0; ky < k; ++ky) {
                for (int64_t p = 0; p < pairs; ++p) {
                    const int8_t w0 = w[ky * k + 2 * p];
                    const int8_t w1 = 2 * p + 1 < k ? w[ky * k + 2 * p + 1] : 0;
                    dst[ky * pairs + p] = int16_pair(w0, w1);
                }
            }
        }
    }

    // Pairs of one padded input row (x_row: the input row, nullptr for a padding row) into a ring
    // slot (PairSpan's `count` pairs). Pair j reads columns s j - pad_w and s j + 1 - pad_w: both
    // inside the row for j in [first, last). Outputs below out_w read columns below width + pad_w
    // only (and one more with a zero weight), so the pairs from `beyond` on, which start at or past
    // it, feed only vector lanes the epilogue drops: they keep whatever the slot holds (zeros at
    // first).
    void pack_row(const int8_t* x_row, int64_t width, const PairSpan& span,
                  int32_t* pairs) const {
        const int64_t s = params_.stride_w, pad = params_.pad_w;
        const int8_t z = static_cast<int8_t>(constants_.input_zero_point);
        const int64_t first = span.first, last = span.last, beyond = span.beyond;
        if (x_row == nullptr) {
            std::fill(pairs, pairs + beyond, int16_pair(z, z));
            return;
        }
        if (last > first) {
            pack_pairs_(x_row + s * first - pad, last - first, s, pairs + first);
        }
        const auto at = [&](int64_t column) {
            return column >= 0 && column < width ? x_row[column] : z;
        };
        for (int64_t j = 0; j < first; ++j) {
            pairs[j] = int16_pair(at(s * j - pad), at(s * j + 1 - pad));
        }
        for (int64_t j = last; j < beyond; ++j) {
            pairs[j] = int16_pair(at(s * j - pad), at(s * j + 1 - pad));
        }
    }

    void run_plane(const NodeIO& io, const RowLayout& layout, const PairSpan& span, int64_t plane,
                   uint8_t* workspace) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t height = xs[2], width = xs[3], out_h = ys[2], out_w = ys[3];
        const int64_t c = plane % p.out_channels, k = p.kernel_h, s = p.stride_h;
        const int8_t* x = io.input<int8_t>(0) + plane * height * width;
        int8_t* y = io.output<int8_t>(0) + plane * out_h * out_w;
        const int8_t* residual =
            constants_.has_residual ? io.input<int8_t>(3) + plane * out_h * out_w : nullptr;

        int32_t* ring = reinterpret_cast<int32_t*>(workspace);
        int32_t* acc = ring + k * layout.pairs;

        // Padded input row r lives in ring slot r % k (k >= s, so no row is skipped). next_row is
        // the first not packed yet, next_slot its slot.
        int64_t next_row = 0, next_slot = 0;
        for (int64_t oy = 0; oy < out_h; ++oy) {
            const int64_t top = s * oy;
            for (; next_row < top + k; ++next_row) {
                const int64_t iy = next_row - p.pad_h;
                pack_row(iy >= 0 && iy < height ? x + iy * width : nullptr, width, span,
                         ring + next_slot * layout.pairs);
                next_slot = next_slot + 1 == k ? 0 : next_slot + 1;
            }
            // Rows top .. top + k - 1, the last k packed, start at slot next_slot.
            const int32_t* rows[5];
            for (int64_t ky = 0; ky < k; ++ky) {
                const int64_t slot = next_slot + ky;
                rows[ky] = ring + (slot < k ? slot : slot - k) * layout.pairs;
            }
            row_(rows, weight_pairs_.data() + c * k * ((k + 1) / 2), out_w, acc + oy * out_w);
        }
        epilogue_.row(c, acc, acc_init_[c], out_h * out_w, y, residual);
    }

    void (*const pack_pairs_)(const int8_t* x, int64_t count, int64_t stride, int32_t* pairs);
    const DepthwiseRowFn row_;
    const std::vector<int32_t> acc_init_;  // per channel: bias - z * sum(w)
    std::vector<int32_t> weight_pairs_;    // [C][k][(k + 1) / 2]
};

}  // namespace

#if QTK_X86_AVX2
extern const Conv2dAlgo kConv2dInt8DepthwiseW8Avx2 = {
    "conv2d_int8_depthwise_w8_avx2", IsaLevel::kAvx2, fits_depthwise,
    make_kernel<Conv2dInt8Depthwise, kInt8DepthwiseW8Avx2, kInt8EpilogueAvx2>};
#endif
#if QTK_ARM_NEON
extern const Conv2dAlgo kConv2dInt8DepthwiseW16Neon = {
    "conv2d_int8_depthwise_w16_neon", IsaLevel::kNeon, fits_depthwise,
    make_kernel<Conv2dInt8Depthwise, kInt8DepthwiseW16Neon, kInt8EpilogueNeon>};
#endif

}  // namespace detail
}  // namespace qtk
