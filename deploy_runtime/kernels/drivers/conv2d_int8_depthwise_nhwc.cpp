// conv2d int8, depthwise: the geometry of fits_depthwise (conv2d_int8_depthwise.h) on channels-last
// rows, requantized inside the micro-kernel (depthwise_int8_nhwc.h: 4 rows' taps per vpdpbusd
// lane, the accumulators requantized in registers), so no int32 plane is written and read back.
// Exact: the micro-kernel's accumulators are the spec's, and it requantizes by the shared
// arithmetic (requantize_int8_avx512.h). This file, built with the baseline flags, packs the
// weights and per-channel constants at load and cuts the work.
//
// Channels-last (NHWC, where the layout pass put the node): the threads split the groups of R
// output rows of every sample; a group runs every block of 64 channels (the last, of at most 32,
// as pairs of pixels) in turn (blocks of one pixel share its cache lines), then the fused residual
// add, if any, over the rows' bytes while they are in cache.
//
// NCHW: per band of output rows of one block of one sample, the input rows it reads are
// transposed into channels-last rows of 64 bytes a pixel, the kernel writes the same form, and
// that is transposed back into the channel planes (bytes both ways, cheap next to the int32
// planes of the channel-vectorized kernel it replaced at AVX-512: benchmarks/README.md).
//
// AVX-512 VNNI only; AVX2 keeps conv2d_int8_depthwise.cpp and conv2d_int8_depthwise_channels.cpp.
#include <algorithm>
#include <array>

#include "../contracts/depthwise_int8_nhwc.h"
#include "conv2d_int8_depthwise.h"
#include "conv2d_int8_epilogue.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kBlock = kDepthwiseNhwcBlock;

class Conv2dInt8DepthwiseC64 final : public Conv2dInt8Kernel {
 public:
    Conv2dInt8DepthwiseC64(const NodeView& node, const Int8DepthwiseNhwcUkernel& ukernel,
                            const Int8EpilogueUkernels& epilogue)
        : Conv2dInt8Kernel(node, epilogue),
          rows_(ukernel.rows[params_.kernel_h == 5][params_.stride_h == 2]),
          transpose_(ukernel.transpose),
          group_rows_(depthwise_nhwc_rows(params_.kernel_h, params_.stride_h)),
          quads_(depthwise_nhwc_quads(params_.kernel_h, params_.stride_h)),
          out_(constants_.output_zero_point, constants_.clamp.lo, constants_.clamp.hi) {
        if (!fits_depthwise(params_)) {  // the registry checks first
            node.fail("the c64 depthwise kernel does not fit this conv2d");
        }
        pad_pixel_.fill(static_cast<int8_t>(constants_.input_zero_point));
        pack();
    }

    size_t workspace_bytes(const std::vector<Shape>& input_shapes,
                           const std::vector<Shape>& output_shapes, int threads) const override {
        if (params_.nhwc) {
            return 0;
        }
        return Bands(*this, input_shapes[0], output_shapes[0], threads).workspace.bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        if (!params_.nhwc) {
            run_nchw(io, pool, xs, ys);
            return;
        }
        const int64_t channels = params_.out_channels, out_w = ys[2];
        const int64_t groups = (ys[1] + group_rows_ - 1) / group_rows_;
        pool.parallel_for(ys[0] * groups, [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
                const int64_t n = task / groups, oy = task % groups * group_rows_;
                const int64_t out_rows = std::min(group_rows_, ys[1] - oy);
                const int64_t y_offset = (n * ys[1] + oy) * out_w * channels;
                for (int64_t c0 = 0; c0 < channels; c0 += kBlock) {
                    const BlockView view = {
                        io.input<int8_t>(0) + n * xs[1] * xs[2] * channels + c0, channels,
                        xs[2] * channels, 0, xs[1], xs[2],
                        io.output<int8_t>(0) + y_offset + c0, channels, out_w * channels};
                    run_group(view, c0 / kBlock, oy, out_rows, out_w);
                }
                const int64_t bytes = out_rows * out_w * channels;
                epilogue_.add_residual(io.output<int8_t>(0) + y_offset, bytes, 1, bytes,
                                       constants_.has_residual ? residual(io) + y_offset : nullptr);
            }
        });
    }

 private:
    // Per block of 64 channels, in the permuted order of depthwise_int8_nhwc.h: per output row of
    // a group, the weights' dwords of 4 input rows, and the init, multiplier and shift of each
    // channel.
    void pack() {
        const int64_t channels = params_.out_channels, k = params_.kernel_h, taps = k * k;
        const int64_t s = params_.stride_h, blocks = (channels + kBlock - 1) / kBlock;
        weights_.assign(size_t(blocks * block_weights()), 0);
        init_.assign(size_t(blocks * kBlock), 0);
        multiplier_.assign(size_t(blocks * kBlock), 0);
        shift_.assign(size_t(blocks * kBlock), kHighHalfMinShift);
        for (int64_t b = 0; b < blocks; ++b) {
            const bool pairs = pairs_block(b);
            for (int64_t e = 0; e < kBlock; ++e) {
                const int64_t c = b * kBlock + depthwise_nhwc_channel(e, pairs);
                if (c >= channels) {
                    continue;
                }
                const int8_t* w = constants_.weight + c * taps;
                int32_t sum = 0;
                for (int64_t t = 0; t < taps; ++t) {
                    sum += w[t];
                }
                for (int64_t r = 0; r < group_rows_; ++r) {
                    for (int64_t ky = 0; ky < k; ++ky) {  // input row s r + ky of the quads
                        const int64_t i = s * r + ky;
                        for (int64_t kx = 0; kx < k; ++kx) {
                            const int64_t dword = ((r * quads_ + i / 4) * k + kx) * kBlock + e;
                            weights_[size_t(b * block_weights() + dword * 4 + i % 4)] =
                                w[ky * k + kx];
                        }
                    }
                }
                const size_t i = size_t(b * kBlock + e);
                init_[i] = constants_.bias[size_t(c)] - (constants_.input_zero_point + 128) * sum;
                multiplier_[i] = constants_.multiplier[size_t(c)];
                shift_[i] = constants_.shift[size_t(c)];
            }
        }
    }

    int64_t block_weights() const { return group_rows_ * quads_ * params_.kernel_w * kBlock * 4; }

    // Whether block b holds two pixels of at most 32 channels (depthwise_int8_nhwc.h).
    bool pairs_block(int64_t b) const { return params_.out_channels - b * kBlock <= kBlock / 2; }

    // Where one block's channels-last rows lie: input row iy (0 <= iy < in_h; the others are
    // padding) at x + (iy - first_row) x_row, pixels x_pixel apart; output row oy of a group at
    // y + (oy - group's oy) y_row.
    struct BlockView {
        const int8_t* x;
        int64_t x_pixel, x_row, first_row, in_h, in_w;
        int8_t* y;
        int64_t y_pixel, y_row;
    };

    // Output rows [oy, oy + out_rows) of block b, out_rows <= R.
    void run_group(const BlockView& v, int64_t b, int64_t oy, int64_t out_rows,
                   int64_t out_w) const {
        const Conv2dParams& p = params_;
        const int64_t s = p.stride_h;
        DepthwiseNhwcRows a;
        for (int64_t i = 0; i < 4 * quads_; ++i) {
            const int64_t iy = s * oy + i - p.pad_h;
            const bool inside = iy >= 0 && iy < v.in_h;
            a.rows[i] = inside ? v.x + (iy - v.first_row) * v.x_row : pad_pixel_.data();
            a.pixel_strides[i] = inside ? v.x_pixel : 0;
        }
        a.in_w = v.in_w;
        a.pad_w = p.pad_w;
        a.out_w = out_w;
        a.stride = s;
        a.valid = std::min(kBlock, p.out_channels - b * kBlock);
        a.pairs = pairs_block(b);
        a.zero_point = constants_.input_zero_point;
        a.weights = weights_.data() + b * block_weights();
        a.init = init_.data() + b * kBlock;
        a.multiplier = multiplier_.data() + b * kBlock;
        a.shift = shift_.data() + b * kBlock;
        a.out = &out_;
        a.out_rows = out_rows;
        a.y = v.y;
        a.y_stride = v.y_pixel;
        a.y_row_stride = v.y_row;
        rows_(a);
    }

    // NCHW: a task is a band of output rows (whole groups) of one block of one sample. Its input
    // rows are transposed into channels-last rows of 64 bytes a pixel, its output computed into
    // the same form and transposed back into the channel planes; the band keeps both in about
    // 128 KB, and there are bands enough for the threads.
    struct Bands {
        int64_t rows, count;  // output rows per band (whole groups), bands per block
        int64_t in_bytes;     // of the transposed input rows
        WorkspaceLayout workspace;

        Bands(const Conv2dInt8DepthwiseC64& kernel, const Shape& xs, const Shape& ys,
              int threads) {
            const Conv2dParams& p = kernel.params_;
            const int64_t r = kernel.group_rows_, s = p.stride_h, k = p.kernel_h;
            const int64_t out_h = ys[2], in_w = xs[3], out_w = ys[3];
            const int64_t blocks = (p.out_channels + kBlock - 1) / kBlock;
            const int64_t fit = (kBandBytes / (in_w * kBlock) - k) / s + 1;  // output rows
            const int64_t tasks_wanted = (threads + ys[0] * blocks - 1) / (ys[0] * blocks);
            const int64_t split = (out_h + tasks_wanted - 1) / tasks_wanted;
            rows = std::max(r, std::min(fit, split) / r * r);
            count = (out_h + rows - 1) / rows;
            in_bytes = (s * (rows - 1) + k) * in_w * kBlock;
            workspace = {0, size_t(in_bytes + rows * out_w * kBlock), threads};
        }
    };
    static constexpr int64_t kBandBytes = 128 * 1024;

    void run_nchw(const NodeIO& io, ThreadPool& pool, const Shape& xs, const Shape& ys) const {
        const Conv2dParams& p = params_;
        const int64_t channels = p.out_channels, s = p.stride_h, k = p.kernel_h;
        const int64_t in_h = xs[2], in_w = xs[3], out_h = ys[2], out_w = ys[3];
        const int64_t blocks = (channels + kBlock - 1) / kBlock;
        const Bands bands(*this, xs, ys, pool.threads());
        pool.parallel_for_slots(ys[0] * blocks * bands.count, [&](int64_t slot, int64_t begin,
                                                                 int64_t end) {
            int8_t* x_rows = reinterpret_cast<int8_t*>(bands.workspace.slot(io.workspace, slot));
            int8_t* y_rows = x_rows + bands.in_bytes;
            for (int64_t task = begin; task < end; ++task) {
                const int64_t n = task / bands.count / blocks, b = task / bands.count % blocks;
                const int64_t oy0 = task % bands.count * bands.rows;
                const int64_t oy1 = std::min(out_h, oy0 + bands.rows);
                const int64_t c0 = b * kBlock, valid = std::min(kBlock, channels - c0);
                // The input rows the band reads, clipped to the input.
                const int64_t first = std::max<int64_t>(0, s * oy0 - p.pad_h);
                const int64_t last = std::min(in_h, s * (oy1 - 1) - p.pad_h + k);
                if (last > first) {
                    transpose_(io.input<int8_t>(0) + ((n * channels + c0) * in_h + first) * in_w,
                               in_h * in_w, valid, (last - first) * in_w, x_rows, kBlock);
                }
                for (int64_t oy = oy0; oy < oy1; oy += group_rows_) {
                    const BlockView view = {x_rows, kBlock, in_w * kBlock, first, in_h, in_w,
                                            y_rows + (oy - oy0) * out_w * kBlock, kBlock,
                                            out_w * kBlock};
                    run_group(view, b, oy, std::min(group_rows_, oy1 - oy), out_w);
                }
                const int64_t plane = out_h * out_w, offset = (n * channels + c0) * plane;
                int8_t* y = io.output<int8_t>(0) + offset + oy0 * out_w;
                transpose_(y_rows, kBlock, (oy1 - oy0) * out_w, valid, y, plane);
                if (constants_.has_residual) {  // the band's rows of each channel plane
                    epilogue_.add_residual(y, plane, valid, (oy1 - oy0) * out_w,
                                           residual(io) + offset + oy0 * out_w);
                }
            }
        });
    }

    const DepthwiseNhwcRowsFn rows_;
    void (*const transpose_)(const int8_t* src, int64_t src_stride, int64_t rows, int64_t cols,
                             int8_t* dst, int64_t dst_stride);
    const int64_t group_rows_, quads_;  // R and G of depthwise_int8_nhwc.h
    const Int8Output out_;
    std::array<int8_t, kBlock> pad_pixel_{};  // what a padding row reads: the input zero point
    std::vector<int8_t> weights_;             // [blocks][R][G][k][64][4]
    std::vector<int32_t> init_, multiplier_, shift_;  // [blocks][64]
};

// It requantizes by one multiplier per channel: not a fused PReLU's two sides.
bool fits_depthwise_one_side(const Conv2dParams& p) { return fits_depthwise(p) && !p.fused_prelu; }

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8DepthwiseC64Avx512Vnni = {
    "conv2d_int8_depthwise_c64_avx512_vnni", IsaLevel::kAvx512Vnni, fits_depthwise_one_side,
    make_kernel<Conv2dInt8DepthwiseC64, kInt8DepthwiseNhwcC64Avx512Vnni, kInt8EpilogueAvx512>};
extern const Conv2dAlgo kConv2dInt8DepthwiseNhwcC64Avx512Vnni = {
    "conv2d_int8_depthwise_nhwc_c64_avx512_vnni", IsaLevel::kAvx512Vnni, fits_depthwise_one_side,
    make_kernel<Conv2dInt8DepthwiseC64, kInt8DepthwiseNhwcC64Avx512Vnni, kInt8EpilogueAvx512>,
    false, true};
#endif

}  // namespace detail
}  // namespace qtk
