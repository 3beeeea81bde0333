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
// Work: one task per (sample, channel) plane, cut into bands of output rows (about kBandOutputs
// accumulators). A band's padded input rows are copied into an int8 buffer whose rows are the
// padded width W' (rounded up to a multiple of the stride s), split by row phase (padded row r in
// phase r % s), and each phase is packed into int16 pairs in one call, W' / s pairs a row. With
// rows laid end to end, output (oy, ox) of the band reads pair (oy + ky / s) W' / s + ox + 2p / s
// of phase ky % s: one micro-kernel call sums the whole band as one flat row of band_rows W' / s
// outputs, of which the W' / s - out_w last of each row are never stored (their lanes read the next
// row's pairs). The epilogue then requantizes the band's rows. Small planes (7x7, 14x14) are one
// band: one pack, one micro-kernel call and one epilogue call a plane, where a call per row would
// cost more than its sums.
#include <algorithm>
#include <cstring>

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

constexpr int64_t kBandOutputs = 2048;  // accumulators per band (row ends included), L1-sized

// n >= kChunk bytes from src to dst in moves of kChunk, the last one overlapping the one before.
template <int kChunk>
void copy_chunks(const int8_t* src, int64_t n, int8_t* dst) {
    for (int64_t i = 0; i + kChunk < n; i += kChunk) {
        std::memcpy(dst + i, src + i, kChunk);
    }
    std::memcpy(dst + n - kChunk, src + n - kChunk, kChunk);
}

// n bytes from src to dst: the rows here are a few to a few hundred bytes, where a library call
// costs more than the moves.
void copy_row(const int8_t* src, int64_t n, int8_t* dst) {
    if (n >= 16) {
        copy_chunks<16>(src, n, dst);
    } else if (n >= 8) {
        copy_chunks<8>(src, n, dst);
    } else if (n >= 4) {
        copy_chunks<4>(src, n, dst);
    } else {
        for (int64_t i = 0; i < n; ++i) {
            dst[i] = src[i];
        }
    }
}

// The bands of one layer and the scratch of one thread, in bytes: the padded int8 rows of a band
// (s phases of phase_rows rows of `width` bytes), their int16 pairs (s phases of phase_rows rows of
// width / s pairs, then the micro-kernel's overread), the band's accumulators.
struct BandLayout {
    int64_t width;       // W': padded input width rounded up to the stride
    int64_t row_pairs;   // W' / s: pairs a row, accumulators an output row
    int64_t band_rows;   // output rows a band
    int64_t phase_rows;  // padded input rows a phase of a band holds: band_rows + (k - 1) / s
    int64_t bytes_phase, pairs_phase, acc;  // sizes: int8 bytes, int32 pairs, int32 accumulators

    BandLayout(const Conv2dParams& p, int64_t in_w, int64_t out_h) {
        const int64_t s = p.stride_w;
        width = ceil_div(in_w + 2 * p.pad_w, s) * s;
        row_pairs = width / s;
        band_rows = std::max<int64_t>(1, std::min(out_h, kBandOutputs / row_pairs));
        phase_rows = band_rows + (p.kernel_h - 1) / s;
        // pack_pairs reads s (count - 1) + 2 bytes; the micro-kernel reads round_up(count, lanes) +
        // (k - 1) / s pairs from its last row's start: up to lanes - 1 + (k - 1) / s past the rows.
        bytes_phase = phase_rows * width + 2;
        pairs_phase = phase_rows * row_pairs + kDepthwiseMaxLanes + (p.kernel_h - 1) / s;
        acc = ceil_div(band_rows * row_pairs, kDepthwiseMaxLanes) * kDepthwiseMaxLanes;
    }

    // The int32 regions first, then the bytes.
    size_t bytes(const Conv2dParams& p) const {
        return size_t(4 * (p.stride_h * pairs_phase + acc) + p.stride_h * bytes_phase);
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

    size_t workspace_bytes(const std::vector<Shape>& input_shapes,
                           const std::vector<Shape>& output_shapes, int threads) const override {
        const BandLayout layout(params_, input_shapes[0][3], output_shapes[0][2]);
        return WorkspaceLayout{0, layout.bytes(params_), threads}.bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const BandLayout layout(params_, xs[3], (*io.output_shapes[0])[2]);
        const WorkspaceLayout workspace{0, layout.bytes(params_), pool.threads()};
        pool.parallel_for_slots(xs[0] * xs[1], [&](int64_t slot, int64_t begin, int64_t end) {
            uint8_t* scratch = workspace.slot(io.workspace, slot);
            // The pairs past the rows feed only lanes that are never stored: zero, not unread.
            std::fill(scratch, scratch + layout.bytes(params_), uint8_t{0});
            for (int64_t plane = begin; plane < end; ++plane) {
                run_plane(io, layout, plane, scratch);
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

    // Output rows [oy0, oy0 + rows) of one plane: its padded input rows into the phases' bytes,
    // packed, summed in one micro-kernel call, requantized.
    void run_band(const int8_t* x, int64_t height, int64_t width, int64_t c, int64_t oy0,
                  int64_t rows, const BandLayout& layout, uint8_t* scratch, int64_t out_w,
                  int8_t* y, const int8_t* residual) const {
        const Conv2dParams& p = params_;
        const int64_t s = p.stride_h, k = p.kernel_h;
        int32_t* pairs = reinterpret_cast<int32_t*>(scratch);
        int32_t* acc = pairs + s * layout.pairs_phase;
        int8_t* bytes = reinterpret_cast<int8_t*>(acc + layout.acc);
        std::fill(bytes, bytes + s * layout.bytes_phase,
                  static_cast<int8_t>(constants_.input_zero_point));
        // Padded row s oy0 + r, r < s (rows - 1) + k, is row r / s of phase r % s.
        for (int64_t r = 0; r < s * (rows - 1) + k; ++r) {
            const int64_t iy = s * oy0 + r - p.pad_h;
            if (iy >= 0 && iy < height) {
                copy_row(x + iy * width, width,
                         bytes + (r % s) * layout.bytes_phase + (r / s) * layout.width + p.pad_w);
            }
        }
        for (int64_t phase = 0; phase < s; ++phase) {
            pack_pairs_(bytes + phase * layout.bytes_phase, layout.phase_rows * layout.row_pairs,
                        s, pairs + phase * layout.pairs_phase);
        }
        const int32_t* row_starts[5];
        for (int64_t ky = 0; ky < k; ++ky) {
            row_starts[ky] = pairs + (ky % s) * layout.pairs_phase + (ky / s) * layout.row_pairs;
        }
        row_(row_starts, weight_pairs_.data() + c * k * ((k + 1) / 2), rows * layout.row_pairs,
             acc);
        // Every accumulator of the band in whole vectors, into the input bytes (packed already),
        // then the rows without their ends: a call per row of a few pixels would cost more.
        const int64_t count = rows * layout.row_pairs;
        epilogue_.requantize_rows(c, acc, count, 1, count, acc_init_[size_t(c)], bytes);
        for (int64_t r = 0; r < rows; ++r) {
            copy_row(bytes + r * layout.row_pairs, out_w, y + (oy0 + r) * out_w);
        }
        epilogue_.add_residual(y + oy0 * out_w, rows * out_w, 1, rows * out_w,
                               residual == nullptr ? nullptr : residual + oy0 * out_w);
    }

    void run_plane(const NodeIO& io, const BandLayout& layout, int64_t plane,
                   uint8_t* scratch) const {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t height = xs[2], width = xs[3], out_h = ys[2], out_w = ys[3];
        const int64_t c = plane % params_.out_channels;
        const int8_t* x = io.input<int8_t>(0) + plane * height * width;
        int8_t* y = io.output<int8_t>(0) + plane * out_h * out_w;
        const int8_t* residual =
            constants_.has_residual ? io.input<int8_t>(3) + plane * out_h * out_w : nullptr;
        for (int64_t oy0 = 0; oy0 < out_h; oy0 += layout.band_rows) {
            run_band(x, height, width, c, oy0, std::min(layout.band_rows, out_h - oy0), layout,
                     scratch, out_w, y, residual);
        }
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
