// conv2d int8 as im2col + GEMM, NCHW, any stride, padding, dilation and groups
// (docs/quantization_spec.md section 4). The GEMM micro-kernels are per ISA (gemm_int8.h); this
// file, built with the baseline flags, packs their operands and cuts the work; the requantization
// epilogue is per ISA too (conv2d_int8_epilogue.h).
//
// Exact by construction. The micro-kernels multiply u = x + o by the int8 weights, o their
// x_offset (x86: 128, u = x ^ 0x80 as uint8; aarch64: 0), and one constant per output channel,
// computed at load, turns their sums into the spec's accumulator (pack_int8_c4.h).
// |sum u w| <= K * 255 * 127 < 2^31 (check_accumulator_range), so no int32 step overflows. Padding
// holds x = z, whose u = z + o the constant cancels: it adds nothing, as in the reference. Integer sums do not depend on their order, so neither the
// blocking nor the threads change a byte.
//
// Work: where the conv pads, each input channel plane is first copied once into a padded plane (z
// around it), so that im2col rows are plain copies (strided at stride 2) with no bounds and no
// divisions: they run for every k of every block. The output pixels of each
// (sample, group) plane are then cut into blocks whose packed activations fit kBlockBytes (L2). A
// block is one thread-pool task: it packs its activations once (im2col and the micro-kernel's
// layout in one pass), then runs every output-channel tile of the group over them, a chunk of
// pixels at a time (kChunkPixels of accumulators per channel, so one epilogue call per channel
// and chunk, not per micro-kernel tile), requantizing each chunk as it comes out. Where the
// planes' blocks are fewer than the threads and a group's weights outweigh its packed
// activations (small planes of many channels: BiRealNet18's 7x7 shortcut 256 -> 512), the threads
// split the output-channel tiles instead, each packing the block for itself: splitting pixels
// made every thread read all the weights for a tile or two of pixels (that 1x1 conv, 2 threads:
// 48 us each, 53 at 1 thread; Zen 4).
#include <algorithm>
#include <cstring>

#include "../contracts/gemm_int8.h"
#include "conv2d.h"
#include "conv2d_int8_epilogue.h"
#include "conv2d_int8_gemm_algos.h"
#include "conv2d_padded_planes.h"
#include "even_bytes.h"
#include "pack_int8_c4.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kBlockBytes = 256 * 1024;
constexpr int64_t kChunkPixels = 256;  // per channel: a tile's accumulators stay in L1/L2
constexpr int64_t kPackedQuadOffset = 0;  // packed B quads follow one another (gemm_int8.h)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ceil(K / 4) quads, rounded up to whole quad blocks of the micro-kernel (zero weights past K).
int64_t padded_quads(const Conv2dParams& p, const Int8GemmUkernel& u) {
    return c4_padded_quads(ceil_div(p.products_per_output(), 4), u);
}

// How one run cuts a plane of output pixels; depends on shapes and thread count, never on data.
struct Blocking {
    int64_t tile_bytes;  // one packed tile of nr pixels: quads * nr * 4
    int64_t tiles_per_block;
    int64_t blocks_per_plane;  // the last block may be shorter
    int64_t tiles_per_chunk;   // micro-kernel tiles of pixels per epilogue chunk
    int64_t oc_parts;          // parts of a group's output-channel tiles, a task each

    // Workspace of one thread: the accumulators of one chunk, the packed block and, unless the
    // conv is pointwise, the four im2col rows of one quad.
    size_t c_bytes(const Int8GemmUkernel& u) const {
        return size_t(u.mr) * tiles_per_chunk * u.nr * 4;
    }
    size_t bytes_per_thread(const Conv2dParams& p, const Int8GemmUkernel& u) const {
        const int64_t block_pixels = tiles_per_block * u.nr;
        return c_bytes(u) + size_t(tiles_per_block * tile_bytes) +
               (p.pointwise() ? 0 : size_t(4 * block_pixels));
    }
};

// Blocks of at most kBlockBytes (one tile at least), and enough of them, or of parts of the
// output-channel tiles (header comment), that `planes` planes give every thread a task where the
// pixels or channels allow.
Blocking make_blocking(const Conv2dParams& p, const Int8GemmUkernel& u, int64_t plane_pixels,
                       int64_t planes, int threads) {
    Blocking b;
    b.tile_bytes = padded_quads(p, u) * u.nr * 4;
    const int64_t plane_tiles = ceil_div(plane_pixels, u.nr);
    const int64_t max_tiles = std::max<int64_t>(1, kBlockBytes / b.tile_bytes);
    const int64_t least_blocks = ceil_div(plane_tiles, max_tiles);
    const int64_t oc_tiles = ceil_div(p.out_per_group(), u.mr);
    const bool split_channels = p.out_per_group() > plane_pixels && planes * least_blocks < threads;
    b.oc_parts =
        split_channels ? std::min(oc_tiles, ceil_div(threads, planes * least_blocks)) : 1;
    const int64_t blocks =
        split_channels ? least_blocks
                       : std::max(least_blocks, std::min(plane_tiles, ceil_div(threads, planes)));
    b.tiles_per_block = ceil_div(plane_tiles, blocks);
    b.blocks_per_plane = ceil_div(plane_tiles, b.tiles_per_block);
    b.tiles_per_chunk = std::max<int64_t>(1, std::min(b.tiles_per_block, kChunkPixels / u.nr));
    return b;
}

// Per thread, for any thread count: more threads only make blocks smaller. Each thread's slot of
// the workspace.
size_t workspace_bytes(const Conv2dParams& p, const Int8GemmUkernel& u, int64_t plane_pixels) {
    return make_blocking(p, u, plane_pixels, 1, 1).bytes_per_thread(p, u);
}

// The input planes with pad_h rows and pad_w columns of z around each: [N * C][height][width]. The
// input itself where the conv does not pad; else the workspace's shared part holds them.
struct PaddedInput {
    int64_t height, width;  // padded
    const int8_t* planes;
};

// The padded input (where the conv pads), then one slot per thread.
WorkspaceLayout workspace_layout(const Conv2dParams& p, const Int8GemmUkernel& u,
                                 const Shape& x_shape, const Shape& y_shape, int threads) {
    return {size_t(padded_input_elements(p, x_shape)),
            workspace_bytes(p, u, y_shape[2] * y_shape[3]), threads};
}

// Row k = (ic, ky, kx) of the im2col matrix over output pixels [begin, begin + count): the value
// tap (ky, kx) reads in the padded plane of channel ic for each pixel.
void im2col_row(const int8_t* padded, int64_t padded_w, int64_t out_w, const Conv2dParams& p,
                int64_t ky, int64_t kx, int64_t begin, int64_t count, int8_t* out) {
    const int64_t sw = p.stride_w;
    int64_t oy = begin / out_w, ox = begin % out_w;
    for (int64_t left = count; left > 0; ++oy, ox = 0) {
        const int64_t len = std::min(out_w - ox, left);
        const int8_t* src =
            padded + (oy * p.stride_h + ky * p.dilation_h) * padded_w + ox * sw + kx * p.dilation_w;
        if (sw == 1) {
            std::memcpy(out, src, size_t(len));
        } else {
            int64_t i = sw == 2 ? copy_even_bytes(src, len, out) : 0;
            for (; i < len; ++i) {
                out[i] = src[i * sw];
            }
        }
        out += len;
        left -= len;
    }
}

// One quad of the packed block: pixel i goes to dst + (i / nr) * tile_bytes + (i % nr) * 4 as the
// 4 bytes rows[0..3][i] ^ flip. Pixels from `count` up to the end of the last tile get defined
// filler; the micro-kernel sums them too and the epilogue drops them.
void pack_quad(const int8_t* const rows[4], int64_t count, int nr, int64_t tile_bytes,
               uint8_t flip, uint8_t* dst) {
    const auto pack16 = [&](int64_t i, const int8_t* row0, const int8_t* row1, const int8_t* row2,
                            const int8_t* row3) {
        store_c4_quads16(row0, row1, row2, row3, flip,
                         dst + (i / nr) * tile_bytes + (i % nr) * 4);
    };
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {  // whole vectors stay in registers
        pack16(i, rows[0] + i, rows[1] + i, rows[2] + i, rows[3] + i);
    }
    for (const int64_t padded = ceil_div(count, nr) * nr; i < padded; i += 16) {
        int8_t tail[4][16] = {};
        for (int j = 0; j < 4; ++j) {
            std::memcpy(tail[j], rows[j] + i, size_t(std::max<int64_t>(0, count - i)));
        }
        pack16(i, tail[0], tail[1], tail[2], tail[3]);
    }
}

class Conv2dInt8Gemm final : public Conv2dInt8Kernel {
 public:
    Conv2dInt8Gemm(const NodeView& node, const Int8GemmUkernel& ukernel,
                   const Int8EpilogueUkernels& epilogue)
        : Conv2dInt8Kernel(node, epilogue),
          ukernel_(ukernel),
          quads_(padded_quads(params_, ukernel)),
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
        const int64_t plane_pixels = ys[2] * ys[3];
        const Blocking b = make_blocking(params_, ukernel_, plane_pixels, planes, pool.threads());
        const WorkspaceLayout workspace =
            workspace_layout(params_, ukernel_, xs, ys, pool.threads());
        const int8_t* x = io.input<int8_t>(0);
        PaddedInput padded{xs[2] + 2 * params_.pad_h, xs[3] + 2 * params_.pad_w, x};
        if (pads(params_)) {
            int8_t* dst = reinterpret_cast<int8_t*>(io.workspace);
            pad_planes(x, xs, params_, static_cast<int8_t>(constants_.input_zero_point), dst, pool);
            padded.planes = dst;
        }
        pool.parallel_for_slots(
            b.oc_parts * planes * b.blocks_per_plane,
            [&](int64_t slot, int64_t begin, int64_t end) {
                for (int64_t task = begin; task < end; ++task) {
                    run_block(io, padded, b, task, workspace.slot(io.workspace, slot));
                }
            });
    }

 private:
    // Weights [O, K] -> per group, per tile of mr output channels, [quads / B][mr][B][4] (B the
    // micro-kernel's quad block) with zeros past K and past the group's channels; and the
    // per-channel constant of the header comment.
    void pack_weights() {
        const int64_t k_count = params_.products_per_output();
        const int64_t per_group = params_.out_per_group();
        const int64_t mr = ukernel_.mr;
        const int64_t tile_bytes = c4_weight_tile_bytes(ukernel_, quads_);
        packed_weights_.assign(size_t(params_.groups * oc_tiles_ * tile_bytes), 0);
        acc_init_.resize(size_t(params_.out_channels));
        for (int64_t oc = 0; oc < params_.out_channels; ++oc) {
            const int64_t group = oc / per_group, in_group = oc % per_group;
            int8_t* tile =
                packed_weights_.data() + (group * oc_tiles_ + in_group / mr) * tile_bytes;
            const int8_t* w = constants_.weight + oc * k_count;
            int64_t sum = 0;
            for (int64_t k = 0; k < k_count; ++k) {
                c4_store_weight(ukernel_, tile, 1, k / 4, 0, in_group % mr, k % 4, w[k]);
                sum += w[k];
            }
            acc_init_[oc] =
                c4_acc_init(ukernel_, constants_.bias[oc], constants_.input_zero_point, sum);
        }
    }

    void run_block(const NodeIO& io, const PaddedInput& padded, const Blocking& b, int64_t task,
                   uint8_t* workspace) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t out_w = ys[3];
        const int64_t plane_pixels = ys[2] * out_w;
        // Part-major: a thread's tasks write its own channels' planes.
        const int64_t part_tasks = xs[0] * p.groups * b.blocks_per_plane;
        const int64_t part = task / part_tasks;
        const int64_t plane = task % part_tasks / b.blocks_per_plane;
        const int64_t n = plane / p.groups, group = plane % p.groups;
        const int64_t begin = task % b.blocks_per_plane * b.tiles_per_block * ukernel_.nr;
        const int64_t count = std::min(plane_pixels - begin, b.tiles_per_block * ukernel_.nr);

        int32_t* c = reinterpret_cast<int32_t*>(workspace);
        uint8_t* packed = workspace + b.c_bytes(ukernel_);
        int8_t* im2col = reinterpret_cast<int8_t*>(packed + b.tiles_per_block * b.tile_bytes);
        const int64_t padded_plane = padded.height * padded.width;
        const int8_t* x_padded =
            padded.planes + (n * xs[1] + group * p.group_in_channels) * padded_plane;
        const int64_t taps = p.kernel_h * p.kernel_w;
        const int64_t k_count = p.products_per_output();
        const int8_t* rows[4] = {};
        for (int64_t q = 0; q < quads_; ++q) {
            for (int64_t j = 0, k = 4 * q; j < 4; ++j, ++k) {
                if (k >= k_count) {  // its weights are 0: any bytes will do, here the last row's
                    rows[j] = rows[j > 0 ? j - 1 : 3];
                } else if (p.pointwise()) {
                    rows[j] = x_padded + k * padded_plane + begin;  // no padding: the input
                } else {
                    int8_t* row = im2col + j * b.tiles_per_block * ukernel_.nr;
                    im2col_row(x_padded + k / taps * padded_plane, padded.width, out_w, p,
                               k % taps / p.kernel_w, k % p.kernel_w, begin, count, row);
                    rows[j] = row;
                }
            }
            pack_quad(rows, count, ukernel_.nr, b.tile_bytes, c4_flip(ukernel_),
                      packed + q * ukernel_.nr * 4);
        }

        int8_t* y = io.output<int8_t>(0);
        const int8_t* residual = this->residual(io);
        const int64_t per_group = p.out_per_group();
        if (ukernel_.prepare != nullptr) {
            ukernel_.prepare();
        }
        for (int64_t t = part * oc_tiles_ / b.oc_parts; t < (part + 1) * oc_tiles_ / b.oc_parts;
             ++t) {
            const int8_t* w = packed_weights_.data() +
                              (group * oc_tiles_ + t) * c4_weight_tile_bytes(ukernel_, quads_);
            const int64_t oc0 = group * per_group + t * ukernel_.mr;
            const int64_t tile_rows = std::min<int64_t>(ukernel_.mr, per_group - t * ukernel_.mr);
            const int64_t chunk = b.tiles_per_chunk * ukernel_.nr;  // accumulators per row
            for (int64_t first = 0; first < count; first += chunk) {
                const int64_t cols = std::min(chunk, count - first);
                for (int64_t g = 0; g < cols; g += ukernel_.nr) {
                    const Int8GemmB tile = {packed + (first + g) / ukernel_.nr * b.tile_bytes,
                                            quads_, ukernel_.nr * 4, 1, &kPackedQuadOffset};
                    ukernel_.run(w, tile, c + g, chunk);
                }
                for (int64_t r = 0; r < tile_rows; ++r) {
                    const int64_t oc = oc0 + r;
                    const int64_t at = (n * p.out_channels + oc) * plane_pixels + begin + first;
                    epilogue_.row(oc, c + r * chunk, acc_init_[oc], cols, y + at,
                                  residual == nullptr ? nullptr : residual + at);
                }
            }
        }
    }

    const Int8GemmUkernel& ukernel_;
    const int64_t quads_;     // ceil(K / 4)
    const int64_t oc_tiles_;  // tiles of mr output channels per group
    std::vector<int8_t> packed_weights_;
    std::vector<int32_t> acc_init_;  // per output channel: bias - (x_offset + z) * sum(w)
};

// AMX's tile rows take 64 products (K padded to a multiple of 64): at K <= 32 zero padding does
// half its work or more, and the VNNI GEMM is faster (Fast-Run chose it on all 9 such 1x1 layers
// of mobilenet_v2, 0.7-0.9x the AMX GEMM's time).
[[maybe_unused]] bool fits_gemm_amx(const Conv2dParams& p) {
    return p.products_per_output() > 32;
}

}  // namespace

QTK_CONV2D_INT8_GEMM_ALGOS(Conv2dInt8Gemm, Gemm, "gemm", fits_any_conv2d, fits_gemm_amx)

}  // namespace detail
}  // namespace qtk
