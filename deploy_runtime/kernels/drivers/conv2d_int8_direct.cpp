// conv2d int8 as a direct convolution, NCHW, stride 1 or 2, any kernel (but 1x1), padding,
// dilation and groups (docs/quantization_spec.md section 4). The GEMM micro-kernels of
// gemm_int8.h read their activations in place, one quad per (4 input channels, kernel tap): no
// im2col and no packing. This file, built with the baseline flags, lays out the input and cuts the
// work; the epilogue is per ISA (conv2d_int8_epilogue.h).
//
// Exact by construction, as the GEMM conv (conv2d_int8_gemm.cpp): the micro-kernels sum u w with
// u = x + o (o the micro-kernel's x_offset, 128 or 0), and one constant per output channel makes
// that the spec's accumulator (pack_int8_c4.h); padding holds u = z + o, which the constant cancels;
// |sum u w| <= K * 255 * 127 < 2^31 (check_accumulator_range); integer sums do not depend on their
// order, so neither the blocking nor the threads change a byte. Junk grid columns and the zero
// weights of channels past the group's only ever meet bytes that the epilogue drops or that add 0.
//
// Layout ("c4"). Each run first converts the input of every (sample, group), once, into planes of
// 4-byte pixels (4 consecutive input channels, as u): [quad of 4 channels][row phase][column
// phase][plane_h][plane_w][4], where pixel (py, px) of the padded input (z around it, and z up to
// a whole number of strides) lies in phase (py % s, px % s) at (py / s, px / s). Channels past the
// group's get any bytes: their weights are 0. The output is computed on the phase plane's grid:
// grid pixel g = oy * plane_w + ox, with columns ox >= out_w junk that the epilogue drops. Tap
// (ky, kx) of grid pixel g reads padded (s oy + ky d, s ox + kx d), which is phase
// ((ky d) % s, (kx d) % s) at g + (ky d / s) plane_w + kx d / s: for nr consecutive grid pixels,
// nr consecutive c4 pixels, one quad of the micro-kernel at a fixed offset per tap. Reads past a
// plane (junk columns, the last tile's tail) land in the next plane or in the slack after the
// last, and only feed junk.
//
// Work: the grid rows of each (sample, group) are cut into blocks whose c4 rows fit kBlockBytes
// (L2); a task is one block and a range of output-channel tiles (where the blocks leave threads
// idle, more ranges first, then shorter blocks: make_blocking). It runs each tile of mr channels
// over the block's grid pixels, nr at a time, into a block of accumulators, then requantizes its
// output rows.
#include <algorithm>
#include <cstring>
#include <vector>

#include "../contracts/gemm_int8.h"
#include "conv2d.h"
#include "conv2d_int8_epilogue.h"
#include "conv2d_int8_gemm_algos.h"
#include "pack_int8_c4.h"
#include "planned_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kBlockBytes = 256 * 1024;  // c4 rows one block reads
constexpr int64_t kMaxBlockPixels = 1024;    // grid pixels of one block, unless one row is longer

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool fits_direct(const Conv2dParams& p) {
    return p.kernel_h * p.kernel_w > 1 && p.stride_h == p.stride_w &&
           (p.stride_h == 1 || p.stride_h == 2);
}

// The c4 layout of one run (header comment), from the input shape.
struct C4Layout {
    int64_t stride;              // phases per axis
    int64_t plane_h, plane_w;    // pixels of one phase plane
    int64_t out_h, out_w;        // the output (the grid is out_h x plane_w)
    int64_t quad_bytes;          // all phase planes of one quad of channels
    int64_t group_bytes;         // one (sample, group)
    int64_t slack_bytes;         // after the last group: the furthest junk read

    C4Layout(const Conv2dParams& p, int64_t in_h, int64_t in_w, int64_t quads, int nr)
        : stride(p.stride_h),
          plane_h(ceil_div(in_h + 2 * p.pad_h, stride)),
          plane_w(ceil_div(in_w + 2 * p.pad_w, stride)),
          out_h((in_h + 2 * p.pad_h - p.dilation_h * (p.kernel_h - 1) - 1) / stride + 1),
          out_w((in_w + 2 * p.pad_w - p.dilation_w * (p.kernel_w - 1) - 1) / stride + 1),
          quad_bytes(stride * stride * plane_h * plane_w * 4),
          group_bytes(quads * quad_bytes),
          // A tile starts below out_h * plane_w and its taps reach at most plane_w - out_w
          // columns and plane_h - out_h rows further.
          slack_bytes((nr + plane_w) * 4) {}
};

// How one run cuts the work; depends on shapes and thread count, never on data.
struct DirectBlocking {
    int64_t rows_per_block, blocks_per_plane;
    int64_t block_stride;  // accumulators per channel of a block: whole tiles
    int64_t tiles_per_range, ranges;  // output-channel tiles per task, and ranges per block

    size_t bytes_per_thread(const Int8GemmUkernel& u) const {
        return size_t(u.mr * block_stride * 4);
    }
};

// Rows per block: its c4 rows within kBlockBytes and its grid within kMaxBlockPixels (one row at
// least). Then, where `planes` planes of those blocks leave threads idle, ranges of output-channel
// tiles first and more (shorter) blocks only after: every block reads all of the layer's weights,
// and on small planes (7x7 and 14x14, 256 to 512 channels) the weights are the larger operand, so
// two threads splitting the rows would each stream all of them from memory.
DirectBlocking make_blocking(const C4Layout& c4, int64_t quads, int64_t oc_tiles,
                             const Int8GemmUkernel& u, int64_t planes, int threads) {
    DirectBlocking b;
    const int64_t row_bytes = quads * c4.stride * c4.stride * c4.plane_w * 4;
    const int64_t rows = std::max<int64_t>(
        1, std::min(kBlockBytes / row_bytes, kMaxBlockPixels / c4.plane_w));
    const int64_t fitting_blocks = ceil_div(c4.out_h, rows);
    const int64_t ranges = std::min(oc_tiles, ceil_div(threads, planes * fitting_blocks));
    const int64_t blocks =
        std::max(fitting_blocks, std::min(c4.out_h, ceil_div(threads, planes * ranges)));
    b.rows_per_block = ceil_div(c4.out_h, blocks);
    b.blocks_per_plane = ceil_div(c4.out_h, b.rows_per_block);
    b.block_stride = ceil_div(b.rows_per_block * c4.plane_w, u.nr) * u.nr;
    b.tiles_per_range = ceil_div(oc_tiles, ranges);
    b.ranges = ceil_div(oc_tiles, b.tiles_per_range);
    return b;
}

// Padded rows [row_begin, row_end) of one quad of input channels (`channels` of them from x, the
// rest anything) of one sample into its c4 phase planes at dst, every byte xor-ed with flip.
void convert_quad(const int8_t* x, int64_t channels, int64_t in_h, int64_t in_w,
                  const Conv2dParams& p, const C4Layout& c4, int8_t z, uint8_t flip,
                  int64_t row_begin, int64_t row_end, uint8_t* dst) {
    const int64_t s = c4.stride;
    const int64_t row_pixels = c4.plane_w * s;  // a padded row, z up to a whole number of strides
    const int64_t vector_pixels = ceil_div(row_pixels, 16) * 16;
    // Four padded channel rows, then their c4 pixels, then (stride 2) the two column phases.
    std::vector<int8_t> padded_rows(size_t(4 * vector_pixels), z);
    std::vector<uint8_t> pixels(size_t(vector_pixels * 4)), phase_pixels(size_t(vector_pixels * 4));
    const int8_t* rows[4];
    for (int j = 0; j < 4; ++j) {
        rows[j] = padded_rows.data() + j * vector_pixels;
    }
    const int64_t plane_bytes = c4.plane_h * c4.plane_w * 4;
    const uint8_t pad_u = static_cast<uint8_t>(z ^ flip);
    for (int64_t py = row_begin; py < row_end; ++py) {
        uint8_t* phase_row = dst + (py % s) * s * plane_bytes + (py / s) * c4.plane_w * 4;
        const int64_t iy = py - p.pad_h;
        if (iy < 0 || iy >= in_h) {
            for (int64_t rx = 0; rx < s; ++rx) {
                std::memset(phase_row + rx * plane_bytes, pad_u, size_t(c4.plane_w * 4));
            }
            continue;
        }
        for (int64_t j = 0; j < channels; ++j) {
            std::memcpy(padded_rows.data() + j * vector_pixels + p.pad_w,
                        x + (j * in_h + iy) * in_w, size_t(in_w));
        }
        for (int64_t i = 0; i < vector_pixels; i += 16) {
            store_c4_quads16(rows[0] + i, rows[1] + i, rows[2] + i, rows[3] + i, flip,
                             pixels.data() + i * 4);
        }
        if (s == 1) {
            std::memcpy(phase_row, pixels.data(), size_t(c4.plane_w * 4));
            continue;
        }
        const int64_t half_bytes = vector_pixels * 2;  // one column phase
        split_c4_phases(pixels.data(), vector_pixels, phase_pixels.data(),
                        phase_pixels.data() + half_bytes);
        std::memcpy(phase_row, phase_pixels.data(), size_t(c4.plane_w * 4));
        std::memcpy(phase_row + plane_bytes, phase_pixels.data() + half_bytes,
                    size_t(c4.plane_w * 4));
    }
}

class Conv2dInt8Direct final : public PlannedKernel<Conv2dInt8Direct, Conv2dInt8Kernel> {
    friend class PlannedKernel<Conv2dInt8Direct, Conv2dInt8Kernel>;

    // How a run with this input shape and thread count lays out and cuts its work: the c4 input
    // (and its slack) is the workspace's shared part, each thread's accumulators a slot.
    struct Plan {
        C4Layout c4;
        DirectBlocking blocking;
        WorkspaceLayout workspace;

        Plan(const Conv2dInt8Direct& k, const Shape& x_shape, int threads)
            : c4(k.params_, x_shape[2], x_shape[3], k.quads_, k.ukernel_.nr),
              blocking(make_blocking(c4, k.quads_, k.oc_tiles_, k.ukernel_,
                                     x_shape[0] * k.params_.groups, threads)),
              workspace{size_t(x_shape[0] * k.params_.groups * c4.group_bytes + c4.slack_bytes),
                        blocking.bytes_per_thread(k.ukernel_), threads} {}
    };

 public:
    Conv2dInt8Direct(const NodeView& node, const Int8GemmUkernel& ukernel,
                     const Int8EpilogueUkernels& epilogue)
        : PlannedKernel(node, epilogue),
          ukernel_(ukernel),
          // whole quad blocks of the micro-kernel: the c4 planes past the channels hold any bytes
          quads_(c4_padded_quads(ceil_div(params_.group_in_channels, 4), ukernel)),
          taps_(params_.kernel_h * params_.kernel_w),
          oc_tiles_(ceil_div(params_.out_per_group(), ukernel.mr)) {
        require_fit(node, fits_direct(params_), "the direct conv kernel");
        pack_weights();
    }

    void run_plan(const NodeIO& io, ThreadPool& pool, const Plan& plan) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const C4Layout& c4 = plan.c4;
        const DirectBlocking& b = plan.blocking;
        const int64_t planes = xs[0] * p.groups;

        uint8_t* const input = io.workspace;  // the c4 input, then the slack
        std::memset(input + planes * c4.group_bytes, 0, size_t(c4.slack_bytes));
        const int8_t* x = io.input<int8_t>(0);
        const int8_t z = static_cast<int8_t>(constants_.input_zero_point);
        const int64_t channel_quads = ceil_div(p.group_in_channels, 4);  // the rest: any bytes
        // Units of whole quads, or of row ranges where there are fewer quads than threads (a
        // first layer's one quad of RGB).
        const int64_t padded_rows = c4.plane_h * c4.stride;
        const int64_t row_ranges =
            std::min(padded_rows, ceil_div(pool.threads(), planes * channel_quads));
        pool.parallel_for(planes * channel_quads * row_ranges, [&](int64_t begin, int64_t end) {
            for (int64_t unit = begin; unit < end; ++unit) {
                const int64_t range = unit % row_ranges, quad = unit / row_ranges;
                const int64_t plane = quad / channel_quads, q = quad % channel_quads;
                const int64_t n = plane / p.groups, group = plane % p.groups;
                const int64_t first = group * p.group_in_channels + 4 * q;
                const int64_t channels = std::min<int64_t>(4, p.group_in_channels - 4 * q);
                convert_quad(x + (n * xs[1] + first) * xs[2] * xs[3], channels, xs[2], xs[3], p,
                             c4, z, c4_flip(ukernel_), padded_rows * range / row_ranges,
                             padded_rows * (range + 1) / row_ranges,
                             input + plane * c4.group_bytes + q * c4.quad_bytes);
            }
        });

        // Per tap, where its quad lies from the tile's grid pixel (header comment).
        std::vector<int64_t> tap_offsets(static_cast<size_t>(taps_));
        const int64_t s = c4.stride, plane_bytes = c4.plane_h * c4.plane_w * 4;
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
            for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                const int64_t dy = ky * p.dilation_h, dx = kx * p.dilation_w;
                tap_offsets[size_t(ky * p.kernel_w + kx)] =
                    ((dy % s) * s + dx % s) * plane_bytes + ((dy / s) * c4.plane_w + dx / s) * 4;
            }
        }
        pool.parallel_for_slots(
            planes * b.blocks_per_plane * b.ranges, [&](int64_t slot, int64_t begin, int64_t end) {
                int32_t* acc = reinterpret_cast<int32_t*>(plan.workspace.slot(io.workspace, slot));
                for (int64_t task = begin; task < end; ++task) {
                    run_task(io, c4, b, input, tap_offsets.data(), task, acc);
                }
            });
    }

 private:
    // Weights [O, C/groups, kh, kw] -> per group, per tile of mr output channels,
    // [quads / B][taps][mr][B][4 channels] (B the micro-kernel's quad block) with zeros past the
    // group's channels; and the per-channel constant of the header comment.
    void pack_weights() {
        const Conv2dParams& p = params_;
        const int64_t per_group = p.out_per_group(), channels = p.group_in_channels;
        const int64_t mr = ukernel_.mr;
        const int64_t tile_quads = quads_ * taps_;
        const int64_t tile_bytes = c4_weight_tile_bytes(ukernel_, tile_quads);
        packed_weights_.assign(size_t(p.groups * oc_tiles_ * tile_bytes), 0);
        acc_init_.resize(size_t(p.out_channels));
        for (int64_t oc = 0; oc < p.out_channels; ++oc) {
            const int64_t group = oc / per_group, in_group = oc % per_group;
            int8_t* tile =
                packed_weights_.data() + (group * oc_tiles_ + in_group / mr) * tile_bytes;
            const int8_t* w = constants_.weight + oc * channels * taps_;
            int64_t sum = 0;
            for (int64_t ic = 0; ic < channels; ++ic) {
                for (int64_t tap = 0; tap < taps_; ++tap) {
                    c4_store_weight(ukernel_, tile, taps_, ic / 4, tap, in_group % mr, ic % 4,
                                    w[ic * taps_ + tap]);
                    sum += w[ic * taps_ + tap];
                }
            }
            acc_init_[oc] =
                c4_acc_init(ukernel_, constants_.bias[oc], constants_.input_zero_point, sum);
        }
    }

    void run_task(const NodeIO& io, const C4Layout& c4, const DirectBlocking& b,
                  const uint8_t* input, const int64_t* tap_offsets, int64_t task,
                  int32_t* acc) const {
        const Conv2dParams& p = params_;
        const int64_t range = task % b.ranges, block = task / b.ranges % b.blocks_per_plane;
        const int64_t plane = task / b.ranges / b.blocks_per_plane;
        const int64_t n = plane / p.groups, group = plane % p.groups;
        const int64_t first_row = block * b.rows_per_block;
        const int64_t rows = std::min(b.rows_per_block, c4.out_h - first_row);
        const int64_t grid_pixels = rows * c4.plane_w;
        const uint8_t* block_input =
            input + plane * c4.group_bytes + first_row * c4.plane_w * 4;

        const int64_t per_group = p.out_per_group();
        const int64_t out_pixels = c4.out_h * c4.out_w;
        int8_t* y = io.output<int8_t>(0);
        const int8_t* residual = this->residual(io);
        const int mr = ukernel_.mr, nr = ukernel_.nr;
        const int64_t first_tile = range * b.tiles_per_range;
        const int64_t end_tile = std::min(oc_tiles_, first_tile + b.tiles_per_range);
        if (ukernel_.prepare != nullptr) {
            ukernel_.prepare();
        }
        const int64_t tile_bytes = c4_weight_tile_bytes(ukernel_, quads_ * taps_);
        for (int64_t t = first_tile; t < end_tile; ++t) {
            const int8_t* w = packed_weights_.data() + (group * oc_tiles_ + t) * tile_bytes;
            for (int64_t g = 0; g < grid_pixels; g += nr) {
                const Int8GemmB tile = {block_input + g * 4, quads_, c4.quad_bytes, taps_,
                                        tap_offsets};
                ukernel_.run(w, tile, acc + g, b.block_stride);
            }
            const int64_t tile_rows = std::min<int64_t>(mr, per_group - t * mr);
            for (int64_t r = 0; r < tile_rows; ++r) {
                const int64_t oc = group * per_group + t * mr + r;
                const int64_t at =
                    (n * p.out_channels + oc) * out_pixels + first_row * c4.out_w;
                epilogue_.rows(oc, acc + r * b.block_stride, c4.plane_w, rows, c4.out_w,
                               acc_init_[oc], y + at,
                               residual == nullptr ? nullptr : residual + at);
            }
        }
    }

    const Int8GemmUkernel& ukernel_;
    const int64_t quads_;     // quads of input channels per group: ceil(C/groups / 4)
    const int64_t taps_;      // kh * kw
    const int64_t oc_tiles_;  // tiles of mr output channels per group
    std::vector<int8_t> packed_weights_;
    std::vector<int32_t> acc_init_;  // per output channel: bias - (x_offset + z) * sum(w)
};

// AMX's tile rows take 64 input channels: below that, zero padding does most of its work
// (resnet18's 3-channel first layer took 3 ms, 20x the VNNI direct conv's time).
[[maybe_unused]] bool fits_direct_amx(const Conv2dParams& p) {
    return fits_direct(p) && p.group_in_channels >= 64;
}

}  // namespace

QTK_CONV2D_INT8_GEMM_ALGOS(Conv2dInt8Direct, Direct, "direct", fits_direct, fits_direct_amx)

}  // namespace detail
}  // namespace qtk
