// conv2d int8 without groups, channels-last (NHWC, where the layout pass put the node:
// graph_passes.h), as an implicit GEMM: y[p][o] = requantize(sum over taps t and channels c of
// x[window pixel t of p][c] w[o][c][t] + bias[o] - z sum w[o]) (docs/quantization_spec.md section
// 4). In NHWC a pixel's input channels are one stretch of the GEMM's K row as they lie, one
// stretch per kernel tap, so no im2col is built: the micro-kernel reads each tap's pixels at the
// tap's offset. A pixel's output channels are one run of the output: requantization and a fused
// residual add go over whole pixels. The micro-kernel is per ISA (int8_gemm.h); this file, built
// with the baseline flags, packs the weights at load and cuts the work.
//
// The GEMM's rows are slots of a plane (SlotPlane): a 1x1 stride-1 conv without padding reads the
// input in place, one slot per pixel. Any other window reads a copy of the sample padded with the
// input zero point (so the padding adds z w, as the spec's padded input does) and split by the
// stride into phase planes (rows, then columns, by their remainder mod the stride): output pixel
// (oh, ow) is slot oh pitch + ow, and for every tap its input pixel lies at the slot's own index
// plus one offset per tap. Slots past the output row (ow >= OW, up to the pitch) are computed and
// dropped.
//
// Exact: the micro-kernel sums, in int32, products of int8 weights and int8 activations (AMX) or
// uint8 ones u = x + 128 (VNNI; one constant per channel, bias - (z + 128) sum w, turns their sum
// into the spec's accumulator); bytes read past a pixel's channels meet zero weights. |sum| <=
// K 255 127 < 2^31 by check_accumulator_range; integer sums do not depend on their order or on
// the threads.
//
// Work, per sample: the padded copy (rows split among the threads), then one task per tile of mr
// slots (and per part of the output channels where the tiles are few): every tile of nr output
// channels over it into an int32 block [mr][output channels], then the epilogue for those pixels
// and channels. In place, the micro-kernel reads 4 quads bytes from each
// pixel: where that would pass the end of the sample's plane (its last tiles), the tile's pixels
// are first copied into a zero-padded scratch; the padded copy has room for every tile.
#include <algorithm>
#include <cstring>
#include <vector>

#include "conv2d.h"
#include "conv2d_int8_epilogue.h"
#include "int8_gemm.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kWeightBlockQuads = 16;  // quads per block of the packed weights (int8_gemm.h)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool fits_pointwise(const Conv2dParams& p) { return p.pointwise() && p.groups == 1; }

// AMX's tile rows take 64 k: at K <= 32 zero padding does half its work or more (as for the NCHW
// GEMM, conv2d_int8_gemm.cpp); the VNNI kernel takes those layers.
bool fits_dense_amx(const Conv2dParams& p) { return p.groups == 1 && p.group_in_channels > 32; }

// Per thread: the tile's accumulators [mr][channels rounded up to nr], then the copy of mr pixels
// [mr][4 quads].
struct TileScratch {
    int64_t quads, c_stride, x_stride;

    TileScratch(const Conv2dParams& p, const Int8GemmNhwcUkernel& u)
        : quads(ceil_div(ceil_div(p.group_in_channels, 4), u.quad_block) * u.quad_block),
          c_stride(ceil_div(p.out_channels, u.nr) * u.nr),
          x_stride(4 * quads) {}

    size_t c_bytes(const Int8GemmNhwcUkernel& u) const { return size_t(u.mr * c_stride * 4); }
    size_t bytes(const Int8GemmNhwcUkernel& u) const {
        return c_bytes(u) + size_t(u.mr * x_stride);
    }
};

// Where one sample's GEMM rows lie (see the top of the file): the input itself, or the padded copy
// of stride_h x stride_w phase planes of phase_rows x pitch slots, x_stride bytes each.
struct SlotPlane {
    bool in_place;
    int64_t x_stride, phase_rows, pitch, slots, tiles;
    std::vector<int64_t> tap_offsets;  // bytes, per tap (kh, kw) in the weights' order
    int64_t copy_bytes;                // the copy's size: its planes and room for the last tile

    SlotPlane(const Conv2dParams& p, const TileScratch& scratch, int64_t mr, const Shape& xs,
              const Shape& ys)
        : in_place(p.pointwise()),
          x_stride(in_place ? xs[3] : scratch.x_stride),
          phase_rows(in_place ? xs[1] : ceil_div(xs[1] + 2 * p.pad_h, p.stride_h)),
          pitch(in_place ? xs[2] : ceil_div(xs[2] + 2 * p.pad_w, p.stride_w)),
          slots(ys[1] * pitch),
          tiles(ceil_div(slots, mr)),
          copy_bytes(0) {
        const int64_t phase_bytes = phase_rows * pitch * x_stride;
        for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
            for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
                const int64_t row = kh * p.dilation_h, col = kw * p.dilation_w;
                const int64_t phase = row % p.stride_h * p.stride_w + col % p.stride_w;
                tap_offsets.push_back(phase * phase_bytes +
                                      (row / p.stride_h * pitch + col / p.stride_w) * x_stride);
            }
        }
        if (!in_place) {
            const int64_t last_read = *std::max_element(tap_offsets.begin(), tap_offsets.end()) +
                                      (tiles * mr - 1) * x_stride;
            copy_bytes = std::max(p.stride_h * p.stride_w * phase_bytes,
                                  last_read + scratch.x_stride);
        }
    }
};

class Conv2dInt8GemmNhwc final : public Conv2dKernel {
 public:
    Conv2dInt8GemmNhwc(const NodeView& node, const Int8GemmNhwcUkernel& ukernel,
                       const Int8RequantizeUkernel& requantize, const Int8VaddUkernel& vadd)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kInt8, DType::kInt32)),
          ukernel_(ukernel),
          constants_(node, params_),
          epilogue_(constants_, requantize, vadd),
          scratch_(params_, ukernel) {
        if (params_.groups != 1 || !params_.nhwc) {  // the registry checks first
            node.fail("the channels-last GEMM kernel does not fit this conv2d");
        }
        pack_weights();
    }

    size_t workspace_bytes(const std::vector<Shape>& input_shapes,
                           const std::vector<Shape>& output_shapes, int threads) const override {
        return workspace(plane(input_shapes[0], output_shapes[0]), threads).bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const SlotPlane plane = this->plane(xs, ys);
        const WorkspaceLayout workspace = this->workspace(plane, pool.threads());
        for (int64_t n = 0; n < xs[0]; ++n) {
            const int8_t* x = io.input<int8_t>(0) + n * xs[1] * xs[2] * xs[3];
            if (!plane.in_place) {
                int8_t* copy = reinterpret_cast<int8_t*>(io.workspace);
                pool.parallel_for(params_.stride_h * params_.stride_w * plane.phase_rows,
                                  [&](int64_t begin, int64_t end) {
                                      copy_rows(x, xs, plane, begin, end, copy);
                                  });
                x = copy;
            }
            // Few tiles (small planes: resnet18's 7x7 layers have two): the channel tiles split
            // too, so every thread has work.
            const int64_t channel_tiles = scratch_.c_stride / ukernel_.nr;
            const int64_t parts = std::min(channel_tiles,
                                           ceil_div(4 * int64_t(pool.threads()), plane.tiles));
            pool.parallel_for_slots(plane.tiles * parts, [&](int64_t slot, int64_t begin,
                                                             int64_t end) {
                if (ukernel_.prepare != nullptr) {
                    ukernel_.prepare();
                }
                uint8_t* scratch = workspace.slot(io.workspace, slot);
                for (int64_t task = begin; task < end; ++task) {
                    const int64_t part = task % parts;
                    run_tile(io, n, x, plane, task / parts * ukernel_.mr,
                             part * channel_tiles / parts * ukernel_.nr,
                             (part + 1) * channel_tiles / parts * ukernel_.nr, scratch);
                }
            });
        }
    }

 private:
    SlotPlane plane(const Shape& xs, const Shape& ys) const {
        return SlotPlane(params_, scratch_, ukernel_.mr, xs, ys);
    }

    WorkspaceLayout workspace(const SlotPlane& plane, int threads) const {
        return WorkspaceLayout{size_t(plane.copy_bytes), scratch_.bytes(ukernel_), threads};
    }

    // Weights [O, K, KH, KW] -> per tile of nr output channels the micro-kernel's [taps]
    // [quad blocks][nr / 16][16][16][4] (zeros past K and O); and per channel
    // bias - (z + x_offset) sum(w).
    void pack_weights() {
        const int64_t k_count = params_.group_in_channels, nr = ukernel_.nr;
        const int64_t taps = params_.kernel_h * params_.kernel_w;
        const int64_t block_k = 4 * kWeightBlockQuads;
        const int64_t tap_bytes = weight_tap_bytes();
        packed_weights_.assign(size_t(scratch_.c_stride / nr * taps * tap_bytes), 0);
        acc_init_.resize(size_t(params_.out_channels));
        for (int64_t o = 0; o < params_.out_channels; ++o) {
            int8_t* tile = packed_weights_.data() + o / nr * taps * tap_bytes;
            const int8_t* w = constants_.weight + o * k_count * taps;
            int32_t sum = 0;
            for (int64_t k = 0; k < k_count; ++k) {
                for (int64_t t = 0; t < taps; ++t) {
                    const int64_t at =
                        t * tap_bytes +
                        ((k / block_k * (nr / 16) + o % nr / 16) * 16 + k % block_k / 4) * 64 +
                        o % 16 * 4 + k % 4;
                    tile[at] = w[k * taps + t];
                    sum += w[k * taps + t];
                }
            }
            const int32_t z = constants_.input_zero_point + ukernel_.x_offset;
            acc_init_[size_t(o)] = constants_.bias[size_t(o)] - z * sum;
        }
    }

    int64_t weight_tap_bytes() const {
        return ceil_div(scratch_.quads, kWeightBlockQuads) * kWeightBlockQuads * 4 * ukernel_.nr;
    }

    // Phase rows [begin, end) of the padded copy: the input's pixels where the window meets them,
    // the zero point on the padding, zeros in the channels up to x_stride.
    void copy_rows(const int8_t* x, const Shape& xs, const SlotPlane& plane, int64_t begin,
                   int64_t end, int8_t* copy) const {
        const int64_t height = xs[1], width = xs[2], channels = xs[3];
        const int64_t stride = plane.x_stride;
        const int8_t z = int8_t(constants_.input_zero_point);
        for (int64_t r = begin; r < end; ++r) {
            const int64_t phase = r / plane.phase_rows;
            const int64_t ih = r % plane.phase_rows * params_.stride_h +
                               phase / params_.stride_w - params_.pad_h;
            const int64_t first_col = phase % params_.stride_w - params_.pad_w;
            int8_t* out = copy + r * plane.pitch * stride;
            for (int64_t j = 0; j < plane.pitch; ++j, out += stride) {
                const int64_t iw = first_col + j * params_.stride_w;
                if (ih < 0 || ih >= height || iw < 0 || iw >= width) {
                    std::memset(out, z, size_t(channels));
                } else {
                    std::memcpy(out, x + (ih * width + iw) * channels, size_t(channels));
                }
                std::memset(out + channels, 0, size_t(stride - channels));
            }
        }
    }

    // Slots [first, first + mr) of sample n (fewer at the plane's end), output channels
    // [first_channel, end_channel) (fewer at the last channel).
    void run_tile(const NodeIO& io, int64_t n, const int8_t* x, const SlotPlane& plane,
                  int64_t first, int64_t first_channel, int64_t end_channel,
                  uint8_t* scratch) const {
        const int64_t in_channels = params_.group_in_channels, out_channels = params_.out_channels;
        end_channel = std::min(end_channel, out_channels);
        const int64_t slots = std::min<int64_t>(ukernel_.mr, plane.slots - first);
        int32_t* c = reinterpret_cast<int32_t*>(scratch);
        x += first * plane.x_stride;
        int64_t x_stride = plane.x_stride;
        // In place, the last row reads 4 quads bytes: copy where that passes the plane.
        if (plane.in_place && (first + ukernel_.mr - 1) * in_channels + scratch_.x_stride >
                                  plane.slots * in_channels) {
            int8_t* copy = reinterpret_cast<int8_t*>(scratch + scratch_.c_bytes(ukernel_));
            std::memset(copy, 0, size_t(ukernel_.mr * scratch_.x_stride));
            for (int64_t p = 0; p < slots; ++p) {
                std::memcpy(copy + p * scratch_.x_stride, x + p * in_channels, size_t(in_channels));
            }
            x = copy;
            x_stride = scratch_.x_stride;
        }
        const int64_t taps = int64_t(plane.tap_offsets.size());
        const int64_t tile_bytes = taps * weight_tap_bytes();
        for (int64_t o = first_channel; o < end_channel; o += ukernel_.nr) {
            ukernel_.run(x, x_stride, plane.tap_offsets.data(), taps, scratch_.quads,
                         packed_weights_.data() + o / ukernel_.nr * tile_bytes, c + o,
                         scratch_.c_stride);
        }
        // The tile's slots by output row: each row's slots before out_w are its pixels.
        const Shape& ys = *io.output_shapes[0];
        const int64_t out_w = ys[2];
        for (int64_t s = first; s < first + slots;) {
            const int64_t oh = s / plane.pitch, ow = s % plane.pitch;
            const int64_t run_end = plane.pitch == out_w ? first + slots
                                                          : std::min(first + slots,
                                                                     oh * plane.pitch + out_w);
            if (ow < out_w) {
                const int64_t at = ((n * ys[1] + oh) * out_w + ow) * out_channels + first_channel;
                epilogue_.pixels(first_channel,
                                 c + (s - first) * scratch_.c_stride + first_channel,
                                 scratch_.c_stride, run_end - s, end_channel - first_channel,
                                 acc_init_.data() + first_channel, io.output<int8_t>(0) + at,
                                 out_channels,
                                 constants_.has_residual ? io.input<int8_t>(3) + at : nullptr);
            }
            s = std::max(run_end, (oh + 1) * plane.pitch);
        }
    }

    const Int8GemmNhwcUkernel& ukernel_;
    const Conv2dInt8Constants constants_;
    const Conv2dInt8Epilogue epilogue_;
    const TileScratch scratch_;
    std::vector<int8_t> packed_weights_;
    std::vector<int32_t> acc_init_;  // per output channel: bias - (z + x_offset) sum(w)
};

template <const Int8GemmNhwcUkernel& kUkernel, const Int8RequantizeUkernel& kRequantize,
          const Int8VaddUkernel& kVadd>
std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<Conv2dInt8GemmNhwc>(node, kUkernel, kRequantize, kVadd);
}

// Per thread, the same for any plane: one tile of pixels (the padded copy is shared).
template <const Int8GemmNhwcUkernel& kUkernel>
size_t workspace(const Conv2dParams& p, int64_t) {
    return TileScratch(p, kUkernel).bytes(kUkernel);
}

}  // namespace

#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8GemmNhwc32x32Amx = {
    "conv2d_int8_gemm_nhwc_32x32_amx_int8", IsaLevel::kAmxInt8, fits_dense_amx,
    workspace<kInt8GemmNhwc32x32Amx>,
    make<kInt8GemmNhwc32x32Amx, kInt8RequantizeAvx512, kInt8VaddAvx512>, false, true};
#endif
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8GemmNhwc12x32Avx512Vnni = {
    "conv2d_int8_gemm_nhwc_12x32_avx512_vnni", IsaLevel::kAvx512Vnni, fits_pointwise,
    workspace<kInt8GemmNhwc12x32Avx512Vnni>,
    make<kInt8GemmNhwc12x32Avx512Vnni, kInt8RequantizeAvx512, kInt8VaddAvx512>, false, true};
#endif

}  // namespace detail
}  // namespace qtk
