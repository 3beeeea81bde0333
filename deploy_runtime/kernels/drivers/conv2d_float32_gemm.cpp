// conv2d float32 as im2col + GEMM on x86, NCHW, any stride, padding, dilation and groups: the
// float part of a mixed-precision model. The GEMM micro-kernels are per ISA (gemm_float32.h); this
// file, built with the baseline flags, packs their operands and cuts the work.
//
// Not bit-exact with the reference, which rounds each product before adding it: here each output
// is its bias plus its K products in the order k = (ic, ky, kx), one fused multiply-add each.
// docs/design.md bounds the difference. The order depends on k alone, so neither the blocking nor
// the batch nor the threads change a bit.
//
// Work, as in conv2d_int8_gemm.cpp: where the conv pads, each input channel plane is first copied
// once into a zero-padded plane, so that im2col rows are plain copies with no bounds checks. The
// output pixels of each (sample, group) plane are cut into blocks whose im2col columns fit
// kBlockBytes (L2); a block is one thread-pool task: it packs its columns once, then runs every
// output-channel tile of the group over them. A pointwise conv (1x1, stride 1, no padding) packs
// nothing: the input planes are the GEMM's B rows as they are.
#include <algorithm>
#include <cstring>

#include "../x86/gemm_float32.h"
#include "conv2d.h"
#include "conv2d_padded_planes.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kBlockBytes = 256 * 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How one run cuts a plane of output pixels into tasks. More threads only make blocks smaller;
// the sums do not depend on it.
struct Blocking {
    int64_t tile_floats;  // one packed tile of nr pixels: K * nr
    int64_t tiles_per_block;
    int64_t blocks_per_plane;  // the last block may be shorter

    // One thread's packed block; a pointwise conv reads the input in place.
    size_t bytes_per_thread(const Conv2dParams& p) const {
        return p.pointwise() ? 0 : size_t(tiles_per_block * tile_floats) * sizeof(float);
    }
};

// Blocks of at most kBlockBytes (one tile at least), and enough of them that `planes` planes give
// every thread a task where the pixels allow.
Blocking make_blocking(const Conv2dParams& p, const Float32GemmUkernel& u, int64_t plane_pixels,
                       int64_t planes, int threads) {
    Blocking b;
    b.tile_floats = p.products_per_output() * u.nr;
    const int64_t plane_tiles = ceil_div(plane_pixels, u.nr);
    const int64_t max_tiles =
        std::max<int64_t>(1, kBlockBytes / (b.tile_floats * int64_t{sizeof(float)}));
    const int64_t blocks = std::max(ceil_div(plane_tiles, max_tiles),
                                    std::min(plane_tiles, ceil_div(threads, planes)));
    b.tiles_per_block = ceil_div(plane_tiles, blocks);
    b.blocks_per_plane = ceil_div(plane_tiles, b.tiles_per_block);
    return b;
}

// Per thread, for any thread count (one thread has the largest blocks).
size_t workspace_bytes(const Conv2dParams& p, const Float32GemmUkernel& u, int64_t plane_pixels) {
    return make_blocking(p, u, plane_pixels, 1, 1).bytes_per_thread(p);
}

// The zero-padded input planes (where the conv pads), then one slot per thread.
WorkspaceLayout workspace_layout(const Conv2dParams& p, const Float32GemmUkernel& u,
                                 const Shape& x_shape, const Shape& y_shape, int threads) {
    return {size_t(padded_input_elements(p, x_shape)) * sizeof(float),
            workspace_bytes(p, u, y_shape[2] * y_shape[3]), threads};
}

// Row k of the im2col matrix over output pixels [begin, begin + count) into a packed block: pixel
// i at packed[(i / nr) * tile_floats + i % nr]. `tap` is what row k reads for output pixel (0, 0)
// in its padded plane.
void pack_im2col_row(const float* tap, int64_t padded_w, int64_t out_w, const Conv2dParams& p,
                     int64_t begin, int64_t count, int64_t nr, int64_t tile_floats,
                     float* packed) {
    int64_t oy = begin / out_w, ox = begin % out_w;
    for (int64_t i = 0; i < count;) {
        const int64_t len = std::min({out_w - ox, count - i, nr - i % nr});  // one row, one tile
        const float* src = tap + oy * p.stride_h * padded_w + ox * p.stride_w;
        float* dst = packed + i / nr * tile_floats + i % nr;
        if (p.stride_w == 1) {
            std::memcpy(dst, src, size_t(len) * sizeof(float));
        } else {
            for (int64_t j = 0; j < len; ++j) {
                dst[j] = src[j * p.stride_w];
            }
        }
        i += len;
        ox += len;
        if (ox == out_w) {
            ox = 0;
            ++oy;
        }
    }
}

class Conv2dFloat32Gemm final : public Conv2dKernel {
 public:
    Conv2dFloat32Gemm(const NodeView& node, const Float32GemmUkernel& ukernel)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kFloat32, DType::kFloat32)),
          ukernel_(ukernel),
          constants_(node),
          oc_tiles_(ceil_div(params_.out_per_group(), ukernel.mr)) {
        pack_weights();
    }

    size_t workspace_bytes(const std::vector<Shape>& input_shapes,
                           const std::vector<Shape>& output_shapes, int threads) const override {
        return workspace_layout(params_, ukernel_, input_shapes[0], output_shapes[0], threads)
            .bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t planes = xs[0] * params_.groups;
        const Blocking b =
            make_blocking(params_, ukernel_, ys[2] * ys[3], planes, pool.threads());
        const WorkspaceLayout workspace =
            workspace_layout(params_, ukernel_, xs, ys, pool.threads());
        const float* x = io.input<float>(0);
        if (pads(params_)) {
            float* padded = reinterpret_cast<float*>(io.workspace);
            pad_planes(x, xs, params_, 0.0f, padded, pool);
            x = padded;
        }
        pool.parallel_for_slots(
            planes * b.blocks_per_plane, [&](int64_t slot, int64_t begin, int64_t end) {
                float* packed = reinterpret_cast<float*>(workspace.slot(io.workspace, slot));
                for (int64_t task = begin; task < end; ++task) {
                    run_block(io, x, b, task, packed);
                }
            });
    }

 private:
    // Weights [O, K] and bias [O] -> per group, per tile of mr output channels, [K][mr] and [mr],
    // zeros past the group's channels.
    void pack_weights() {
        const int64_t k_count = params_.products_per_output();
        const int64_t per_group = params_.out_per_group();
        const int mr = ukernel_.mr;
        packed_weights_.assign(size_t(params_.groups * oc_tiles_ * k_count * mr), 0.0f);
        packed_bias_.assign(size_t(params_.groups * oc_tiles_ * mr), 0.0f);
        for (int64_t oc = 0; oc < params_.out_channels; ++oc) {
            const int64_t tile = oc / per_group * oc_tiles_ + oc % per_group / mr;
            const int64_t row = oc % per_group % mr;
            for (int64_t k = 0; k < k_count; ++k) {
                packed_weights_[size_t((tile * k_count + k) * mr + row)] =
                    constants_.weight[size_t(oc * k_count + k)];
            }
            packed_bias_[size_t(tile * mr + row)] = constants_.bias[size_t(oc)];
        }
    }

    // `x`: the input, or its padded planes where the conv pads.
    void run_block(const NodeIO& io, const float* x, const Blocking& b, int64_t task,
                   float* packed) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t out_w = ys[3];
        const int64_t plane_pixels = ys[2] * out_w;
        const int64_t nr = ukernel_.nr;
        const int64_t plane = task / b.blocks_per_plane;
        const int64_t n = plane / p.groups, group = plane % p.groups;
        const int64_t begin = task % b.blocks_per_plane * b.tiles_per_block * nr;
        const int64_t count = std::min(plane_pixels - begin, b.tiles_per_block * nr);
        const int64_t padded_w = xs[3] + 2 * p.pad_w;
        const int64_t x_plane = (xs[2] + 2 * p.pad_h) * padded_w;
        const float* x_group = x + (n * xs[1] + group * p.group_in_channels) * x_plane;
        const int64_t k_count = p.products_per_output();

        const float* b_rows = x_group + begin;  // pointwise: the input planes are B's rows
        int64_t b_stride = plane_pixels, tile_step = nr;
        if (!p.pointwise()) {
            const int64_t taps = p.kernel_h * p.kernel_w;
            for (int64_t k = 0; k < k_count; ++k) {
                const int64_t ky = k % taps / p.kernel_w, kx = k % p.kernel_w;
                const float* tap = x_group + k / taps * x_plane + ky * p.dilation_h * padded_w +
                                   kx * p.dilation_w;
                pack_im2col_row(tap, padded_w, out_w, p, begin, count, nr, b.tile_floats,
                                packed + k * nr);
            }
            b_rows = packed;
            b_stride = nr;
            tile_step = b.tile_floats;
        }

        float* y = io.output<float>(0);
        const FloatBounds& bounds = constants_.bounds;
        const int64_t per_group = p.out_per_group();
        for (int64_t t = 0; t < oc_tiles_; ++t) {
            const int64_t tile = group * oc_tiles_ + t;
            const float* a = packed_weights_.data() + tile * k_count * ukernel_.mr;
            const float* bias = packed_bias_.data() + tile * ukernel_.mr;
            const int64_t oc0 = group * per_group + t * ukernel_.mr;
            const int64_t rows = std::min<int64_t>(ukernel_.mr, per_group - t * ukernel_.mr);
            float* y_tile = y + (n * p.out_channels + oc0) * plane_pixels + begin;
            for (int64_t first = 0; first < count; first += nr) {
                ukernel_.run(k_count, a, b_rows + first / nr * tile_step, b_stride, bias,
                             bounds.lo, bounds.hi, rows, std::min(nr, count - first),
                             y_tile + first, plane_pixels);
            }
        }
    }

    const Float32GemmUkernel& ukernel_;
    const Conv2dFloat32Constants constants_;
    const int64_t oc_tiles_;  // tiles of mr output channels per group
    std::vector<float> packed_weights_, packed_bias_;
};

}  // namespace

// AVX-512 F is all they need; the lowest AVX-512 level this runtime detects is AVX-512 VNNI.
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dFloat32Gemm8x32Avx512 = {
    "conv2d_float32_gemm_8x32_avx512", IsaLevel::kAvx512Vnni, fits_any_conv2d,
    make_kernel<Conv2dFloat32Gemm, kFloat32Gemm8x32Avx512>};
#endif
#if QTK_X86_AVX2
extern const Conv2dAlgo kConv2dFloat32Gemm6x16Avx2 = {
    "conv2d_float32_gemm_6x16_avx2", IsaLevel::kAvx2, fits_any_conv2d,
    make_kernel<Conv2dFloat32Gemm, kFloat32Gemm6x16Avx2>};
#endif

}  // namespace detail
}  // namespace qtk
