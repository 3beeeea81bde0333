// conv2d int8, depthwise, channels-last (NHWC, where the layout pass put the node): the geometry
// of fits_depthwise (conv2d_int8_depthwise.h), requantized inside the micro-kernel
// (depthwise_int8_nhwc.h: 4 rows' taps per vpdpbusd lane, the accumulators requantized in
// registers), so no int32 plane is written and read back. Exact: the micro-kernel's accumulators
// are the spec's, and it requantizes by the shared arithmetic (requantize_int8_avx512.h). This
// file, built with the baseline flags, packs the weights and per-channel constants at load and
// cuts the work.
//
// Work: the threads split the groups of R output rows (depthwise_int8_nhwc.h) of every sample; a
// group runs every block of 64 channels (the last, of at most 32, as pairs of pixels) in turn
// (blocks of one pixel share its cache lines), then the fused residual add, if any, over the
// rows' bytes while they are in cache.
//
// AVX-512 VNNI only: AVX2 has no channels-last 1x1 conv to neighbour it (graph_passes.h).
#include <algorithm>
#include <array>

#include "../x86/depthwise_int8_nhwc.h"
#include "conv2d_int8_depthwise.h"
#include "conv2d_int8_epilogue.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kBlock = kDepthwiseNhwcBlock;

class Conv2dInt8DepthwiseNhwc final : public Conv2dInt8Kernel {
 public:
    Conv2dInt8DepthwiseNhwc(const NodeView& node, const Int8DepthwiseNhwcUkernel& ukernel,
                            const Int8EpilogueUkernels& epilogue)
        : Conv2dInt8Kernel(node, epilogue),
          rows_(ukernel.rows[params_.kernel_h == 5][params_.stride_h == 2]),
          group_rows_(depthwise_nhwc_rows(params_.kernel_h, params_.stride_h)),
          quads_(depthwise_nhwc_quads(params_.kernel_h, params_.stride_h)),
          out_(constants_.output_zero_point, constants_.clamp.lo, constants_.clamp.hi) {
        if (!fits_depthwise(params_) || !params_.nhwc) {  // the registry checks first
            node.fail("the channels-last depthwise kernel does not fit this conv2d");
        }
        pad_pixel_.fill(static_cast<int8_t>(constants_.input_zero_point));
        pack();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t groups = (ys[1] + group_rows_ - 1) / group_rows_;
        pool.parallel_for(ys[0] * groups, [&](int64_t begin, int64_t end) {
            for (int64_t g = begin; g < end; ++g) {
                run_rows(io, xs, ys, g / groups, g % groups * group_rows_);
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

    // Output rows [oy, oy + R) of sample n (those below out_h), every block, then the residual
    // add.
    void run_rows(const NodeIO& io, const Shape& xs, const Shape& ys, int64_t n, int64_t oy) const {
        const Conv2dParams& p = params_;
        const int64_t channels = p.out_channels, s = p.stride_h;
        const int64_t in_h = xs[1], in_w = xs[2], out_w = ys[2];
        const int8_t* x = io.input<int8_t>(0) + n * in_h * in_w * channels;
        const int64_t y_offset = (n * ys[1] + oy) * out_w * channels;
        DepthwiseNhwcRows a;
        a.in_w = in_w;
        a.pad_w = p.pad_w;
        a.out_w = out_w;
        a.stride = s;
        a.zero_point = constants_.input_zero_point;
        a.out = &out_;
        a.out_rows = std::min(group_rows_, ys[1] - oy);
        a.y_stride = channels;
        a.y_row_stride = out_w * channels;
        for (int64_t c0 = 0, b = 0; c0 < channels; c0 += kBlock, ++b) {
            for (int64_t i = 0; i < 4 * quads_; ++i) {
                const int64_t iy = s * oy + i - p.pad_h;
                const bool inside = iy >= 0 && iy < in_h;
                a.rows[i] = inside ? x + iy * in_w * channels + c0 : pad_pixel_.data();
                a.pixel_strides[i] = inside ? channels : 0;
            }
            a.valid = std::min(kBlock, channels - c0);
            a.pairs = pairs_block(b);
            a.weights = weights_.data() + b * block_weights();
            a.init = init_.data() + b * kBlock;
            a.multiplier = multiplier_.data() + b * kBlock;
            a.shift = shift_.data() + b * kBlock;
            a.y = io.output<int8_t>(0) + y_offset + c0;
            rows_(a);
        }
        if (constants_.has_residual) {
            int8_t* y = io.output<int8_t>(0) + y_offset;
            epilogue_.add_residual(y, residual(io) + y_offset, a.out_rows * out_w * channels);
        }
    }

    const DepthwiseNhwcRowsFn rows_;
    const int64_t group_rows_, quads_;  // R and G of depthwise_int8_nhwc.h
    const Int8Output out_;
    std::array<int8_t, kBlock> pad_pixel_{};  // what a padding row reads: the input zero point
    std::vector<int8_t> weights_;             // [blocks][R][G][k][64][4]
    std::vector<int32_t> init_, multiplier_, shift_;  // [blocks][64]
};

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8DepthwiseNhwcC64Avx512Vnni = {
    "conv2d_int8_depthwise_nhwc_c64_avx512_vnni", IsaLevel::kAvx512Vnni, fits_depthwise,
    make_kernel<Conv2dInt8DepthwiseNhwc, kInt8DepthwiseNhwcC64Avx512Vnni, kInt8EpilogueAvx512>,
    false, true};
#endif

}  // namespace detail
}  // namespace qtk
