// conv2d int8, 1x1 stride 1 without padding or groups, channels-last (NHWC, where the layout pass
// put the node: graph_passes.h): y[p][o] = requantize(sum over c of x[p][c] w[o][c] + bias[o] -
// z sum w[o]) (docs/quantization_spec.md section 4). In NHWC a pixel's input channels are the
// GEMM's K row as they lie, so the activations are read in place with no im2col and no packing,
// and a pixel's output channels are one run of the output: requantization and a fused residual
// add go over whole pixels. The micro-kernel is per ISA (int8_gemm.h); this file, built with the
// baseline flags, packs the weights at load and cuts the work.
//
// Exact: the micro-kernel sums, in int32, products of int8 weights and int8 activations (AMX) or
// uint8 ones u = x + 128 (VNNI; one constant per channel, bias - (z + 128) sum w, turns their sum
// into the spec's accumulator); bytes read past a pixel's channels meet zero weights. |sum| <=
// K 255 127 < 2^31 by check_accumulator_range; integer sums do not depend on their order or on
// the threads.
//
// Work: one task per tile of mr pixels of one sample: every tile of nr output channels over it
// into an int32 block [mr][output channels], then one epilogue call for the tile. The micro-kernel
// reads 4 quads bytes from each pixel: where that would pass the end of the sample's plane (its
// last tiles), the tile's pixels are first copied into a zero-padded scratch.
#include <algorithm>
#include <cstring>

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
bool fits_pointwise_amx(const Conv2dParams& p) {
    return fits_pointwise(p) && p.group_in_channels > 32;
}

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

class Conv2dInt8GemmNhwc final : public Conv2dKernel {
 public:
    Conv2dInt8GemmNhwc(const NodeView& node, const Int8GemmNhwcUkernel& ukernel,
                       const Int8RequantizeUkernel& requantize, const Int8VaddUkernel& vadd)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kInt8, DType::kInt32)),
          ukernel_(ukernel),
          constants_(node, params_),
          epilogue_(constants_, requantize, vadd),
          scratch_(params_, ukernel) {
        if (!fits_pointwise(params_) || !params_.nhwc) {  // the registry checks first
            node.fail("the channels-last 1x1 kernel does not fit this conv2d");
        }
        pack_weights();
    }

    size_t workspace_bytes(const std::vector<Shape>&, const std::vector<Shape>&,
                           int threads) const override {
        return WorkspaceLayout{0, scratch_.bytes(ukernel_), threads}.bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t plane_pixels = xs[1] * xs[2];
        const int64_t tiles = ceil_div(plane_pixels, ukernel_.mr);
        const WorkspaceLayout workspace{0, scratch_.bytes(ukernel_), pool.threads()};
        pool.parallel_for_slots(xs[0] * tiles, [&](int64_t slot, int64_t begin, int64_t end) {
            if (ukernel_.prepare != nullptr) {
                ukernel_.prepare();
            }
            uint8_t* scratch = workspace.slot(io.workspace, slot);
            for (int64_t task = begin; task < end; ++task) {
                run_tile(io, task / tiles, task % tiles * ukernel_.mr, plane_pixels, scratch);
            }
        });
    }

 private:
    // Weights [O, K] -> per tile of nr output channels the micro-kernel's [quad blocks][nr / 16]
    // [16][16][4] (zeros past K and O); and per channel bias - (z + x_offset) sum(w).
    void pack_weights() {
        const int64_t k_count = params_.group_in_channels, nr = ukernel_.nr;
        const int64_t block_k = 4 * kWeightBlockQuads;
        const int64_t tile_bytes = weight_tile_bytes();
        packed_weights_.assign(size_t(scratch_.c_stride / nr * tile_bytes), 0);
        acc_init_.resize(size_t(params_.out_channels));
        for (int64_t o = 0; o < params_.out_channels; ++o) {
            int8_t* tile = packed_weights_.data() + o / nr * tile_bytes;
            const int8_t* w = constants_.weight + o * k_count;
            int32_t sum = 0;
            for (int64_t k = 0; k < k_count; ++k) {
                const int64_t at =
                    ((k / block_k * (nr / 16) + o % nr / 16) * 16 + k % block_k / 4) * 64 +
                    o % 16 * 4 + k % 4;
                tile[at] = w[k];
                sum += w[k];
            }
            const int32_t z = constants_.input_zero_point + ukernel_.x_offset;
            acc_init_[size_t(o)] = constants_.bias[size_t(o)] - z * sum;
        }
    }

    int64_t weight_tile_bytes() const {
        return ceil_div(scratch_.quads, kWeightBlockQuads) * kWeightBlockQuads * 4 * ukernel_.nr;
    }

    // Pixels [first, first + mr) of sample n (fewer at the plane's end).
    void run_tile(const NodeIO& io, int64_t n, int64_t first, int64_t plane_pixels,
                  uint8_t* scratch) const {
        const int64_t in_channels = params_.group_in_channels, out_channels = params_.out_channels;
        const int64_t pixels = std::min<int64_t>(ukernel_.mr, plane_pixels - first);
        int32_t* c = reinterpret_cast<int32_t*>(scratch);
        const int8_t* x = io.input<int8_t>(0) + (n * plane_pixels + first) * in_channels;
        int64_t x_stride = in_channels;
        // The last row reads 4 quads bytes: copy where that passes the plane.
        if ((first + ukernel_.mr - 1) * in_channels + scratch_.x_stride >
            plane_pixels * in_channels) {
            int8_t* copy = reinterpret_cast<int8_t*>(scratch + scratch_.c_bytes(ukernel_));
            std::memset(copy, 0, size_t(ukernel_.mr * scratch_.x_stride));
            for (int64_t p = 0; p < pixels; ++p) {
                std::memcpy(copy + p * scratch_.x_stride, x + p * in_channels, size_t(in_channels));
            }
            x = copy;
            x_stride = scratch_.x_stride;
        }
        const int64_t tile_bytes = weight_tile_bytes();
        for (int64_t o = 0; o < out_channels; o += ukernel_.nr) {
            ukernel_.run(x, x_stride, scratch_.quads,
                         packed_weights_.data() + o / ukernel_.nr * tile_bytes, c + o,
                         scratch_.c_stride);
        }
        const int64_t at = (n * plane_pixels + first) * out_channels;
        epilogue_.pixels(0, c, scratch_.c_stride, pixels, out_channels, acc_init_.data(),
                         io.output<int8_t>(0) + at, out_channels,
                         constants_.has_residual ? io.input<int8_t>(3) + at : nullptr);
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

// The same for any plane: one tile of pixels per thread.
template <const Int8GemmNhwcUkernel& kUkernel>
size_t workspace(const Conv2dParams& p, int64_t) {
    return TileScratch(p, kUkernel).bytes(kUkernel);
}

}  // namespace

#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8GemmNhwc32x32Amx = {
    "conv2d_int8_gemm_nhwc_32x32_amx_int8", IsaLevel::kAmxInt8, fits_pointwise_amx,
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
