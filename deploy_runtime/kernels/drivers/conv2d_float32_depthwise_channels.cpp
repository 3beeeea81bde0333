// conv2d float32, depthwise (one input and one output channel per group), any window, stride,
// padding and dilation, NCHW, with 16 channels in the vector lanes (depthwise_float32_channels.h).
// The plane kernels (conv2d_float32_depthwise.cpp) put one channel's output pixels in the lanes:
// a 7x7 plane fills 7 of 16, and a stride of 2 first splits the plane into phases. Here every
// plane size fills the lanes and a stride is only a step of the addresses, for the price of
// transposing the inputs into a channels-last copy and the outputs back. The micro-kernel is per
// ISA; this file, built with the baseline flags, packs the weights at load and cuts the work.
//
// Each output is its bias plus its k*k products in the order (ky, kx), padding included as zeros,
// one fused multiply-add each: the bits of the plane kernels, for every thread count and batch.
//
// Work: one task per (sample, block of 16 channels, band of output rows); a band is about
// kBandPixels outputs (at least one row), so that its copy stays in L1 and L2 and the bands give
// the threads work to share on the small planes.
#include <algorithm>

#include "../contracts/depthwise_float32_channels.h"
#include "conv2d.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kLanes = kDepthwiseFloat32Lanes;
constexpr int64_t kBandPixels = 256;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool fits_depthwise_channels(const Conv2dParams& p) {
    return p.group_in_channels == 1 && p.out_channels == p.groups;
}

// The default except where the plane kernels' 3x3 block kernel fills its lanes well enough to pay
// less than the transposes: 3x3 undilated layers with outputs wider than 7 columns (at stride 2
// with at most 2 columns of padding, which the block kernel takes). Per layer
// against the plane kernels, 1 thread, Zen 5: 5x5 1.1-2.4x faster on every plane up to 56x56 (960
// channels 7x7 44.8 vs 106.4 us; 672 14x14 stride 2 49.8 vs 98.1); 3x3 on 7x7 35.2 vs 44.5 us; but
// 3x3 on 14x14 69.4 vs 64.9 us, 56x56 297.1 vs 211.3. At stride 2, once the block kernel split
// the columns in registers (Zen 4): 576 channels 14x14 45.8 vs 53.5 us, but 192 28x28 41.9 vs 31.8.
bool prefers_depthwise_channels(const Conv2dParams& p) {
    const bool block3x3 = p.kernel_h == 3 && p.kernel_w == 3 && p.dilation_h == 1 &&
                          p.dilation_w == 1 && p.stride_h == p.stride_w &&
                          (p.stride_w == 1 || p.pad_w <= p.stride_w);
    return !block3x3 || (p.out_w > 0 && p.out_w <= 7);
}

class Conv2dFloat32DepthwiseChannels final : public Conv2dKernel {
 public:
    Conv2dFloat32DepthwiseChannels(const NodeView& node, Float32DepthwiseChannelsFn band)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kFloat32, DType::kFloat32)),
          band_(band),
          constants_(node) {
        if (!fits_depthwise_channels(params_)) {  // the registry checks first
            node.fail("the depthwise kernel does not fit this conv2d");
        }
        // [blocks][taps][16] and [blocks][16], zeros past the last channel.
        const int64_t taps = params_.kernel_h * params_.kernel_w;
        const int64_t blocks = ceil_div(params_.out_channels, kLanes);
        weights_.assign(size_t(blocks * taps * kLanes), 0.0f);
        bias_.assign(size_t(blocks * kLanes), 0.0f);
        for (int64_t c = 0; c < params_.out_channels; ++c) {
            const int64_t block = c / kLanes, lane = c % kLanes;
            for (int64_t t = 0; t < taps; ++t) {
                weights_[size_t((block * taps + t) * kLanes + lane)] =
                    constants_.weight[size_t(c * taps + t)];
            }
            bias_[size_t(block * kLanes + lane)] = constants_.bias[size_t(c)];
        }
    }

    size_t workspace_bytes(const std::vector<Shape>& input_shapes,
                           const std::vector<Shape>& output_shapes, int threads) const override {
        const Float32DepthwiseChannelsBand band =
            args(input_shapes[0], output_shapes[0], 0, 0, nullptr);
        return WorkspaceLayout{0, size_t(band.scratch_floats()) * sizeof(float), threads}
            .bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const Float32DepthwiseChannelsBand full = args(xs, ys, 0, 0, nullptr);
        const WorkspaceLayout workspace{0, size_t(full.scratch_floats()) * sizeof(float),
                                        pool.threads()};
        const int64_t blocks = ceil_div(xs[1], kLanes), bands = ceil_div(ys[2], full.rows);
        pool.parallel_for_slots(xs[0] * blocks * bands, [&](int64_t slot, int64_t begin,
                                                            int64_t end) {
            float* scratch = reinterpret_cast<float*>(workspace.slot(io.workspace, slot));
            for (int64_t task = begin; task < end; ++task) {
                const int64_t band = task % bands, block = task / bands % blocks;
                const int64_t n = task / bands / blocks;
                const int64_t first_channel = n * xs[1] + block * kLanes;
                band_(args(xs, ys, block, band * full.rows, scratch,
                           io.input<float>(0) + first_channel * xs[2] * xs[3],
                           io.output<float>(0) + first_channel * ys[2] * ys[3]));
            }
        });
    }

 private:
    // Block `block`'s band from output row first_row (rows: kBandPixels' worth, fewer at the end).
    Float32DepthwiseChannelsBand args(const Shape& xs, const Shape& ys, int64_t block,
                                      int64_t first_row, float* scratch, const float* x = nullptr,
                                      float* y = nullptr) const {
        const Conv2dParams& p = params_;
        const int64_t band_rows =
            std::max<int64_t>(1, std::min(ys[2], kBandPixels / std::max<int64_t>(1, ys[3])));
        const int64_t taps = p.kernel_h * p.kernel_w;
        Float32DepthwiseChannelsBand a{};
        a.x = x;
        a.x_plane = xs[2] * xs[3];
        a.in_h = xs[2];
        a.in_w = xs[3];
        a.channels = std::min(kLanes, xs[1] - block * kLanes);
        a.kernel_h = p.kernel_h;
        a.kernel_w = p.kernel_w;
        a.stride_h = p.stride_h;
        a.stride_w = p.stride_w;
        a.dilation_h = p.dilation_h;
        a.dilation_w = p.dilation_w;
        a.pad_h = p.pad_h;
        a.pad_w = p.pad_w;
        a.weights = weights_.data() + block * taps * kLanes;
        a.bias = bias_.data() + block * kLanes;
        a.lo = constants_.bounds.lo;
        a.hi = constants_.bounds.hi;
        a.out_w = ys[3];
        a.first_row = first_row;
        a.rows = std::max<int64_t>(1, std::min(band_rows, ys[2] - first_row));
        a.y = y;
        a.y_plane = ys[2] * ys[3];
        a.scratch = scratch;
        return a;
    }

    const Float32DepthwiseChannelsFn band_;
    const Conv2dFloat32Constants constants_;
    std::vector<float> weights_, bias_;
};

}  // namespace
// AVX-512 F is all it needs; the lowest AVX-512 level this runtime detects is AVX-512 VNNI.
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dFloat32DepthwiseChannelsAvx512 = {
    "conv2d_float32_depthwise_channels_avx512", IsaLevel::kAvx512Vnni, fits_depthwise_channels,
    make_kernel<Conv2dFloat32DepthwiseChannels, kFloat32DepthwiseChannelsAvx512>, true, false,
    prefers_depthwise_channels};
#endif

}  // namespace detail
}  // namespace qtk
