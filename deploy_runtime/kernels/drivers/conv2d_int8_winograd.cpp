// conv2d int8 as Winograd F(2x2, 3x3) on x86, NCHW, 3x3 kernels, stride 1, dilation 1, any
// padding and groups (docs/quantization_spec.md section 4), the input transform in int16 and the
// products in float or int16 (the micro-kernel's form, winograd_int8_f2x3.h). docs/winograd.md
// proves the result equals the direct convolution for every int8 input and weight; in short: with
// d = x - z (padding d = 0) and the weight transform scaled by 2 per side, U' = G' g G'^T and
// V = B^T d B are integers (|U'| <= 1143, |V| <= 1020), so each product is exact in float or in
// int16 x int16 -> int32; float channel sums stay exact over chunks of `chunk_` channels (partial
// sums <= 2^24, winograd_f2x3_chunk_channels) and go on in int32; A^T M A = 4 sum (x - z) w, which
// fits int32 for group_in_channels <= kMaxChannels, so int32 wrapping on the way does not matter
// and an arithmetic shift divides by 4 exactly. The micro-kernel is per ISA; this file, built with
// the baseline flags, lays out the input, transforms it and cuts the work; the epilogue (bias,
// requantization, activation clamp, fused residual add) is conv2d_int8_epilogue.h.
//
// Layout. Each run first copies x of every (sample, group, channel) once into a padded int8 plane
// split by column parity: rows 2 tiles_h + 2, each an even half then an odd half of
// half_w = tiles_w + 8 columns (z around the input, so that d = x - z is 0 there), so that 8
// consecutive tiles' columns 0..3 are 4 unaligned 8-byte loads (even at tx, odd at tx, even at
// tx + 1, odd at tx + 1). Tiles cover the output plane in raster order, 2x2 pixels each (the last
// row and column may reach past it; those pixels are computed and dropped).
//
// Work: the tiles of each (sample, group) plane are cut into blocks whose transformed input
// V [16][words][block_tiles + 8] (32-bit words: one channel's float or two channels' int16)
// fits a budget (L2 or L1: two descriptors), at least nr tiles;
// a task is one block and a range of output-channel tiles (conv2d_winograd_blocking.h). It
// transforms its block's input (SSE2, int16, 8 tiles a vector) with no separate pack step: V is the
// micro-kernel's operand as written. Then, per output-channel tile, it runs the micro-kernel on
// each nr tiles of the block and hands the output rows to the epilogue while they are in cache.
// Weights are transformed once, at load.
#include <emmintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../contracts/winograd_int8_f2x3.h"
#include "conv2d.h"
#include "conv2d_int8_epilogue.h"
#include "conv2d_winograd_blocking.h"
#include "planned_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

// max |V| = 4 max|d| with d in [-128 - z, 127 - z]; the chunk keeps chunk * max|U'| * max|V|
// <= 2^24 (docs/winograd.md). At least 14 channels: 1143 * 1020 * 14 < 2^24.
int64_t winograd_f2x3_chunk_channels(int64_t max_abs_u, int32_t input_zero_point) {
    const int64_t max_abs_v = 4 * std::max<int64_t>(128 + input_zero_point, 127 - input_zero_point);
    const int64_t product_bound = max_abs_u * max_abs_v;
    return product_bound == 0 ? std::numeric_limits<int64_t>::max()
                              : (int64_t{1} << 24) / product_bound;
}

namespace {

// 4 * 9 C * 255 * 127 < 2^31: the scaled result A^T M A fits int32 (docs/winograd.md).
constexpr int64_t kMaxChannels = 1841;
constexpr int64_t kVSlack = 8;  // words after each V row: the last 8-tile vector's overrun

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool fits_winograd(const Conv2dParams& p) {
    return p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1 &&
           p.dilation_h == 1 && p.dilation_w == 1 && p.group_in_channels <= kMaxChannels;
}

// Tiles of the largest block: V within block_bytes.
int64_t max_block_tiles(int64_t words, int nr, int64_t block_bytes) {
    return winograd_max_block_tiles(kWinogradElements * words * 4, block_bytes, nr);
}

// The split input planes of one run (header comment), from the input shape.
struct WinogradLayout {
    int64_t out_h, out_w, tiles_h, tiles_w, tiles;
    int64_t half_w;         // columns of one parity half of a row
    int64_t channel_bytes;  // one channel's plane: (2 tiles_h + 2) rows of two halves

    WinogradLayout(const Conv2dParams& p, int64_t in_h, int64_t in_w)
        : out_h(in_h + 2 * p.pad_h - 2),
          out_w(in_w + 2 * p.pad_w - 2),
          tiles_h(ceil_div(out_h, 2)),
          tiles_w(ceil_div(out_w, 2)),
          tiles(tiles_h * tiles_w),
          // tiles_w + 1 columns per half, and 7 more read by an 8-tile vector past the row's end
          half_w(tiles_w + 8),
          channel_bytes((2 * tiles_h + 2) * 2 * half_w) {}
};

size_t block_v_bytes(int64_t words, int64_t block_tiles) {
    return size_t(kWinogradElements * words * (block_tiles + kVSlack) * 4);
}

// The micro-kernel's output rows.
template <typename Ukernel>
size_t y_bytes(const Ukernel& u) { return size_t(u.mr * 2 * 2 * u.nr * 4); }

// Stores 8 tiles' V (int16 lanes) of channel c as their words: floats, or c's int16 half of each
// pair. An even channel writes its words whole (its odd partner's half 0), an odd one keeps the
// even half: a vector's overrun into tiles stored later is overwritten when they are.
void store_v(float* out, int64_t, __m128i v) {
    // Each int16 to the high half of an int32, then shifted down with its sign.
    _mm_storeu_ps(out, _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16)));
    _mm_storeu_ps(out + 4, _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(v, v), 16)));
}
void store_v(int32_t* out, int64_t c, __m128i v) {
    const __m128i vzero = _mm_setzero_si128();
    __m128i* p = reinterpret_cast<__m128i*>(out);
    if (c % 2 == 0) {
        _mm_storeu_si128(p, _mm_unpacklo_epi16(v, vzero));
        _mm_storeu_si128(p + 1, _mm_unpackhi_epi16(v, vzero));
    } else {
        const __m128i vlow = _mm_set1_epi32(0xFFFF);
        _mm_storeu_si128(p, _mm_or_si128(_mm_and_si128(_mm_loadu_si128(p), vlow),
                                         _mm_unpacklo_epi16(vzero, v)));
        _mm_storeu_si128(p + 1, _mm_or_si128(_mm_and_si128(_mm_loadu_si128(p + 1), vlow),
                                             _mm_unpackhi_epi16(vzero, v)));
    }
}

// One channel plane x into its split plane at dst (header comment), z around it.
void split_channel(const int8_t* x, int64_t in_h, int64_t in_w, const Conv2dParams& p,
                   const WinogradLayout& l, int32_t z, int8_t* dst) {
    std::fill(dst, dst + l.channel_bytes, static_cast<int8_t>(z));
    for (int64_t iy = 0; iy < in_h; ++iy) {
        int8_t* row = dst + (iy + p.pad_h) * 2 * l.half_w;
        for (int64_t ix = 0; ix < in_w; ++ix) {
            const int64_t px = ix + p.pad_w;
            row[(px & 1) * l.half_w + px / 2] = x[iy * in_w + ix];
        }
    }
}

// d = x - z of 8 consecutive bytes as int16 lanes.
__m128i load_d(const int8_t* x, __m128i vz) {
    const __m128i vx = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x));
    return _mm_sub_epi16(_mm_srai_epi16(_mm_unpacklo_epi8(vx, vx), 8), vz);
}

// V = B^T d B, B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], of tiles
// [first, first + count) of `channels` split planes into v [16][words][v_row] of Word (store_v).
// Exact in int16: sums of at most 4 terms |d| <= 255. Vectors of 8 tiles run up to 7 tiles past a
// tile row's last: into tiles written after them, or into the row's slack.
template <int kChannelsPerWord, typename Word>
void transform_input(const int8_t* x, const WinogradLayout& l, int64_t channels, int32_t z,
                     int64_t first, int64_t count, int64_t v_row, Word* v) {
    const int64_t element_stride = (channels + kChannelsPerWord - 1) / kChannelsPerWord * v_row;
    const __m128i vz = _mm_set1_epi16(static_cast<int16_t>(z));
    for (int64_t c = 0; c < channels; ++c) {
        const int8_t* plane = x + c * l.channel_bytes;
        for (int64_t t = first; t < first + count;) {
            const int64_t ty = t / l.tiles_w, tx = t % l.tiles_w;
            const int64_t run = std::min(first + count - t, l.tiles_w - tx);
            for (int64_t k = 0; k < run; k += 8) {
                __m128i vdb[4][4];  // d B of the 4 rows
                for (int a = 0; a < 4; ++a) {
                    const int8_t* even = plane + (2 * ty + a) * 2 * l.half_w + tx + k;
                    const int8_t* odd = even + l.half_w;
                    const __m128i vc0 = load_d(even, vz), vc1 = load_d(odd, vz);
                    const __m128i vc2 = load_d(even + 1, vz), vc3 = load_d(odd + 1, vz);
                    vdb[a][0] = _mm_sub_epi16(vc0, vc2);
                    vdb[a][1] = _mm_add_epi16(vc1, vc2);
                    vdb[a][2] = _mm_sub_epi16(vc2, vc1);
                    vdb[a][3] = _mm_sub_epi16(vc1, vc3);
                }
                Word* out = v + c / kChannelsPerWord * v_row + (t - first + k);
                for (int j = 0; j < 4; ++j) {
                    store_v(out + j * element_stride, c, _mm_sub_epi16(vdb[0][j], vdb[2][j]));
                    store_v(out + (4 + j) * element_stride, c,
                            _mm_add_epi16(vdb[1][j], vdb[2][j]));
                    store_v(out + (8 + j) * element_stride, c,
                            _mm_sub_epi16(vdb[2][j], vdb[1][j]));
                    store_v(out + (12 + j) * element_stride, c,
                            _mm_sub_epi16(vdb[1][j], vdb[3][j]));
                }
            }
            t += run;
        }
    }
}

// Ukernel: WinogradF2x3Ukernel (float) or WinogradF2x3Int16Ukernel.
template <typename Ukernel>
class Conv2dInt8Winograd final
    : public PlannedKernel<Conv2dInt8Winograd<Ukernel>, Conv2dInt8Kernel> {
    friend class PlannedKernel<Conv2dInt8Winograd<Ukernel>, Conv2dInt8Kernel>;
    using Element = typename Ukernel::Element;
    static constexpr int kChannelsPerWord = Ukernel::kChannelsPerWord;
    using Word = std::conditional_t<kChannelsPerWord == 1, float, int32_t>;  // as V is stored
    using Base = PlannedKernel<Conv2dInt8Winograd<Ukernel>, Conv2dInt8Kernel>;
    using Base::constants_;
    using Base::epilogue_;
    using Base::params_;

    // How a run with this input shape and thread count lays out and cuts its work: the split
    // planes are the workspace's shared part, each thread's V block and output rows a slot.
    struct Plan {
        WinogradLayout layout;
        WinogradBlocking blocking;
        size_t v_bytes;
        WorkspaceLayout workspace;

        Plan(const Conv2dInt8Winograd& k, const Shape& x_shape, int threads)
            : layout(k.params_, x_shape[2], x_shape[3]),
              blocking(make_winograd_blocking(
                  layout.tiles,
                  max_block_tiles(k.words_, k.ukernel_.nr, k.block_bytes_),
                  k.oc_tiles_, k.ukernel_.nr, x_shape[0] * k.params_.groups, threads)),
              v_bytes(WorkspaceLayout::aligned(
                  block_v_bytes(k.words_, blocking.block_tiles))),
              workspace{size_t(x_shape[0] * k.params_.groups * k.params_.group_in_channels *
                               layout.channel_bytes),
                        v_bytes + y_bytes(k.ukernel_), threads} {}
    };

 public:
    Conv2dInt8Winograd(const NodeView& node, const Ukernel& ukernel,
                       const Int8EpilogueUkernels& epilogue, int64_t block_bytes)
        : Base(node, epilogue),
          ukernel_(ukernel),
          block_bytes_(block_bytes),
          oc_tiles_(ceil_div(params_.out_per_group(), ukernel.mr)),
          words_(ceil_div(params_.group_in_channels, kChannelsPerWord)) {
        this->require_fit(node, fits_winograd(params_), "the Winograd conv kernel");
        chunk_ = std::min(params_.group_in_channels,
                          winograd_f2x3_chunk_channels(transform_weights(),
                                                       constants_.input_zero_point));
    }

    void run_plan(const NodeIO& io, ThreadPool& pool, const Plan& plan) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const WinogradLayout& l = plan.layout;
        const WinogradBlocking& b = plan.blocking;
        const int64_t planes = xs[0] * p.groups;

        int8_t* const split = reinterpret_cast<int8_t*>(io.workspace);  // the split planes
        const int8_t* x = io.input<int8_t>(0);
        pool.parallel_for(planes * p.group_in_channels, [&](int64_t begin, int64_t end) {
            for (int64_t c = begin; c < end; ++c) {  // channels of (sample, group) planes in order
                split_channel(x + c * xs[2] * xs[3], xs[2], xs[3], p, l,
                              constants_.input_zero_point, split + c * l.channel_bytes);
            }
        });
        pool.parallel_for_slots(
            planes * b.blocks_per_plane * b.ranges, [&](int64_t slot, int64_t begin, int64_t end) {
                uint8_t* scratch = plan.workspace.slot(io.workspace, slot);
                Word* v = reinterpret_cast<Word*>(scratch);
                int32_t* y = reinterpret_cast<int32_t*>(scratch + plan.v_bytes);
                for (int64_t task = begin; task < end; ++task) {
                    run_task(io, l, b, split, task, v, y);
                }
            });
    }

 private:
    // Weights [O, C/groups, 3, 3] -> U' = G' g G'^T, G' = [[2, 0, 0], [1, 1, 1], [1, -1, 1],
    // [0, 0, 2]], packed per group and tile of mr output channels as [16][words][mr][channels per
    // word], zeros past the group's channels and output channels. Returns the largest |U'|.
    int64_t transform_weights() {
        const Conv2dParams& p = params_;
        const int64_t per_group = p.out_per_group(), channels = p.group_in_channels;
        const int mr = ukernel_.mr;
        static constexpr int kG[4][3] = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};
        const int64_t tile_size = kWinogradElements * words_ * mr * kChannelsPerWord;
        packed_u_.assign(size_t(p.groups * oc_tiles_ * tile_size), Element{0});
        int64_t max_abs_u = 0;
        for (int64_t oc = 0; oc < p.out_channels; ++oc) {
            const int64_t group = oc / per_group, in_group = oc % per_group;
            Element* tile = packed_u_.data() + (group * oc_tiles_ + in_group / mr) * tile_size;
            for (int64_t c = 0; c < channels; ++c) {
                const int8_t* g = constants_.weight + (oc * channels + c) * 9;
                int32_t gg[4][3];  // G' g
                for (int i = 0; i < 4; ++i) {
                    for (int j = 0; j < 3; ++j) {
                        gg[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
                    }
                }
                for (int i = 0; i < 4; ++i) {
                    for (int j = 0; j < 4; ++j) {
                        const int32_t u =
                            gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2];
                        max_abs_u = std::max<int64_t>(max_abs_u, u < 0 ? -u : u);
                        tile[(((4 * i + j) * words_ + c / kChannelsPerWord) * mr +
                              in_group % mr) * kChannelsPerWord + c % kChannelsPerWord] =
                            static_cast<Element>(u);
                    }
                }
            }
        }
        return max_abs_u;
    }

    void run_task(const NodeIO& io, const WinogradLayout& l, const WinogradBlocking& b,
                  const int8_t* split, int64_t task, Word* v, int32_t* y) const {
        const Conv2dParams& p = params_;
        const int64_t channels = p.group_in_channels, per_group = p.out_per_group();
        const int64_t range = task % b.ranges, block = task / b.ranges % b.blocks_per_plane;
        const int64_t plane = task / b.ranges / b.blocks_per_plane;
        const int64_t n = plane / p.groups, group = plane % p.groups;
        const int64_t first = block * b.block_tiles;
        const int64_t count = std::min(b.block_tiles, l.tiles - first);
        const int64_t v_row = b.block_tiles + kVSlack;
        // The last call reads up to a whole nr tiles: keep the ones past the block finite.
        const int64_t called = ceil_div(count, ukernel_.nr) * ukernel_.nr;
        for (int64_t row = 0; row < kWinogradElements * words_; ++row) {
            std::fill(v + row * v_row + count, v + row * v_row + called, Word{0});
        }
        transform_input<kChannelsPerWord>(split + plane * channels * l.channel_bytes, l, channels,
                                          constants_.input_zero_point, first, count, v_row, v);

        int8_t* out = io.output<int8_t>(0);
        const int8_t* residual = this->residual(io);
        const int mr = ukernel_.mr, nr = ukernel_.nr;
        const int64_t first_tile = range * b.tiles_per_range;
        const int64_t end_tile = std::min(oc_tiles_, first_tile + b.tiles_per_range);
        for (int64_t t = first_tile; t < end_tile; ++t) {
            const Element* u = packed_u_.data() + (group * oc_tiles_ + t) * kWinogradElements *
                                                      words_ * mr * kChannelsPerWord;
            const int64_t tile_rows = std::min<int64_t>(mr, per_group - t * mr);
            for (int64_t g = 0; g < count; g += nr) {
                const Element* vg = reinterpret_cast<const Element*>(v + g);
                if constexpr (kChannelsPerWord == 1) {
                    ukernel_.run(u, vg, channels, v_row, chunk_, y);
                } else {
                    ukernel_.run(u, vg, words_, v_row, y);
                }
                const int64_t call_end = first + std::min<int64_t>(count, g + nr);
                for (int64_t r = 0; r < tile_rows; ++r) {
                    const int64_t oc = group * per_group + t * mr + r;
                    // Each run of tiles within one tile row is two output row segments.
                    for (int64_t tile = first + g; tile < call_end;) {
                        const int64_t ty = tile / l.tiles_w, tx = tile % l.tiles_w;
                        const int64_t run = std::min(call_end - tile, l.tiles_w - tx);
                        const int64_t pixels = std::min(2 * run, l.out_w - 2 * tx);
                        for (int64_t row = 0; row < 2 && 2 * ty + row < l.out_h; ++row) {
                            const int64_t at = ((n * p.out_channels + oc) * l.out_h +
                                                2 * ty + row) * l.out_w + 2 * tx;
                            epilogue_.row(oc, y + (2 * r + row) * 2 * nr + 2 * (tile - first - g),
                                          constants_.bias[size_t(oc)], pixels, out + at,
                                          residual == nullptr ? nullptr : residual + at);
                        }
                        tile += run;
                    }
                }
            }
        }
    }

    const Ukernel& ukernel_;
    const int64_t block_bytes_;      // V of one block within this
    const int64_t oc_tiles_;         // tiles of mr output channels per group
    const int64_t words_;            // 32-bit words of a tile element's channels
    std::vector<Element> packed_u_;  // U' per group and tile: [16][words][mr][channels per word]
    int64_t chunk_ = 0;              // channels whose float sums stay exact (the float form)
};

}  // namespace

// Two block budgets per ISA, one descriptor each, so Fast-Run tunes the tile count per layer:
// blocks of one L2 share, and blocks whose V stays in L1 (the 2 ic nr_tiles <= L1 rule, here at
// whole micro-kernel calls, so at least one call's nr tiles).
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dInt8WinogradF2x3Avx512 = {
    "conv2d_int8_winograd_f2x3_8x32_avx512", IsaLevel::kAvx512Vnni, fits_winograd,
    make_kernel<Conv2dInt8Winograd<WinogradF2x3Ukernel>, kWinogradF2x3Avx512, kInt8EpilogueAvx512,
                kWinogradL2BlockBytes>};
extern const Conv2dAlgo kConv2dInt8WinogradF2x3L1Avx512 = {
    "conv2d_int8_winograd_f2x3_8x32_l1_avx512", IsaLevel::kAvx512Vnni, fits_winograd,
    make_kernel<Conv2dInt8Winograd<WinogradF2x3Ukernel>, kWinogradF2x3Avx512, kInt8EpilogueAvx512,
                kWinogradL1BlockBytes>};
#endif
#if QTK_X86_AVX2
extern const Conv2dAlgo kConv2dInt8WinogradF2x3Int16Avx2 = {
    "conv2d_int8_winograd_f2x3_int16_6x16_avx2", IsaLevel::kAvx2, fits_winograd,
    make_kernel<Conv2dInt8Winograd<WinogradF2x3Int16Ukernel>, kWinogradF2x3Int16Avx2,
                kInt8EpilogueAvx2, kWinogradL2BlockBytes>};
extern const Conv2dAlgo kConv2dInt8WinogradF2x3Int16L1Avx2 = {
    "conv2d_int8_winograd_f2x3_int16_6x16_l1_avx2", IsaLevel::kAvx2, fits_winograd,
    make_kernel<Conv2dInt8Winograd<WinogradF2x3Int16Ukernel>, kWinogradF2x3Int16Avx2,
                kInt8EpilogueAvx2, kWinogradL1BlockBytes>};
#endif

}  // namespace detail
}  // namespace qtk
