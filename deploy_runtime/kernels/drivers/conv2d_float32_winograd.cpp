// conv2d float32 as Winograd F(4x4, 3x3) on x86, NCHW, 3x3 kernels, stride 1, dilation 1, any
// padding and groups of at least kMinChannels input and output channels: the float part of a
// mixed-precision model. The transforms are per ISA (winograd_float32_f4x3.h), the 36 batched
// products per tile are the float32 GEMM micro-kernels (gemm_float32.h, zero bias, unbounded); this
// file, built with the baseline flags, lays out the input, cuts the work and packs the weights.
//
// Not the direct conv's summation: per output, bias + A^T [sum over channels of U . V] A with
// U = G g G^T (from the float weights in double, rounded once, at load) and V = B^T d B, each
// channel sum in channel order, one fused multiply-add each. docs/winograd.md ("Float Winograd
// F(4x4, 3x3)") bounds the difference from the exact conv. Every operation on one output is fixed
// by the math alone, so neither the blocking nor the batch nor the threads change a bit.
//
// Layout. Each run first copies every (sample, channel) input plane once into a zero-padded plane
// of 4 tiles_h + 2 rows split into 4 column phases of phase_w floats (column c at phase c % 4,
// index c / 4), so that the 6 columns of kLanes consecutive tiles are 6 unaligned vector loads.
// Tiles cover the output plane in raster order, 4x4 pixels each (the last row and column may reach
// past it; those pixels are computed and dropped).
//
// Work (conv2d_winograd_blocking.h): a task is a block of one plane's tiles and a range of
// output-channel tiles. It transforms its block's input into V [36][channels][v_row], which is the
// GEMMs' B operand as written; then per output-channel tile and per nr tiles, 36 GEMMs give M
// [36][mr][nr] and the output transform, fused with bias and bounds, writes 4 output rows per
// channel, copied into y while they are in cache.
#include <xmmintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "../contracts/gemm_float32.h"
#include "../contracts/winograd_float32_f4x3.h"
#include "conv2d.h"
#include "conv2d_winograd_blocking.h"
#include "planned_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kElements = kWinogradF4x3Elements;
// Channels per group, in and out: with fewer, the input and output transforms weigh about as much
// as the products they save (a floor chosen, not measured; depthwise layers have their own kernel).
constexpr int64_t kMinChannels = 4;
constexpr int64_t kSlack = kWinogradF4x3MaxLanes;  // a vector's overrun past a row's last tile

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool fits_winograd(const Conv2dParams& p) {
    return p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1 &&
           p.dilation_h == 1 && p.dilation_w == 1 && p.group_in_channels >= kMinChannels &&
           p.out_per_group() >= kMinChannels;
}

// The default where a sample's output has 16 tiles or more (13x13 and up). With fewer, the GEMM
// micro-kernel's tile rows run mostly empty and the transformed weights, 4x the weights' bytes,
// stream from memory for a few tiles each. resnet18 at 1 thread on Zen 4 (AVX-512), Winograd vs
// the GEMM per layer: 56x56 1.28 vs 2.17 ms, 28x28 1.20 vs 2.30, 14x14 1.75 vs 2.34, but 7x7
// (512 channels) 6.0 vs 2.5.
bool prefers_winograd(const Conv2dParams& p) {
    return ceil_div(p.out_h, 4) * ceil_div(p.out_w, 4) >= 16;
}

// The float32 Winograd algorithm of one ISA: its transforms and the GEMM of its products.
struct WinogradF4x3Ukernels {
    const WinogradF4x3Transforms& transforms;
    const Float32GemmUkernel& gemm;
};

int64_t max_block_tiles(int64_t channels, const Float32GemmUkernel& gemm) {
    return winograd_max_block_tiles(kElements * channels * 4, kWinogradL2BlockBytes, gemm.nr);
}

size_t block_v_bytes(int64_t channels, int64_t block_tiles) {
    return size_t(kElements * channels * (block_tiles + kSlack) * 4);
}

// One call's M [36][mr][nr], then its output rows [4][4 nr].
size_t m_bytes(const Float32GemmUkernel& gemm) {
    return WorkspaceLayout::aligned(size_t(kElements * gemm.mr * gemm.nr * 4));
}
size_t call_bytes(const Float32GemmUkernel& gemm) {
    return m_bytes(gemm) + size_t(4 * 4 * gemm.nr * 4);
}

// The phase planes of one run (header comment), from the input shape.
struct WinogradLayout {
    int64_t out_h, out_w, tiles_h, tiles_w, tiles;
    int64_t phase_w;         // tiles_w + 1 columns per phase, then a vector's overrun
    int64_t channel_floats;  // one channel's plane: 4 tiles_h + 2 rows of 4 phases

    WinogradLayout(const Conv2dParams& p, int64_t in_h, int64_t in_w)
        : out_h(in_h + 2 * p.pad_h - 2),
          out_w(in_w + 2 * p.pad_w - 2),
          tiles_h(ceil_div(out_h, 4)),
          tiles_w(ceil_div(out_w, 4)),
          tiles(tiles_h * tiles_w),
          phase_w(tiles_w + 1 + kSlack),
          channel_floats(rows() * row_floats()) {}

    int64_t rows() const { return 4 * tiles_h + 2; }
    int64_t row_floats() const { return 4 * phase_w; }
};

// Rows [row_begin, row_end) of one input channel's phase plane at dst (the padded input's rows),
// 0 around the input. Per row, 64 padded columns at a time go through a buffer (zeros where they
// are padding), and each 4 groups of 4 columns are one 4x4 transpose: row j of it is phase j's
// next 4 entries. (Column by column, with a division per float, the split took 2 of resnet18's
// 9.7 ms of float Winograd at 1 thread, Zen 5.)
void split_rows(const float* x, int64_t in_h, int64_t in_w, const Conv2dParams& p,
                const WinogradLayout& l, int64_t row_begin, int64_t row_end, float* dst) {
    constexpr int64_t kChunk = 64;  // padded columns, 16 groups
    std::fill(dst + row_begin * l.row_floats(), dst + row_end * l.row_floats(), 0.0f);
    const int64_t padded_end = p.pad_w + in_w;  // the input's columns end here
    alignas(16) float buffer[kChunk];
    const int64_t first_row = std::max<int64_t>(0, row_begin - p.pad_h);
    const int64_t end_row = std::min(in_h, row_end - p.pad_h);
    for (int64_t iy = first_row; iy < end_row; ++iy) {
        const float* in = x + iy * in_w;
        float* row = dst + (iy + p.pad_h) * l.row_floats();
        for (int64_t c0 = 0; c0 < padded_end; c0 += kChunk) {
            const int64_t first = std::max(c0, p.pad_w), end = std::min(c0 + kChunk, padded_end);
            std::fill(buffer, buffer + kChunk, 0.0f);
            std::memcpy(buffer + (first - c0), in + (first - p.pad_w),
                        size_t(end - first) * sizeof(float));
            const int64_t groups = ceil_div(end - c0, 4);
            for (int64_t g = 0; g < groups; g += 4) {  // group c0 / 4 + g onwards
                __m128 v0 = _mm_load_ps(buffer + 4 * g), v1 = _mm_load_ps(buffer + 4 * g + 4);
                __m128 v2 = _mm_load_ps(buffer + 4 * g + 8), v3 = _mm_load_ps(buffer + 4 * g + 12);
                _MM_TRANSPOSE4_PS(v0, v1, v2, v3);
                float* at = row + c0 / 4 + g;
                _mm_storeu_ps(at, v0);
                _mm_storeu_ps(at + l.phase_w, v1);
                _mm_storeu_ps(at + 2 * l.phase_w, v2);
                _mm_storeu_ps(at + 3 * l.phase_w, v3);
            }
        }
    }
}

class Conv2dFloat32Winograd final : public PlannedKernel<Conv2dFloat32Winograd, Conv2dKernel> {
    friend class PlannedKernel<Conv2dFloat32Winograd, Conv2dKernel>;

    // How a run with this input shape and thread count lays out and cuts its work: the phase
    // planes are the workspace's shared part; each thread's V block, M and output rows a slot.
    struct Plan {
        WinogradLayout layout;
        WinogradBlocking blocking;
        size_t v_bytes;
        WorkspaceLayout workspace;

        Plan(const Conv2dFloat32Winograd& k, const Shape& x_shape, int threads)
            : layout(k.params_, x_shape[2], x_shape[3]),
              blocking(make_winograd_blocking(
                  layout.tiles, max_block_tiles(k.params_.group_in_channels, k.ukernels_.gemm),
                  k.oc_tiles_, k.ukernels_.gemm.nr, x_shape[0] * k.params_.groups, threads)),
              v_bytes(WorkspaceLayout::aligned(
                  block_v_bytes(k.params_.group_in_channels, blocking.block_tiles))),
              workspace{size_t(x_shape[0] * x_shape[1] * layout.channel_floats * 4),
                        v_bytes + call_bytes(k.ukernels_.gemm), threads} {}
    };

 public:
    Conv2dFloat32Winograd(const NodeView& node, const WinogradF4x3Ukernels& ukernels)
        : PlannedKernel(node, read_conv2d_params(node, DType::kFloat32, DType::kFloat32)),
          ukernels_(ukernels),
          constants_(node),
          oc_tiles_(ceil_div(params_.out_per_group(), ukernels.gemm.mr)),
          zero_bias_(size_t(ukernels.gemm.mr), 0.0f) {
        require_fit(node, fits_winograd(params_), "the Winograd conv kernel");
        transform_weights();
    }

    void run_plan(const NodeIO& io, ThreadPool& pool, const Plan& plan) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const WinogradLayout& l = plan.layout;
        const WinogradBlocking& b = plan.blocking;
        const int64_t planes = xs[0] * p.groups;

        float* const d = reinterpret_cast<float*>(io.workspace);  // the phase planes
        const float* x = io.input<float>(0);
        // Band by band of 4 rows (a tile row's), every channel of a band before the next: each
        // thread splits the rows of the part of the plane that its tasks (blocks of tiles, in
        // order) then read, and that its tasks of the layer before wrote, so that less crosses
        // between cores (resnet18 fp32 at 2 threads, Zen 5, A/B in one process: 9.3 -> 8.8 ms
        // with the two vCPUs on one core complex, 13.9 -> 13.8 with them apart, where its
        // Winograd layers take 1.5-1.9x as long for reasons still open).
        const int64_t rows = l.rows(), bands = ceil_div(rows, 4);
        pool.parallel_for(xs[0] * bands * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
                const int64_t n = task / (bands * xs[1]), band = task / xs[1] % bands;
                const int64_t c = n * xs[1] + task % xs[1];
                split_rows(x + c * xs[2] * xs[3], xs[2], xs[3], p, l, 4 * band,
                           std::min(rows, 4 * band + 4), d + c * l.channel_floats);
            }
        });
        pool.parallel_for_slots(
            planes * b.blocks_per_plane * b.ranges, [&](int64_t slot, int64_t begin, int64_t end) {
                uint8_t* scratch = plan.workspace.slot(io.workspace, slot);
                float* v = reinterpret_cast<float*>(scratch);
                float* m = reinterpret_cast<float*>(scratch + plan.v_bytes);
                float* y = reinterpret_cast<float*>(scratch + plan.v_bytes +
                                                    m_bytes(ukernels_.gemm));
                for (int64_t task = begin; task < end; ++task) {
                    run_task(io, l, b, d, task, v, m, y);
                }
            });
    }

 private:
    // Weights [O, C/groups, 3, 3] -> U = G g G^T, G = [[1/4, 0, 0], [-1/6, -1/6, -1/6],
    // [-1/6, 1/6, -1/6], [1/24, 1/12, 1/6], [1/24, -1/12, 1/6], [0, 0, 1]], in double and rounded
    // once to float; packed per group and tile of mr output channels as [36][channels][mr] (the
    // GEMM's A), zeros past the group's channels.
    void transform_weights() {
        const Conv2dParams& p = params_;
        const int64_t per_group = p.out_per_group(), channels = p.group_in_channels;
        const int mr = ukernels_.gemm.mr;
        static constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                                            {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                            {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                            {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                            {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                            {0, 0, 1}};
        packed_u_.assign(size_t(p.groups * oc_tiles_ * kElements * channels * mr), 0.0f);
        for (int64_t oc = 0; oc < p.out_channels; ++oc) {
            const int64_t group = oc / per_group, in_group = oc % per_group;
            float* tile = packed_u_.data() +
                          (group * oc_tiles_ + in_group / mr) * kElements * channels * mr;
            for (int64_t c = 0; c < channels; ++c) {
                const float* g = constants_.weight.data() + (oc * channels + c) * 9;
                double gg[6][3];  // G g
                for (int i = 0; i < 6; ++i) {
                    for (int j = 0; j < 3; ++j) {
                        gg[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
                    }
                }
                for (int i = 0; i < 6; ++i) {
                    for (int j = 0; j < 6; ++j) {
                        const double u =
                            gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2];
                        tile[((6 * i + j) * channels + c) * mr + in_group % mr] =
                            static_cast<float>(u);
                    }
                }
            }
        }
    }

    void run_task(const NodeIO& io, const WinogradLayout& l, const WinogradBlocking& b,
                  const float* d, int64_t task, float* v, float* m, float* y) const {
        const Conv2dParams& p = params_;
        const Float32GemmUkernel& gemm = ukernels_.gemm;
        const WinogradF4x3Transforms& transforms = ukernels_.transforms;
        const int64_t channels = p.group_in_channels, per_group = p.out_per_group();
        const int64_t range = task % b.ranges, block = task / b.ranges % b.blocks_per_plane;
        const int64_t plane = task / b.ranges / b.blocks_per_plane;
        const int64_t n = plane / p.groups, group = plane % p.groups;
        const int64_t first = block * b.block_tiles;
        const int64_t count = std::min(b.block_tiles, l.tiles - first);
        const int64_t v_row = b.block_tiles + kSlack, v_element = channels * v_row;

        // V of the block, one tile row's run of tiles at a time (a run's vector overrun lands on
        // the next run's tiles, written after it, or in the row's slack).
        const float* d_plane = d + plane * channels * l.channel_floats;
        for (int64_t c = 0; c < channels; ++c) {
            for (int64_t t = first; t < first + count;) {
                const int64_t ty = t / l.tiles_w, tx = t % l.tiles_w;
                const int64_t run = std::min(first + count - t, l.tiles_w - tx);
                transforms.input(d_plane + c * l.channel_floats + 4 * ty * l.row_floats() + tx,
                                 l.row_floats(), l.phase_w, run, v + c * v_row + (t - first),
                                 v_element);
                t += run;
            }
        }

        float* out = io.output<float>(0);
        const FloatBounds& bounds = constants_.bounds;
        const float inf = std::numeric_limits<float>::infinity();
        const int mr = gemm.mr, nr = gemm.nr;
        const int64_t first_tile = range * b.tiles_per_range;
        const int64_t end_tile = std::min(oc_tiles_, first_tile + b.tiles_per_range);
        for (int64_t t = first_tile; t < end_tile; ++t) {
            const float* u = packed_u_.data() + (group * oc_tiles_ + t) * kElements * channels * mr;
            const int64_t tile_rows = std::min<int64_t>(mr, per_group - t * mr);
            for (int64_t g = 0; g < count; g += nr) {
                const int64_t cols = std::min<int64_t>(nr, count - g);
                for (int64_t e = 0; e < kElements; ++e) {
                    gemm.run_strided(channels, u + e * channels * mr, v + e * v_element + g,
                                     v_row, zero_bias_.data(), -inf, inf, tile_rows, cols,
                                     m + e * mr * nr, nr);
                }
                for (int64_t r = 0; r < tile_rows; ++r) {
                    const int64_t oc = group * per_group + t * mr + r;
                    transforms.output(m + r * nr, mr * nr, cols, constants_.bias[size_t(oc)],
                                      bounds.lo, bounds.hi, y, 4 * nr);
                    // Each run of tiles within one tile row is four output row segments.
                    for (int64_t tile = first + g; tile < first + g + cols;) {
                        const int64_t ty = tile / l.tiles_w, tx = tile % l.tiles_w;
                        const int64_t run = std::min(first + g + cols - tile, l.tiles_w - tx);
                        const int64_t pixels = std::min(4 * run, l.out_w - 4 * tx);
                        for (int64_t row = 0; row < 4 && 4 * ty + row < l.out_h; ++row) {
                            const int64_t at =
                                ((n * p.out_channels + oc) * l.out_h + 4 * ty + row) * l.out_w +
                                4 * tx;
                            std::memcpy(out + at, y + row * 4 * nr + 4 * (tile - first - g),
                                        size_t(pixels) * sizeof(float));
                        }
                        tile += run;
                    }
                }
            }
        }
    }

    const WinogradF4x3Ukernels& ukernels_;
    const Conv2dFloat32Constants constants_;
    const int64_t oc_tiles_;              // tiles of mr output channels per group
    const std::vector<float> zero_bias_;  // the GEMMs' bias: M is a plain sum
    std::vector<float> packed_u_;         // U per group and tile: [36][channels][mr]
};

#if QTK_X86_AVX512_VNNI
const WinogradF4x3Ukernels kAvx512 = {kWinogradF4x3Avx512, kFloat32Gemm8x32Avx512};
#endif
#if QTK_X86_AVX2
const WinogradF4x3Ukernels kAvx2 = {kWinogradF4x3Avx2, kFloat32Gemm6x16Avx2};
#endif

}  // namespace

// AVX-512 F is all it needs; the lowest AVX-512 level this runtime detects is AVX-512 VNNI.
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dFloat32WinogradF4x3Avx512 = {
    "conv2d_float32_winograd_f4x3_8x32_avx512", IsaLevel::kAvx512Vnni, fits_winograd,
    make_kernel<Conv2dFloat32Winograd, kAvx512>, true, false, prefers_winograd};
#endif
#if QTK_X86_AVX2
extern const Conv2dAlgo kConv2dFloat32WinogradF4x3Avx2 = {
    "conv2d_float32_winograd_f4x3_6x16_avx2", IsaLevel::kAvx2, fits_winograd,
    make_kernel<Conv2dFloat32Winograd, kAvx2>, true, false, prefers_winograd};
#endif

}  // namespace detail
}  // namespace qtk
