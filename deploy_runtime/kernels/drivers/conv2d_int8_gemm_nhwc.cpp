// conv2d int8 without groups, channels-last (NHWC, where the layout pass put the node:
// graph_passes.h), as an implicit GEMM: y[p][o] = requantize(sum over taps t and channels c of
// x[window pixel t of p][c] w[o][c][t] + bias[o] - z sum w[o]) (docs/quantization_spec.md section
// 4). In NHWC a pixel's input channels are one stretch of the GEMM's K row as they lie, one
// stretch per kernel tap, so no im2col is built: the micro-kernel reads each tap's pixels at the
// tap's offset. A pixel's output channels are one run of the output: requantization and a fused
// residual add go over whole pixels. The micro-kernel is per ISA (gemm_int8.h); this file, built
// with the baseline flags, packs the weights at load and cuts the work.
//
// The GEMM's rows are slots of a plane (SlotPlane): a 1x1 stride-1 conv without padding reads the
// input in place (or, VNNI, a tile's copy), one slot per pixel. Any other window reads a copy of the sample padded
// with the input zero point (so the padding adds z w, as the spec's padded input does) and split
// into planes by the rows' remainder mod the stride and by column (the columns' remainder, or on
// narrow layers each kernel column's own view): output pixel (oh, ow) is slot oh pitch + ow, and
// for every tap its input pixel lies at the slot's own index plus one offset per tap. With few
// channels K is cut by kernel rows instead of taps (KStretches): the copy keeps whole padded rows
// (split by the row stride only), a slot every stride_w pixels, and a stretch is the run of pixels
// a kernel row spans; or, in the window form (AVX-512 VBMI), K is the whole window: each thread
// gathers an output row's windows from that copy (kernel rows interleaved pixel by pixel) into its
// scratch, and the micro-kernel reads them there, one stretch at one offset.
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
// and channels; or, where the micro-kernel requantizes its own sums (gemm_int8.h) and every
// shift takes the high-half form, straight into the output's bytes, then the fused add if any. In
// place, the micro-kernel reads 4 quads bytes from each pixel: where that would pass the end of
// the sample's plane (its last tiles), the tile's pixels are first copied into a zero-padded
// scratch; the padded copy has room for every tile. A VNNI micro-kernel (x_offset 128) reads
// uint8 x + 128, which the copies flip as they go: it never reads in place, each tile of a 1x1
// layer is copied (one run of bytes where the channels are whole quads; a copy of the plane
// instead cost resnet50's memory plan 30% over its bound).
#include <algorithm>
#include <cstring>
#include <vector>

#include "../contracts/gemm_int8.h"
#include "conv2d.h"
#include "conv2d_int8_epilogue.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

int64_t int8_window_gather_row_bytes(int64_t rows) {
    return rows < 2 || rows > 8 ? 0 : rows <= 2 ? 64 : rows <= 4 ? 32 : 16;
}

bool int8_window_gather_plan(int64_t rows, int64_t channels, uint8_t* picks) {
    const int64_t pixel_bytes = rows * channels, row_bytes = int8_window_gather_row_bytes(rows);
    if (row_bytes == 0) {
        return false;
    }
    // Chunk i + pixel_bytes starts 64 pixels after chunk i, at the same byte of a pixel: pattern
    // i serves every chunk i mod pixel_bytes.
    for (int64_t pattern = 0; pattern < pixel_bytes; ++pattern) {
        const int64_t first = 64 * pattern / pixel_bytes;  // the chunk's first pixel
        for (int64_t b = 0; b < 64; ++b) {
            const int64_t at = 64 * pattern + b, r = at % pixel_bytes / channels;
            const int64_t k = (at / pixel_bytes - first) * channels + at % channels;
            if (k >= row_bytes) {
                return false;
            }
            picks[pattern * 64 + b] = uint8_t(r * row_bytes + k);
        }
    }
    return true;
}

namespace {

constexpr int64_t kWeightBlockQuads = 16;  // quads per block of the packed weights (gemm_int8.h)
constexpr int64_t kL2Share = 1 << 20;      // weight bytes a task's tiles reuse: half a 2 MB L2
constexpr int64_t kTaskMacs = 1 << 23;     // the least work worth a task of its own

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The window gather's plan for kernel_h rows of pixels of `channels` bytes (gemm_int8.h), or
// empty where its limits exclude them.
std::vector<uint8_t> window_gather_picks(int64_t rows, int64_t channels) {
    std::vector<uint8_t> picks(size_t(rows * channels * 64));
    return int8_window_gather_plan(rows, channels, picks.data()) ? picks : std::vector<uint8_t>();
}

// How K is cut into the stretches the micro-kernel reads at one offset each: per kernel tap, the
// input channels (rounded up to whole quad blocks: the pixel's bytes in the copy); or, where that
// pads K less (few channels, as resnet's 3-channel stem), per kernel row, the run of pixels the
// window's row spans with their channels as they lie (the bytes between dilated taps meet zero
// weights); or, where the kernel has a window gather (gemm_int8.h) and that pads K less still, the
// whole window as one stretch: each tile's kernel rows gathered pixel by pixel from the per-row
// copy (BiRealNet18's 7x7 stem over 3 channels: 37 quads, not 7 rows of 6).
struct KStretches {
    bool per_row;     // the copy of whole padded rows, a stretch per kernel row unless per_window
    bool per_window;  // one stretch per window, read from the tile's gathered rows
    int64_t count, quads;  // stretches; quads read per stretch, a multiple of quad_block
    int64_t channels, kernel_h, kernel_w, dilation_w, span;  // span: bytes of a kernel row's pixels
    std::vector<uint8_t> picks;  // the window form's gather plan (Int8WindowGather), else empty

    KStretches(const Conv2dParams& p, int64_t quad_block, bool gathers = false)
        : channels(p.group_in_channels),
          kernel_h(p.kernel_h),
          kernel_w(p.kernel_w),
          dilation_w(p.dilation_w),
          span(((p.kernel_w - 1) * p.dilation_w + 1) * p.group_in_channels) {
        const auto whole = [&](int64_t bytes) {
            return ceil_div(ceil_div(bytes, 4), quad_block) * quad_block;
        };
        per_row = !p.pointwise() && whole(span) < p.kernel_w * whole(channels);
        const int64_t least = p.kernel_h * std::min(whole(span), p.kernel_w * whole(channels));
        if (gathers && !p.pointwise() && whole(p.kernel_h * span) < least) {
            picks = window_gather_picks(p.kernel_h, channels);
        }
        per_window = !picks.empty();
        per_row = per_row || per_window;
        count = per_window ? 1 : per_row ? p.kernel_h : p.kernel_h * p.kernel_w;
        quads = whole(per_window ? p.kernel_h * span : per_row ? span : channels);
    }

    int64_t padded_k() const { return count * 4 * quads; }

    // Where byte k of stretch s lies in one output channel's weights [channels][kh][kw], or -1
    // where it meets none.
    int64_t weight_at(int64_t s, int64_t k, int64_t taps) const {
        if (per_window) {  // k: kernel column, then row, then channel
            const int64_t column = k / (kernel_h * channels);
            if (k >= kernel_h * span || column % dilation_w != 0) {
                return -1;
            }
            return k % channels * taps + k / channels % kernel_h * kernel_w + column / dilation_w;
        }
        if (!per_row) {
            return k < channels ? k * taps + s : -1;
        }
        const int64_t col = k / channels;
        if (k >= span || col % dilation_w != 0) {
            return -1;
        }
        return k % channels * taps + s * kernel_w + col / dilation_w;
    }
};

// Windows with K under 64 (mobilenet_v2's 3x3 stem over 3 channels: K 27) ran 2.5 times faster in
// the NCHW direct conv than in this tile's per-tap or per-row stretches; the window form (below)
// takes some of them. 1x1 layers that short stay channels-last with their neighbours.
bool fits_dense(const Conv2dParams& p) {
    return p.groups == 1 && (p.pointwise() || p.products_per_output() >= 64);
}

// Layers of 16 output channels or fewer (mobilenet_v2's 32 -> 16 at 112x112): a 32-wide tile
// would multiply and requantize zero weights in half its lanes.
bool fits_dense_narrow(const Conv2dParams& p) { return fits_dense(p) && p.out_channels <= 16; }

#if QTK_X86_AVX512_VBMI
// The window form (KStretches) where it pads K less than the per-row one; not on layers of 16
// output channels or fewer, which the 24x16 tile serves. Below K 64 it competes with the NCHW
// direct conv (8 output channels a tile, each tap's channels padded to 4) and takes the layers
// where it multiplies fewer padded products, its tiles 32 channels wide: mobilenet_v2's stem (32
// channels, K 27 in 7 quads: 32 x 28 against 32 x 36) 138 us direct -> 119 (and the permute of
// its output, 26 us, becomes the image's, 6), not shufflenet_v2's (24 channels: 32 x 28 against
// 24 x 36; 108 us direct, 121 windowed) (Zen 4, 1 thread).
bool fits_dense_windows(const Conv2dParams& p) {
    const Int8GemmNhwcUkernel& u = kInt8GemmNhwc12x32Avx512Vnni;
    if (p.groups != 1 || p.out_channels <= 16) {
        return false;
    }
    const KStretches k(p, u.quad_block, true);
    constexpr int64_t kDirectChannels = 8;
    const int64_t direct_products = ceil_div(p.out_channels, kDirectChannels) * kDirectChannels *
                                    p.kernel_h * p.kernel_w * 4 * ceil_div(p.group_in_channels, 4);
    return k.per_window && (p.products_per_output() >= 64 ||
                            ceil_div(p.out_channels, u.nr) * u.nr * k.padded_k() < direct_products);
}
#endif

// AMX's tile rows take 64 k. 1x1 at K <= 32: zero padding does half its work or more (as for the
// NCHW GEMM, conv2d_int8_gemm.cpp) and the VNNI kernel takes those layers. Other windows: while
// padding stays below 3/4 of K, AMX (~1.1 TMAC/s on resnet18's layers) still outruns the VNNI
// direct conv (~0.25).
bool fits_dense_amx(const Conv2dParams& p) {
    if (p.groups != 1) {
        return false;
    }
    const int64_t k = p.products_per_output();
    return p.pointwise() ? k > 32 : KStretches(p, 16).padded_k() < 4 * k;
}

// Per thread: the tile's accumulators [mr][channels rounded up to nr], then the copy of mr pixels
// [mr][4 quads] (read in place, the plane's last tiles) or the window form's gathered output row
// (SlotPlane::gathered_bytes).
struct TileScratch {
    int64_t c_stride, x_stride;

    TileScratch(const Conv2dParams& p, const Int8GemmNhwcUkernel& u, const KStretches& k)
        : c_stride(ceil_div(p.out_channels, u.nr) * u.nr), x_stride(4 * k.quads) {}

    size_t c_bytes(const Int8GemmNhwcUkernel& u) const { return size_t(u.mr * c_stride * 4); }
    size_t bytes(const Int8GemmNhwcUkernel& u, int64_t gathered_bytes) const {
        return c_bytes(u) + size_t(std::max(u.mr * x_stride, gathered_bytes));
    }
};

// Where one sample's GEMM rows lie (see the top of the file): the input itself, or the padded copy:
// planes of `rows` rows of row_pixels pixels of pixel_bytes bytes, row r of a plane holding input
// row r stride_h + row_phase - pad_h, its pixel j input column first_column + j column_step.
// Per tap, a plane per row phase (the row's remainder mod stride_h) and column class, whose pixels
// are the channels rounded up to the stretch; the classes are either the column phases (pixels
// of padded rows split by their remainder mod stride_w, a row's slots past the output's width
// computed and dropped) or, where those would waste more than a slot in 16 (narrow layers:
// resnet18's 7x7 ones 2 in 9), the kernel columns: pixel j of kernel column kw's plane is the one
// kw reads for output column j, so every slot is an output pixel, for kernel_w / stride_w times the
// copy. Per kernel row, a plane per row phase of whole padded rows (a multiple of stride_w pixels),
// a slot every stride_w pixels.
struct SlotPlane {
    struct Source {
        int64_t row_phase, first_column;
    };

    bool in_place;
    int64_t rows, row_pixels, pixel_bytes, column_step;
    int64_t x_stride, pitch, slots, tiles;
    int64_t width, row_tiles;  // the output's; tiles per output row, 0 where tiles span rows
    std::vector<Source> sources;   // per plane
    std::vector<int64_t> offsets;  // bytes, per stretch (window form: per kernel row it gathers)
    std::vector<bool> read;        // per plane: whether a stretch reads it (1x1 stride 2: one)
    // The copy's size: its planes and room for the last tile's reads (the window form's: the
    // gather's row bytes from a chunk's first pixel).
    int64_t copy_bytes;
    // The window form: an output row's windows gathered (their pixels' kernel rows interleaved, in
    // the gather's whole 64-byte chunks, and room for the last window's last quad); else 0.
    int64_t gathered_bytes;

    SlotPlane(const Conv2dParams& p, const KStretches& k, const Int8GemmNhwcUkernel& u,
              const Shape& xs, const Shape& ys)
        : in_place(p.pointwise()),
          rows(in_place ? xs[1] : ceil_div(xs[1] + 2 * p.pad_h, p.stride_h)),
          pixel_bytes(in_place || k.per_row ? xs[3] : 4 * k.quads),
          column_step(k.per_row ? 1 : p.stride_w) {
        const int64_t phase_pitch = ceil_div(xs[2] + 2 * p.pad_w, p.stride_w);
        const bool per_column = !in_place && !k.per_row && (phase_pitch - ys[2]) * 16 > phase_pitch;
        pitch = in_place ? xs[2] : per_column ? ys[2] : phase_pitch;
        row_pixels = k.per_row ? pitch * p.stride_w : pitch;
        x_stride = k.per_row ? p.stride_w * pixel_bytes : pixel_bytes;
        slots = ys[1] * pitch;
        width = ys[2];
        // (the window form gathers an output row's windows: its tiles stay within a row)
        row_tiles = pitch == width && !k.per_window ? 0 : ceil_div(width, int64_t(u.mr));
        tiles = row_tiles == 0 ? ceil_div(slots, u.mr) : ys[1] * row_tiles;
        // Per tap kw: its column class and the pixels its input lies past the slot's own.
        const auto column_class = [&](int64_t kw) {
            return k.per_row ? 0 : per_column ? kw : kw * p.dilation_w % p.stride_w;
        };
        const auto column_shift = [&](int64_t kw) {
            return k.per_row || per_column ? 0 : kw * p.dilation_w / p.stride_w;
        };
        const int64_t classes = k.per_row || in_place ? 1 : per_column ? p.kernel_w : p.stride_w;
        for (int64_t phase = 0; phase < (in_place ? 1 : p.stride_h); ++phase) {
            for (int64_t c = 0; c < classes; ++c) {
                sources.push_back({phase, (per_column ? c * p.dilation_w : c) - p.pad_w});
            }
        }
        read.assign(sources.size(), false);
        const int64_t plane_bytes = rows * row_pixels * pixel_bytes;
        for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
            const int64_t row = kh * p.dilation_h;
            for (int64_t kw = 0; kw < (k.per_row ? 1 : p.kernel_w); ++kw) {
                const int64_t plane = row % p.stride_h * classes + column_class(kw);
                read[size_t(plane)] = true;
                offsets.push_back(plane * plane_bytes +
                                  (row / p.stride_h * row_pixels + column_shift(kw)) * pixel_bytes);
            }
        }
        const int64_t planes = int64_t(sources.size());
        const int64_t last_read =  // bytes read from the last tile's last pixel on
            k.per_window ? k.span + int8_window_gather_row_bytes(k.kernel_h) : 4 * k.quads;
        copy_bytes = in_place ? 0
                              : std::max(planes * plane_bytes,
                                         *std::max_element(offsets.begin(), offsets.end()) +
                                             (tile(tiles - 1).first + u.mr - 1) * x_stride +
                                             last_read);
        const int64_t gathered = ((width - 1) * p.stride_w * k.channels + k.span) * k.kernel_h;
        gathered_bytes = k.per_window ? ceil_div(gathered + 3, 64) * 64 : 0;
    }

    int64_t planes() const { return int64_t(sources.size()); }

    // Tile t's slots [first, first + count): where every slot is an output pixel, the slots split
    // evenly, so that no tile is much shorter than the others (resnet18's 7x7 layers: 49 pixels in
    // 5 tiles of 9 or 10, not 4 of 12 and one of 1, which streamed all 2.4 MB of weights for one
    // pixel); else (and always in the window form, which gathers a row's windows at a time) each
    // output row's pixels alike, so no slot past the row is computed.
    struct Tile {
        int64_t first, count;
    };
    Tile tile(int64_t t) const {
        if (row_tiles == 0) {
            return {t * slots / tiles, (t + 1) * slots / tiles - t * slots / tiles};
        }
        const int64_t row = t / row_tiles, i = t % row_tiles;
        const int64_t begin = i * width / row_tiles, end = (i + 1) * width / row_tiles;
        return {row * pitch + begin, end - begin};
    }
};

class Conv2dInt8GemmNhwc final : public Conv2dInt8Kernel {
 public:
    Conv2dInt8GemmNhwc(const NodeView& node, const Int8GemmNhwcUkernel& ukernel,
                       const Int8EpilogueUkernels& epilogue, Int8WindowGatherFn gather = nullptr)
        : Conv2dInt8Kernel(node, epilogue),
          ukernel_(ukernel),
          gather_(gather),
          stretches_(params_, ukernel.quad_block, gather != nullptr),
          scratch_(params_, ukernel, stretches_) {
        if (params_.groups != 1 || !params_.nhwc) {  // the registry checks first
            node.fail("the channels-last GEMM kernel does not fit this conv2d");
        }
        pack_weights();
        // Where every channel's shift (both sides' with a fused PReLU) takes the high-half form,
        // the micro-kernel requantizes its own accumulators (gemm_int8.h).
        if (ukernel_.run_requantized != nullptr) {
            const auto build = [&](const std::vector<int32_t>& multiplier,
                                   const std::vector<int32_t>& shift,
                                   std::vector<Int8HighHalfBlock>* blocks) {
                blocks->resize(size_t(scratch_.c_stride / 16));
                return int8_high_half_blocks(acc_init_.data(), multiplier.data(), shift.data(),
                                             params_.out_channels, epilogue_.output(),
                                             blocks->data());
            };
            if (!build(constants_.multiplier, constants_.shift, &blocks_) ||
                (constants_.fused_prelu() &&
                 !build(constants_.negative_multiplier, constants_.negative_shift,
                        &negative_blocks_))) {
                blocks_.clear();
                negative_blocks_.clear();
            }
        }
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
                pool.parallel_for(plane.planes() * plane.rows,
                                  [&](int64_t begin, int64_t end) {
                                      copy_rows(x, xs, plane, begin, end, copy);
                                  });
                x = copy;
            }
            // The output channels split into parts: whose weights stay in an L2 share while
            // every tile of pixels runs over them (resnet18's last layers have 2.4 MB); and, where
            // the tiles are few (its 14x14 layers have 7, its 7x7 ones 2), for 4 tasks a thread,
            // as far as each keeps kTaskMacs of work (mobilenet_v2's small 1x1 layers ran 8% slower
            // cut finer).
            const int64_t threads = pool.threads(), channel_tiles = scratch_.c_stride / ukernel_.nr;
            const int64_t tile_macs = ukernel_.mr * stretches_.padded_k() * params_.out_channels;
            const int64_t balance = std::min(ceil_div(4 * threads, plane.tiles),
                                             std::max<int64_t>(1, tile_macs / kTaskMacs));
            int64_t parts = std::min(
                channel_tiles, std::max({balance, ceil_div(threads, plane.tiles),
                                         ceil_div(int64_t(packed_weights_.size()), kL2Share)}));
            // And as many tasks as the threads divide evenly, where the channels allow: resnet18's
            // 14x14 layers have 17 tiles, which 2 threads split 9 to 8 (in 2 parts, 17 and 17).
            while (parts < channel_tiles && parts * plane.tiles % threads != 0) {
                ++parts;
            }
            // Tasks run tile by tile, each thread taking the same band of pixels in every layer,
            // so that a layer reads mostly what its own core wrote (a line from the other core's
            // cache costs 3x one's own, 7x where the two vCPUs sit on different core complexes:
            // measure_core_to_core on Zen 5); part by part only where the parts keep weights in an
            // L2 share.
            const bool part_major = int64_t(packed_weights_.size()) > kL2Share;
            pool.parallel_for_slots(parts * plane.tiles, [&](int64_t slot, int64_t begin,
                                                             int64_t end) {
                if (ukernel_.prepare != nullptr) {
                    ukernel_.prepare();
                }
                uint8_t* scratch = workspace.slot(io.workspace, slot);
                int64_t gathered_row = -1;  // the window form's output row in the scratch
                for (int64_t task = begin; task < end; ++task) {
                    const int64_t part = part_major ? task / plane.tiles : task % parts;
                    const SlotPlane::Tile tile =
                        plane.tile(part_major ? task % plane.tiles : task / parts);
                    run_tile(io, n, x, plane, tile.first, tile.count,
                             part * channel_tiles / parts * ukernel_.nr,
                             (part + 1) * channel_tiles / parts * ukernel_.nr, scratch,
                             &gathered_row);
                }
            });
        }
    }

 private:
    SlotPlane plane(const Shape& xs, const Shape& ys) const {
        return SlotPlane(params_, stretches_, ukernel_, xs, ys);
    }

    WorkspaceLayout workspace(const SlotPlane& plane, int threads) const {
        return WorkspaceLayout{size_t(plane.copy_bytes),
                               scratch_.bytes(ukernel_, plane.gathered_bytes), threads};
    }

    // Weights [O, K, KH, KW] -> per tile of nr output channels the micro-kernel's [stretches]
    // [quad blocks][nr / 16][16][16][4] (zeros where a stretch meets no weight and past O); and
    // per channel bias - (z + x_offset) sum(w).
    void pack_weights() {
        const int64_t nr = ukernel_.nr, taps = params_.kernel_h * params_.kernel_w;
        const int64_t block_k = 4 * kWeightBlockQuads;
        const int64_t stretch_bytes = weight_stretch_bytes();
        const int64_t tile_bytes = stretches_.count * stretch_bytes;
        packed_weights_.assign(size_t(scratch_.c_stride / nr * tile_bytes), 0);
        acc_init_.resize(size_t(params_.out_channels));
        for (int64_t o = 0; o < params_.out_channels; ++o) {
            int8_t* tile = packed_weights_.data() + o / nr * tile_bytes;
            const int8_t* w = constants_.weight + o * params_.products_per_output();
            int32_t sum = 0;
            for (int64_t t = 0; t < stretches_.count; ++t) {
                for (int64_t k = 0; k < 4 * stretches_.quads; ++k) {
                    const int64_t from = stretches_.weight_at(t, k, taps);
                    if (from < 0) {
                        continue;
                    }
                    const int64_t at =
                        t * stretch_bytes +
                        ((k / block_k * (nr / 16) + o % nr / 16) * 16 + k % block_k / 4) * 64 +
                        o % 16 * 4 + k % 4;
                    tile[at] = w[from];
                    sum += w[from];
                }
            }
            const int32_t z = constants_.input_zero_point + ukernel_.x_offset;
            acc_init_[size_t(o)] = constants_.bias[size_t(o)] - z * sum;
        }
    }

    int64_t weight_stretch_bytes() const {
        return ceil_div(stretches_.quads, kWeightBlockQuads) * kWeightBlockQuads * 4 * ukernel_.nr;
    }

    // Rows [begin, end) of the padded copy (plane by plane): the input's pixels where the window
    // meets them, the zero point on the padding, zeros in the bytes past the channels; all but
    // those zeros plus the micro-kernel's x_offset.
    void copy_rows(const int8_t* x, const Shape& xs, const SlotPlane& plane, int64_t begin,
                   int64_t end, int8_t* copy) const {
        const int64_t height = xs[1], width = xs[2], channels = xs[3];
        const int64_t bytes = plane.pixel_bytes, step = plane.column_step;
        const int8_t z = int8_t(constants_.input_zero_point + ukernel_.x_offset);
        const auto pad = [&](int8_t* out, int64_t pixels) {
            if (bytes == channels) {
                std::memset(out, z, size_t(pixels * bytes));
                return;
            }
            for (int64_t j = 0; j < pixels; ++j, out += bytes) {
                std::memset(out, z, size_t(channels));
                std::memset(out + channels, 0, size_t(bytes - channels));
            }
        };
        for (int64_t r = begin; r < end; ++r) {
            const int64_t index = r / plane.rows;
            if (!plane.read[size_t(index)]) {
                continue;
            }
            const SlotPlane::Source& source = plane.sources[size_t(index)];
            const int64_t ih = r % plane.rows * params_.stride_h + source.row_phase - params_.pad_h;
            const int64_t first_col = source.first_column;  // of pixel 0, then + step
            int8_t* out = copy + r * plane.row_pixels * bytes;
            if (ih < 0 || ih >= height) {
                pad(out, plane.row_pixels);
                continue;
            }
            // Pixels [lo, hi) meet the input row.
            const int64_t lo =
                std::clamp<int64_t>(ceil_div(-first_col, step), 0, plane.row_pixels);
            const int64_t hi = std::max(
                lo, std::min(plane.row_pixels, ceil_div(width - first_col, step)));
            const int8_t* in = x + (ih * width + first_col + lo * step) * channels;
            pad(out, lo);
            if (step == 1 && bytes == channels) {
                copy_offset(in, (hi - lo) * bytes, out + lo * bytes);
            } else {
                for (int64_t j = lo; j < hi; ++j, in += step * channels) {
                    copy_offset(in, channels, out + j * bytes);
                    std::memset(out + j * bytes + channels, 0, size_t(bytes - channels));
                }
            }
            pad(out + hi * bytes, plane.row_pixels - hi);
        }
    }

    // out[i] = in[i] + x_offset (mod 256: for 128, the sign bit flipped), i < bytes.
    void copy_offset(const int8_t* in, int64_t bytes, int8_t* out) const {
        if (ukernel_.x_offset == 0) {
            std::memcpy(out, in, size_t(bytes));
            return;
        }
        // 16 bytes a step in the target's own vectors (the runtime builds at -O2, which leaves a
        // byte loop scalar: it took longer than mobilenet_v2's 1x1 convs it fed).
        using Bytes16 = uint8_t __attribute__((vector_size(16)));
        const uint8_t offset = uint8_t(ukernel_.x_offset);
        const Bytes16 offsets = Bytes16{} + offset;
        int64_t i = 0;
        for (; i + 16 <= bytes; i += 16) {
            Bytes16 v;
            std::memcpy(&v, in + i, 16);
            v ^= offsets;
            std::memcpy(out + i, &v, 16);
        }
        for (; i < bytes; ++i) {
            out[i] = int8_t(uint8_t(in[i]) ^ offset);
        }
    }

    // Slots [first, first + slots) of sample n (slots <= mr, consecutive output pixels:
    // SlotPlane::tile), output channels [first_channel, end_channel) (fewer at the last channel).
    void run_tile(const NodeIO& io, int64_t n, const int8_t* x, const SlotPlane& plane,
                  int64_t first, int64_t slots, int64_t first_channel, int64_t end_channel,
                  uint8_t* scratch, int64_t* gathered_row) const {
        const int64_t in_channels = params_.group_in_channels, out_channels = params_.out_channels;
        end_channel = std::min(end_channel, out_channels);
        const int64_t* offsets = plane.offsets.data();
        int64_t x_stride = plane.x_stride;
        // The window form: the windows of the tile's output row gathered (kernel rows interleaved
        // pixel by pixel, each window one run), once for the consecutive tiles of a row that a
        // thread takes.
        if (stretches_.per_window) {
            const int64_t row = first / plane.pitch;
            int8_t* gathered = reinterpret_cast<int8_t*>(scratch + scratch_.c_bytes(ukernel_));
            if (*gathered_row != row) {
                const int8_t* rows[8];
                for (int64_t r = 0; r < params_.kernel_h; ++r) {
                    rows[r] = x + row * plane.pitch * plane.x_stride + offsets[r];
                }
                gather_(rows, (plane.width - 1) * params_.stride_w + stretches_.span / in_channels,
                        Int8WindowGather{params_.kernel_h, in_channels, stretches_.picks.data()},
                        gathered);
                *gathered_row = row;
            }
            static constexpr int64_t kWindowOffset = 0;
            x_stride = params_.stride_w * params_.kernel_h * in_channels;
            x = gathered + (first - row * plane.pitch) * x_stride;
            offsets = &kWindowOffset;
        } else {
            x += first * x_stride;
        }
        // In place, the last row reads 4 quads bytes: copy where that passes the plane, and every
        // tile where the micro-kernel reads x + x_offset (a run of bytes where the pixels are
        // whole quads: the tile of a VNNI kernel, which reads only its `slots` pixels).
        if (plane.in_place && (ukernel_.x_offset != 0 ||
                               (first + ukernel_.mr - 1) * in_channels + scratch_.x_stride >
                                   plane.slots * in_channels)) {
            int8_t* copy = reinterpret_cast<int8_t*>(scratch + scratch_.c_bytes(ukernel_));
            if (ukernel_.x_offset != 0 && scratch_.x_stride == in_channels) {
                copy_offset(x, slots * in_channels, copy);
            } else {
                std::memset(copy, 0, size_t(ukernel_.mr * scratch_.x_stride));
                for (int64_t p = 0; p < slots; ++p) {
                    copy_offset(x + p * in_channels, in_channels, copy + p * scratch_.x_stride);
                }
            }
            x = copy;
            x_stride = scratch_.x_stride;
        }
        // The tile's slots are the output pixels [pixel, pixel + slots) of sample n.
        const Shape& ys = *io.output_shapes[0];
        const int64_t oh = first / plane.pitch;
        const int64_t pixel = oh * ys[2] + first - oh * plane.pitch;
        const int64_t at = (n * ys[1] * ys[2] + pixel) * out_channels + first_channel;
        int8_t* y = io.output<int8_t>(0) + at;
        const int8_t* residual = constants_.has_residual ? io.input<int8_t>(3) + at : nullptr;
        const int64_t tile_bytes = stretches_.count * weight_stretch_bytes();
        if (!blocks_.empty()) {
            for (int64_t o = first_channel; o < end_channel; o += ukernel_.nr) {
                ukernel_.run_requantized(slots, x, x_stride, offsets,
                                         stretches_.count, stretches_.quads,
                                         packed_weights_.data() + o / ukernel_.nr * tile_bytes,
                                         blocks_.data() + o / 16,
                                         negative_blocks_.empty()
                                             ? nullptr
                                             : negative_blocks_.data() + o / 16,
                                         epilogue_.output(),
                                         std::min<int64_t>(ukernel_.nr, end_channel - o),
                                         y + o - first_channel, out_channels);
            }
            epilogue_.add_residual(y, out_channels, slots, end_channel - first_channel, residual);
            return;
        }
        int32_t* c = reinterpret_cast<int32_t*>(scratch);
        for (int64_t o = first_channel; o < end_channel; o += ukernel_.nr) {
            ukernel_.run(slots, x, x_stride, offsets, stretches_.count,
                         stretches_.quads,
                         packed_weights_.data() + o / ukernel_.nr * tile_bytes, c + o,
                         scratch_.c_stride);
        }
        epilogue_.pixels(first_channel, c + first_channel, scratch_.c_stride, slots,
                         end_channel - first_channel, acc_init_.data() + first_channel, y,
                         out_channels, residual);
    }

    const Int8GemmNhwcUkernel& ukernel_;
    const Int8WindowGatherFn gather_;  // where the level has one (KStretches' window form)
    const KStretches stretches_;
    const TileScratch scratch_;
    std::vector<int8_t> packed_weights_;
    std::vector<int32_t> acc_init_;  // per output channel: bias - (z + x_offset) sum(w)
    std::vector<Int8HighHalfBlock> blocks_;  // acc_init_ and the requantization, or empty
    std::vector<Int8HighHalfBlock> negative_blocks_;  // a fused PReLU's negative side, or empty
};

}  // namespace

#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8GemmNhwc32x32Amx = {
    "conv2d_int8_gemm_nhwc_32x32_amx_int8", IsaLevel::kAmxInt8, fits_dense_amx,
    make_kernel<Conv2dInt8GemmNhwc, kInt8GemmNhwc32x32Amx, kInt8EpilogueAvx512>, false, true};
#endif
#if QTK_X86_AVX512_VBMI
extern const Conv2dAlgo kConv2dInt8GemmNhwcWindows12x32Avx512Vbmi = {
    "conv2d_int8_gemm_nhwc_windows_12x32_avx512_vbmi", IsaLevel::kAvx512Vbmi, fits_dense_windows,
    make_kernel<Conv2dInt8GemmNhwc, kInt8GemmNhwc12x32Avx512Vnni, kInt8EpilogueAvx512,
                kInt8WindowGatherAvx512Vbmi>,
    false, true};
#endif
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8GemmNhwc24x16Avx512Vnni = {
    "conv2d_int8_gemm_nhwc_24x16_avx512_vnni", IsaLevel::kAvx512Vnni, fits_dense_narrow,
    make_kernel<Conv2dInt8GemmNhwc, kInt8GemmNhwc24x16Avx512Vnni, kInt8EpilogueAvx512>, false,
    true};
extern const Conv2dAlgo kConv2dInt8GemmNhwc12x32Avx512Vnni = {
    "conv2d_int8_gemm_nhwc_12x32_avx512_vnni", IsaLevel::kAvx512Vnni, fits_dense,
    make_kernel<Conv2dInt8GemmNhwc, kInt8GemmNhwc12x32Avx512Vnni, kInt8EpilogueAvx512>, false,
    true};
#endif

}  // namespace detail
}  // namespace qtk
