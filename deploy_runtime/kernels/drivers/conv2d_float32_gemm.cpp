// conv2d float32 as an implicit GEMM on x86, NCHW, any stride, padding, dilation and groups: the
// float part of a mixed-precision model. The GEMM micro-kernels are per ISA (gemm_float32.h); this
// file, built with the baseline flags, lays out their operands and cuts the work.
//
// Not bit-exact with the reference, which rounds each product before adding it: here each output
// is its bias plus its K products in the order k = (ic, ky, kx), one fused multiply-add each.
// docs/design.md bounds the difference. The order depends on k alone, so neither the blocking nor
// the batch nor the threads change a bit (a K split stores and reloads exact partial sums).
//
// Operands. A is the weights, packed at load per tile of mr output channels as [K][mr]. B is never
// copied: the input's phase planes (conv2d_phase_planes.h; the input itself at stride 1 without
// padding) hold every tap's row for a plane's outputs in wide order, so B row k of a tile is its
// channel's phases at the tap's offset, and the micro-kernel reads it through a table of K offsets.
// An im2col copy would move K times the input through memory; the phases move it once. Where wide
// order has columns past the output rows (a window wider than 1 column), a block's results go to a
// per-thread buffer and its real columns to y, unless each output row is taken on its own; else
// straight to y. Small planes, which nr columns would fill badly, take the micro-kernel's pixel
// rows instead (run_pixels, where the ISA has it: output channels in the lanes, pixels broadcast,
// same sums), which it transposes into y.
//
// Work. A task is one (sample, group) plane's block of wide outputs (or of output rows) and a part
// of its output-channel tiles. Blocks are cut so that the B rows of one K chunk stay in L2 while
// every tile of the part runs over them; K is cut into chunks of at most kMaxKChunk so that the A
// chunk stays in L1 while the block's pixel tiles run. Output-channel parts give a second thread
// work where one plane has few blocks (a 7x7 plane is two tiles), and keep the split even where
// its last tile is short; not where all the weights are as small as an A chunk and the blocks can
// keep each thread to its own rows (a stem, its phases built in bands of rows) or columns (wide
// order is y's order: 1x1 convs): there the threads take the blocks.
#include <algorithm>
#include <limits>

#include "../contracts/gemm_float32.h"
#include "conv2d.h"
#include "conv2d_phase_planes.h"
#include "planned_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxKChunk = 512;          // an A chunk of 16 KiB at mr 8: half of a 32 KiB L1
constexpr int64_t kAChunkBytes = kMaxKChunk * 8 * int64_t{sizeof(float)};
constexpr int64_t kBlockBytes = 256 * 1024;  // the B rows of a block's K chunk: within L2

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class Conv2dFloat32Gemm final : public PlannedKernel<Conv2dFloat32Gemm, Conv2dKernel> {
    friend class PlannedKernel<Conv2dFloat32Gemm, Conv2dKernel>;

 public:
    Conv2dFloat32Gemm(const NodeView& node, const Float32GemmUkernel& ukernel)
        : PlannedKernel(node, read_conv2d_params(node, DType::kFloat32, DType::kFloat32)),
          ukernel_(ukernel),
          constants_(node),
          oc_tiles_(ceil_div(params_.out_per_group(), ukernel.mr)) {
        pack_weights();
    }

 private:
    struct Plan {
        PhasePlanes phases;
        int64_t out_h, out_w, wide;  // wide: a plane's outputs in wide order
        bool direct;                 // wide order is y's order: results go straight to y
        // Else, where whole vectors of 16 cover an output row in no more columns than wide order
        // has, the micro-kernel takes each output row on its own, straight into y: a block is
        // `block` output rows (the stem's copy of its results into y took 15% of its time, Zen 4).
        bool by_rows = false;
        // Pixel rows (run_pixels) instead: tasks of one panel of 4 output-channel tiles and one
        // tile of pixel_rows pixels.
        bool pixels = false;
        int64_t panels = 0, pixel_tiles = 0;
        int64_t k_chunk, chunks;
        // Wide outputs (a multiple of nr; of nr / 2 where the threads split y's own columns) or
        // rows per block, per plane.
        int64_t block, blocks;
        int64_t part_tiles, parts;     // output-channel tiles per part, parts per plane
        bool bands = false;            // phases built in bands of rows, every channel's (a stem)
        int64_t planes;                // samples x groups
        size_t phase_bytes;            // the phase planes of every input channel
        // Shared: phases, then K offsets (and pixel offsets); per thread: a block's rows.
        WorkspaceLayout workspace;

        Plan(const Conv2dFloat32Gemm& kernel, const Shape& xs, int threads)
            : phases(kernel.params_, kernel.out_h(xs), kernel.out_w(xs)) {
            const Conv2dParams& p = kernel.params_;
            const int64_t nr = kernel.ukernel_.nr, k_count = p.products_per_output();
            out_h = kernel.out_h(xs);
            out_w = kernel.out_w(xs);
            wide = phases.wide_count(out_h, out_w);
            direct = phases.phase_w == out_w;
            chunks = ceil_div(k_count, kMaxKChunk);
            k_chunk = ceil_div(k_count, chunks);
            planes = xs[0] * p.groups;
            parts = std::min(kernel.oc_tiles_, ceil_div(threads, planes));
            part_tiles = ceil_div(kernel.oc_tiles_, parts);
            parts = ceil_div(kernel.oc_tiles_, part_tiles);
            const int64_t max_block =
                std::max<int64_t>(1, kBlockBytes / (k_chunk * int64_t{sizeof(float)}) / nr) * nr;
            blocks = ceil_div(wide, max_block);
            block = ceil_div(ceil_div(wide, blocks), nr) * nr;
            blocks = ceil_div(wide, block);
            phase_bytes = size_t(xs[0] * xs[1] * phases.channel_floats(p)) * sizeof(float);
            // The K offsets, and with pixel rows each output pixel's offset in the phases.
            size_t offsets_bytes = size_t(k_count) * sizeof(int64_t);
            // Pixel rows where nr columns of wide order would compute 1/4 more outputs than
            // pixel_rows rows of real ones: their transposed stores, joined weight vectors and
            // per-call setup cost about as much as the 1/8 that 14x14 planes waste (224 columns
            // for 196 outputs), measured on Zen 4, so only planes like 7x7 (64 for 49) take them.
            const int64_t rows = kernel.ukernel_.pixel_rows;
            if (rows > 0 && kernel.ukernel_.mr == 8) {
                const int64_t plane = out_h * out_w;
                pixels = ceil_div(plane, rows) * rows * 5 < blocks * block * 4;
                panels = ceil_div(kernel.oc_tiles_, 4);
                pixel_tiles = ceil_div(plane, rows);
                offsets_bytes += pixels ? size_t(plane) * sizeof(int64_t) : 0;
            }
            by_rows = !direct && !pixels && ceil_div(out_w, 16) * 16 <= phases.phase_w;
            if (by_rows) {
                block = std::max<int64_t>(1, max_block / phases.phase_w);
                blocks = ceil_div(out_h, block);
            }
            // Weights as small as one A chunk gain nothing from being split among the threads:
            // there the threads split the blocks instead, so that each keeps to its own part of
            // the input and of the output, as the layers before and after it do (threads that
            // read every line of a tensor leave the next writer of those lines an invalidation
            // per line). A stem's phases are built in bands of rows, each thread then reading
            // the rows it built (2 threads: 243 -> 207 us, Zen 4); where wide order is y's order
            // (1x1 convs) the threads split its columns (mobilenet_v2's 1x1 convs at 112x112 and
            // 56x56, 2 to 14 KiB of weights: medians 3.85 -> 3.79 ms at 2 threads, Zen 4). Either
            // way the blocks are as many as the threads or a multiple, as even as whole rows or
            // vectors allow: mobilenet_v2's stem in 6 blocks of 21 rows gave one thread 63 of
            // its 112 rows (177 -> 162 us in blocks of 19).
            // Not above: resnet18's 3x3 stride-2 conv (295 KiB) took 1.1x the time, resnet50's
            // 1x1 convs of 64 to 512 KiB up to 1.15x.
            const int64_t group_weight_bytes =  // packed, as the micro-kernel reads them
                int64_t(kernel.packed_weights_.size() * sizeof(float)) / p.groups;
            const bool small_weights = !pixels && group_weight_bytes <= kAChunkBytes;
            bands = small_weights && !phases.in_place && planes * blocks >= threads;
            const bool columns = small_weights && direct;
            if (bands || columns) {
                parts = 1;
                part_tiles = kernel.oc_tiles_;
                if (planes < threads) {  // blocks even among the threads
                    const int64_t total = by_rows ? out_h : wide;
                    const int64_t unit = by_rows ? 1 : direct ? nr / 2 : nr;
                    blocks = ceil_div(std::max(blocks, threads / planes), threads) * threads;
                    block = ceil_div(ceil_div(total, blocks), unit) * unit;
                    blocks = ceil_div(total, block);
                }
            }
            const size_t rows_bytes = direct || pixels || by_rows ? 0
                                      : size_t(part_tiles * kernel.ukernel_.mr * block) *
                                            sizeof(float);
            workspace = {WorkspaceLayout::aligned(phase_bytes) + offsets_bytes, rows_bytes,
                         threads};
        }

        int64_t tasks() const {
            return pixels ? planes * panels * pixel_tiles : planes * parts * blocks;
        }
    };

    int64_t out_h(const Shape& xs) const {
        const Conv2dParams& p = params_;
        return (xs[2] + 2 * p.pad_h - p.dilation_h * (p.kernel_h - 1) - 1) / p.stride_h + 1;
    }
    int64_t out_w(const Shape& xs) const {
        const Conv2dParams& p = params_;
        return (xs[3] + 2 * p.pad_w - p.dilation_w * (p.kernel_w - 1) - 1) / p.stride_w + 1;
    }

    // Weights [O, K] and bias [O] -> per group, per tile of mr output channels, [K][mr] and [mr],
    // zeros past the group's channels.
    void pack_weights() {
        const int64_t k_count = params_.products_per_output();
        const int64_t per_group = params_.out_per_group();
        const int mr = ukernel_.mr;
        packed_weights_.assign(size_t(params_.groups * oc_tiles_ * k_count * mr), 0.0f);
        // 24 zeros past the last tile: run_pixels reads 32 biases from a panel's first tile.
        packed_bias_.assign(size_t(params_.groups * oc_tiles_ * mr + 24), 0.0f);
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

    void run_plan(const NodeIO& io, ThreadPool& pool, const Plan& plan) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const float* x = io.input<float>(0);
        if (!plan.phases.in_place) {
            float* phases = reinterpret_cast<float*>(io.workspace);
            const int64_t channel_floats = plan.phases.channel_floats(p);
            const int64_t plane = xs[2] * xs[3];
            // Split by phase rows, not channels: a stem has 3 channels for 2 or more threads.
            // In bands, every channel's rows of a band together.
            const int64_t rows = plan.phases.phase_h, channels = xs[0] * xs[1];
            pool.parallel_for(plan.bands ? rows : channels * rows,
                              [&](int64_t begin, int64_t end) {
                if (plan.bands) {
                    for (int64_t c = 0; c < channels; ++c) {
                        plan.phases.build(x + c * plane, xs[2], xs[3], p,
                                          phases + c * channel_floats, begin, end);
                    }
                    return;
                }
                for (int64_t c = begin / rows; c * rows < end; ++c) {
                    plan.phases.build(x + c * plane, xs[2], xs[3], p, phases + c * channel_floats,
                                      std::max(begin - c * rows, int64_t{0}),
                                      std::min(end - c * rows, rows));
                }
            });
            x = phases;
        }
        // B row k = (ic, ky, kx): channel ic's phases at tap (ky, kx). Without a division per k:
        // they cost mobilenet_v2 about 1% of its time, spent before the threads start.
        int64_t* offsets = reinterpret_cast<int64_t*>(
            io.workspace + WorkspaceLayout::aligned(plan.phase_bytes));
        const int64_t taps = p.kernel_h * p.kernel_w;
        for (int64_t t = 0; t < taps; ++t) {
            offsets[t] = plan.phases.tap_offset(p, t / p.kernel_w, t % p.kernel_w);
        }
        const int64_t channel_stride = plan.phases.channel_stride(p);
        for (int64_t k = taps; k < p.products_per_output(); ++k) {
            offsets[k] = offsets[k - taps] + channel_stride;
        }
        int64_t* pixel_offsets = offsets + p.products_per_output();
        if (plan.pixels) {  // once here, not 7 divisions per task
            for (int64_t oy = 0, i = 0; oy < plan.out_h; ++oy) {
                for (int64_t ox = 0; ox < plan.out_w; ++ox, ++i) {
                    pixel_offsets[i] = oy * plan.phases.phase_w + ox;
                }
            }
        }
        pool.parallel_for_slots(plan.tasks(), [&](int64_t slot, int64_t begin, int64_t end) {
            float* rows = reinterpret_cast<float*>(plan.workspace.slot(io.workspace, slot));
            for (int64_t task = begin; task < end; ++task) {
                if (plan.pixels) {
                    run_pixel_task(io, x, offsets, pixel_offsets, plan, task);
                } else {
                    run_task(io, x, offsets, plan, task, rows);
                }
            }
        });
    }

    // `x`: the input, or its phase planes. `rows`: this thread's block buffer (unless direct or by
    // rows).
    void run_task(const NodeIO& io, const float* x, const int64_t* offsets, const Plan& plan,
                  int64_t task, float* rows) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const int64_t mr = ukernel_.mr, nr = ukernel_.nr, k_count = p.products_per_output();
        const int64_t plane = task / (plane_tasks(plan)), in_plane = task % plane_tasks(plan);
        const int64_t part = in_plane / plan.blocks;
        // By rows: output rows [begin, begin + count); else wide outputs.
        const int64_t begin = in_plane % plan.blocks * plan.block;
        const int64_t count = std::min(plan.block, (plan.by_rows ? plan.out_h : plan.wide) - begin);
        const int64_t n = plane / p.groups, group = plane % p.groups;
        const int64_t first_tile = part * plan.part_tiles;
        const int64_t end_tile = std::min(oc_tiles_, first_tile + plan.part_tiles);
        const float* b = x + (n * xs[1] + group * p.group_in_channels) *
                                 plan.phases.channel_stride(p) +
                         (plan.by_rows ? begin * plan.phases.phase_w : begin);
        const int64_t plane_pixels = plan.out_h * plan.out_w;
        const int64_t per_group = p.out_per_group();
        float* y_group = io.output<float>(0) + (n * p.out_channels + group * per_group) *
                                                   plane_pixels;
        constexpr float kInf = std::numeric_limits<float>::infinity();
        const FloatBounds& bounds = constants_.bounds;
        for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
            const int64_t k0 = chunk * plan.k_chunk;
            const int64_t kc = std::min(plan.k_chunk, k_count - k0);
            const bool first = chunk == 0, last = chunk == plan.chunks - 1;
            for (int64_t t = first_tile; t < end_tile; ++t) {
                const int64_t tile = group * oc_tiles_ + t;
                const float* a = packed_weights_.data() + (tile * k_count + k0) * mr;
                const float* bias = first ? packed_bias_.data() + tile * mr : nullptr;
                const int64_t tile_rows = std::min(mr, per_group - t * mr);
                const float lo = last ? bounds.lo : -kInf, hi = last ? bounds.hi : kInf;
                if (plan.by_rows) {
                    float* c = y_group + t * mr * plane_pixels + begin * plan.out_w;
                    for (int64_t row = 0; row < count; ++row) {
                        for (int64_t j = 0; j < plan.out_w; j += nr) {
                            ukernel_.run(kc, a, b + row * plan.phases.phase_w + j, offsets + k0,
                                         bias, lo, hi, tile_rows, std::min(nr, plan.out_w - j),
                                         c + row * plan.out_w + j, plane_pixels);
                        }
                    }
                    continue;
                }
                float* c = plan.direct ? y_group + t * mr * plane_pixels + begin
                                       : rows + (t - first_tile) * mr * plan.block;
                const int64_t c_stride = plan.direct ? plane_pixels : plan.block;
                for (int64_t j = 0; j < count; j += nr) {
                    ukernel_.run(kc, a, b + j, offsets + k0, bias, lo, hi, tile_rows,
                                 std::min(nr, count - j), c + j, c_stride);
                }
            }
        }
        if (!plan.direct && !plan.by_rows) {
            for (int64_t oc = first_tile * mr; oc < std::min(per_group, end_tile * mr); ++oc) {
                copy_wide_range(rows + (oc - first_tile * mr) * plan.block, begin, count,
                                plan.phases.phase_w, plan.out_w, y_group + oc * plane_pixels);
            }
        }
    }

    // One tile of pixel_rows pixels by one panel of 4 output-channel tiles (panels outermost, so
    // that threads split the weights and each panel stays in L2 across its pixel tiles).
    void run_pixel_task(const NodeIO& io, const float* x, const int64_t* offsets,
                        const int64_t* pixel_offsets, const Plan& plan, int64_t task) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const int64_t mr = ukernel_.mr, k_count = p.products_per_output();
        const int64_t rows = ukernel_.pixel_rows;
        const int64_t plane = task / (plan.panels * plan.pixel_tiles);
        const int64_t panel = task / plan.pixel_tiles % plan.panels;
        const int64_t first_pixel = task % plan.pixel_tiles * rows;
        const int64_t plane_pixels = plan.out_h * plan.out_w;
        const int64_t pixels = std::min(rows, plane_pixels - first_pixel);
        const int64_t n = plane / p.groups, group = plane % p.groups;
        const float* x_group =
            x + (n * xs[1] + group * p.group_in_channels) * plan.phases.channel_stride(p);
        const int64_t tile = group * oc_tiles_ + panel * 4;
        const int64_t per_group = p.out_per_group();
        float* y = io.output<float>(0) +
                   (n * p.out_channels + group * per_group + panel * 32) * plane_pixels +
                   first_pixel;
        ukernel_.run_pixels(k_count, packed_weights_.data() + tile * k_count * mr, k_count * mr,
                            std::min<int64_t>(4, oc_tiles_ - panel * 4), x_group, offsets,
                            pixel_offsets + first_pixel, pixels, packed_bias_.data() + tile * mr,
                            constants_.bounds.lo, constants_.bounds.hi,
                            std::min<int64_t>(32, per_group - panel * 32), y, plane_pixels);
    }

    static int64_t plane_tasks(const Plan& plan) { return plan.parts * plan.blocks; }

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
