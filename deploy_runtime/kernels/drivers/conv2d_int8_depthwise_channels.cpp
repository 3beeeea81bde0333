// conv2d int8, depthwise, vectorized over the L = 8 channels of one pixel at AVX2 (at AVX-512
// VNNI conv2d_int8_depthwise_nhwc.cpp serves both layouts): the geometry of
// conv2d_int8_depthwise.cpp (fits_depthwise), its accumulator constant bias - z sum w (a padded
// tap reads x = z) and its epilogue, so exact by construction. That kernel
// runs one vector of output pixels of one channel plane at a time, and on small planes (14x14, 7x7)
// pays per-row overhead and half-empty vectors; here the vector is L channels and a plane of any
// size fills it. The micro-kernels (depthwise_int8_channels.h) are per ISA; this file, built with
// the baseline flags, cuts the work and calls them.
//
// Work: one task per (sample, block of L channels, group of output rows); the last block's
// missing channels read zeros and are never stored. Output row oy reads the padded input rows
// s oy .. s oy + k - 1: each is transposed once into a pixel row (L channels per column, int32),
// padding columns set to z, into a ring of k rows. A band of output rows (about 256 pixels) sums
// into pixel-major accumulators, which transpose_out turns into L channel planes of the band: one
// epilogue call per channel then requantizes (and adds the residual to) the band's pixels, which
// are contiguous in the NCHW output. Channels-last layers have their own kernel
// (conv2d_int8_depthwise_nhwc.cpp), which needs neither transpose.
#include <algorithm>

#include "../contracts/depthwise_int8_channels.h"
#include "conv2d_int8_depthwise.h"
#include "conv2d_int8_epilogue.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxLanes = kDepthwiseChannelsMaxLanes;
constexpr int64_t kBandPixels = 256;  // output pixels per band, at least one row

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// The scratch of one thread, in int32: the ring of k pixel rows, the band's pixel-major
// accumulators, then its L channel planes.
struct BandLayout {
    int64_t lanes;      // L
    int64_t read_cols;  // padded input columns an output row reads: s (out_w - 1) + k
    int64_t row_cols;   // columns of a ring row: transpose_in rounds the input up to 16 more
    int64_t band_rows;  // output rows per band
    int64_t band_cap;   // accumulators per channel of a band, whole L x L transposes

    BandLayout(const Conv2dParams& p, int64_t lanes, int64_t out_w, int64_t out_h)
        : lanes(lanes),
          read_cols(p.stride_w * (out_w - 1) + p.kernel_w),
          row_cols(read_cols + 16),
          band_rows(std::max<int64_t>(1, std::min(out_h, kBandPixels / out_w))),
          band_cap(round_up(band_rows * out_w, lanes)) {}

    int64_t ring_words(const Conv2dParams& p) const { return p.kernel_h * row_cols * lanes; }
    size_t bytes(const Conv2dParams& p) const {
        return size_t((ring_words(p) + 2 * band_cap * lanes) * 4);
    }
};

class Conv2dInt8DepthwiseChannels final : public Conv2dInt8Kernel {
 public:
    Conv2dInt8DepthwiseChannels(const NodeView& node, const Int8DepthwiseChannelsUkernel& ukernel,
                                const Int8EpilogueUkernels& epilogue)
        : Conv2dInt8Kernel(node, epilogue),
          lanes_(ukernel.lanes),
          transpose_in_(ukernel.transpose_in),
          row_(ukernel.row[params_.kernel_h == 5][params_.stride_h == 2]),
          transpose_out_(ukernel.transpose_out),
          acc_init_(depthwise_acc_init(constants_, params_)) {
        if (!fits_depthwise(params_) || params_.nhwc) {  // the registry checks first
            node.fail("the depthwise kernel does not fit this conv2d");
        }
        pack_weights();
    }

    size_t workspace_bytes(const std::vector<Shape>&, const std::vector<Shape>& output_shapes,
                           int threads) const override {
        const Shape& ys = output_shapes[0];
        const int64_t out_h = ys[2], out_w = ys[3];
        return WorkspaceLayout{0, BandLayout(params_, lanes_, out_w, out_h).bytes(params_), threads}
            .bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        const int64_t out_h = ys[2], out_w = ys[3];
        const BandLayout layout(params_, lanes_, out_w, out_h);
        const WorkspaceLayout workspace{0, layout.bytes(params_), pool.threads()};
        // Row groups of about 4096 pixels: tasks for the threads on large planes, while the
        // k - s input rows a group shares with the next are transposed twice.
        const int64_t groups = std::min(out_h, std::max<int64_t>(1, out_h * out_w / 4096));
        const int64_t group_rows = ceil_div(out_h, groups);
        const int64_t row_groups = ceil_div(out_h, group_rows);
        const int64_t blocks = ceil_div(params_.out_channels, lanes_);
        pool.parallel_for_slots(
            ys[0] * blocks * row_groups, [&](int64_t slot, int64_t begin, int64_t end) {
                uint8_t* scratch = workspace.slot(io.workspace, slot);
                std::fill(scratch, scratch + layout.bytes(params_), uint8_t{0});
                for (int64_t task = begin; task < end; ++task) {
                    const int64_t block = task / row_groups % blocks;
                    const int64_t first = task % row_groups * group_rows;
                    run_rows(io, layout, task / row_groups / blocks, block * lanes_, first,
                             std::min(out_h, first + group_rows),
                             reinterpret_cast<int32_t*>(scratch));
                }
            });
    }

 private:
    // Weights [C, 1, k, k] -> per block of L channels, per tap, the L channels' (w, 0) pairs
    // (zeros past the last channel).
    void pack_weights() {
        const int64_t channels = params_.out_channels, taps = params_.kernel_h * params_.kernel_w;
        const int64_t lanes = lanes_;
        weight_pairs_.assign(size_t(round_up(channels, lanes) * taps), 0);
        for (int64_t c = 0; c < channels; ++c) {
            for (int64_t t = 0; t < taps; ++t) {
                const int16_t w = constants_.weight[c * taps + t];
                weight_pairs_[size_t(((c / lanes) * taps + t) * lanes + c % lanes)] =
                    int32_t(uint16_t(w));
            }
        }
    }

    // Where the input rows of one block of L channels of one sample lie: one plane per channel
    // (nullptr past the last channel).
    struct BlockInput {
        const int8_t* planes[kMaxLanes];
        int64_t valid, height, width;
    };

    // Padded input row `r` (input row r - pad_h, a padding row outside the input) of the block's
    // L channels into a ring row: columns [0, read_cols) of the padded row.
    void pack_row(const BlockInput& in, int64_t r, const BandLayout& layout, int32_t* row) const {
        const int32_t z = constants_.input_zero_point;
        const int64_t iy = r - params_.pad_h, pad = std::min(params_.pad_w, layout.read_cols);
        const int64_t count = std::max<int64_t>(0, std::min(in.width, layout.read_cols - pad));
        const int64_t lanes = lanes_;
        if (iy < 0 || iy >= in.height || count == 0) {
            std::fill(row, row + layout.read_cols * lanes, z);
            return;
        }
        const int8_t* channel_rows[kMaxLanes];
        for (int64_t c = 0; c < lanes; ++c) {
            channel_rows[c] = in.planes[c] == nullptr ? nullptr : in.planes[c] + iy * in.width;
        }
        transpose_in_(channel_rows, count, row + pad * lanes);
        std::fill(row, row + pad * lanes, z);
        std::fill(row + (pad + count) * lanes, row + layout.read_cols * lanes, z);
    }

    // Output rows [first, last) of channels [c0, c0 + L) of sample n.
    void run_rows(const NodeIO& io, const BandLayout& layout, int64_t n, int64_t c0, int64_t first,
                  int64_t last, int32_t* scratch) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t channels = p.out_channels;
        const int64_t out_h = ys[2], out_w = ys[3];
        const int64_t k = p.kernel_h, s = p.stride_h;
        const int64_t lanes = lanes_;
        BlockInput in;
        in.valid = std::min(lanes, channels - c0);
        in.height = xs[2];
        in.width = xs[3];
        const int64_t plane = in.height * in.width;
        for (int64_t c = 0; c < lanes; ++c) {
            in.planes[c] = c < in.valid ? io.input<int8_t>(0) + (n * channels + c0 + c) * plane
                                        : nullptr;
        }
        const int32_t* weights = weight_pairs_.data() + c0 * k * k;
        int32_t* ring = scratch;
        int32_t* acc = ring + layout.ring_words(p);      // [band_cap][L]
        int32_t* planes = acc + layout.band_cap * lanes;  // [L][band_cap]
        const int64_t ring_row = layout.row_cols * lanes;
        const int8_t* residual = this->residual(io);

        // Padded input row r lives in ring slot (r - s first) % k.
        int64_t next_row = s * first, next_slot = 0;
        for (int64_t band = first; band < last; band += layout.band_rows) {
            const int64_t band_end = std::min(last, band + layout.band_rows);
            for (int64_t oy = band; oy < band_end; ++oy) {
                for (; next_row < s * oy + k; ++next_row) {
                    pack_row(in, next_row, layout, ring + next_slot * ring_row);
                    next_slot = next_slot + 1 == k ? 0 : next_slot + 1;
                }
                const int32_t* rows[5];
                for (int64_t ky = 0; ky < k; ++ky) {
                    const int64_t slot = next_slot + ky;
                    rows[ky] = ring + (slot < k ? slot : slot - k) * ring_row;
                }
                row_(rows, weights, out_w, acc + (oy - band) * out_w * lanes);
            }
            const int64_t pixels = (band_end - band) * out_w;
            for (int64_t j = 0; j < pixels; j += lanes) {
                transpose_out_(acc + j * lanes, layout.band_cap, planes + j);
            }
            for (int64_t c = 0; c < in.valid; ++c) {
                const int64_t offset = ((n * channels + c0 + c) * out_h + band) * out_w;
                epilogue_.row(c0 + c, planes + c * layout.band_cap, acc_init_[size_t(c0 + c)],
                              pixels, io.output<int8_t>(0) + offset,
                              residual == nullptr ? nullptr : residual + offset);
            }
        }
    }

    const int64_t lanes_;
    void (*const transpose_in_)(const int8_t* const* channel_rows, int64_t count, int32_t* row);
    const DepthwiseChannelsRowFn row_;
    void (*const transpose_out_)(const int32_t* acc, int64_t stride, int32_t* planes);
    const std::vector<int32_t> acc_init_;  // per channel: bias - z * sum(w)
    std::vector<int32_t> weight_pairs_;    // [ceil(C / L)][k * k][L]
};

}  // namespace

#if QTK_X86_AVX2
extern const Conv2dAlgo kConv2dInt8DepthwiseC8Avx2 = {
    "conv2d_int8_depthwise_c8_avx2", IsaLevel::kAvx2, fits_depthwise,
    make_kernel<Conv2dInt8DepthwiseChannels, kInt8DepthwiseC8Avx2, kInt8EpilogueAvx2>};
#endif

}  // namespace detail
}  // namespace qtk
