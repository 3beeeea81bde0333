// conv2d_binary by xor and popcount (spec 24), NCHW, any stride, padding, dilation and groups.
//
// Each run packs the input's signs into a bit image [N, H + 2 pad_h, W + 2 pad_w, groups, words]
// of 64-bit words (bit 1 for -1, a q below its channel's threshold; channel c of a group at bit
// c mod 64 of word c / 64; padding and the bits past a group's channels 0; 64 channels by 64
// pixels at a time, by the micro-kernel's packing where it has one), so every output pixel's
// receptive field is `taps` runs of `words` words at fixed offsets from its first word. A
// micro-kernel (popcount_binary.h) counts differing bits against the weights packed alike, and
// turns counts into the sum:
//   sum = K - 2 count                              padded bits read +1, as pad_value 1 wants;
//   sum -= sum over padded taps of sum_c w[o][c][t]  for pad_value 0, on border pixels only.
// Then bias and the int8 conv's requantization. Threads take chunks of 128 output pixels.
// Where the level has a row micro-kernel and the layer fits it (stride_w 1, a word of channels per
// group, every scaled shift in the high-half form), the image is word-planar instead and the row
// micro-kernel turns 8 pixels of a row at a time straight into int8 (no sums buffer); threads take
// output rows.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../contracts/popcount_binary.h"
#include "../contracts/requantize_int8.h"
#include "conv2d.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_conv2d_int8_reference(const NodeView& node);  // reference/conv2d.cpp

namespace {

constexpr int64_t kWordBits = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bits set in v, by halves, nibbles and a multiply: portable C++17 (std::popcount is C++20, and
// the compilers' builtin becomes a table call where the baseline has no popcnt instruction).
int32_t popcount(uint64_t v) {
    v -= (v >> 1) & 0x5555555555555555u;
    v = (v & 0x3333333333333333u) + ((v >> 2) & 0x3333333333333333u);
    v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fu;
    return static_cast<int32_t>((v * 0x0101010101010101u) >> 56);
}

// Bit i of the result: in[i] < t, for i < count <= 64, 0 above, t in [-128, 128] (SSE2's
// compare and movemask on x86-64, 16 bytes a step, then one at a time).
uint64_t sign_bits(const int8_t* in, int64_t count, int32_t t) {
    if (t <= -128 || t >= 128) {
        return t <= -128 ? 0 : count >= 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
    }
    uint64_t bits = 0;
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128i threshold = _mm_set1_epi8(static_cast<char>(t));
    for (; i + 16 <= count; i += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
        bits |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_cmplt_epi8(v, threshold)))) << i;
    }
#endif
    for (; i < count; ++i) {
        bits |= uint64_t{in[i] < t} << i;
    }
    return bits;
}

// Transposes the 64 x 64 bit matrix a (row r = a[r], column c = bit c) in place: swaps the
// off-diagonal halves of every 2j x 2j block, j = 32 .. 1 (Hacker's Delight 7-3).
void transpose_bits64(uint64_t* a) {
    static constexpr uint64_t kLowHalves[] = {0x00000000ffffffffu, 0x0000ffff0000ffffu,
                                              0x00ff00ff00ff00ffu, 0x0f0f0f0f0f0f0f0fu,
                                              0x3333333333333333u, 0x5555555555555555u};
    int level = 0;
    for (int j = 32; j != 0; j >>= 1, ++level) {
        const uint64_t mask = kLowHalves[level];
        for (int k = 0; k < 64; k = ((k | j) + 1) & ~j) {
            const uint64_t t = ((a[k] >> j) ^ a[k | j]) & mask;
            a[k] ^= t << j;
            a[k | j] ^= t;
        }
    }
}

// The portable packing (popcount_binary.h's `pack`): each channel's sign mask of the pixels, then
// the bit transpose.
void pack_portable(const int8_t* x, int64_t channel_stride, int64_t channels, int64_t pixels,
                   const int32_t* thresholds, uint64_t* words) {
    uint64_t bits[kWordBits];
    for (int64_t c = 0; c < kWordBits; ++c) {
        bits[c] = c < channels ? sign_bits(x + c * channel_stride, pixels, thresholds[c]) : 0;
    }
    transpose_bits64(bits);
    std::copy(bits, bits + pixels, words);
}

// The portable micro-kernel: any CPU, and the contract in its plainest form.
template <int kPixels, int kChannels>
void popcount_portable(const uint64_t* const* pixel, const int64_t* tap_offset, int64_t taps,
                       int64_t words, const uint64_t* w, int32_t products, int scale,
                       const int32_t* const* missed, int32_t* sums, int64_t sums_stride) {
    int32_t acc[kPixels][kChannels] = {};
    for (int64_t t = 0; t < taps; ++t) {
        for (int64_t j = 0; j < words; ++j, w += kChannels) {
            for (int p = 0; p < kPixels; ++p) {
                const uint64_t x = pixel[p][tap_offset[t] + j];
                for (int o = 0; o < kChannels; ++o) {
                    acc[p][o] += popcount(x ^ w[o]);
                }
            }
        }
    }
    for (int o = 0; o < kChannels; ++o) {
        for (int p = 0; p < kPixels; ++p) {
            sums[o * sums_stride + p] =
                static_cast<int32_t>(uint32_t(products - 2 * acc[p][o]) << scale) -
                (missed != nullptr ? missed[p][o] : 0);
        }
    }
}

const BinaryPopcountUkernel kBinaryPopcount4x8Portable = {4, 8, popcount_portable<4, 8>,
                                                          pack_portable};

// kVectorEpilogue: requantize by the level's vector epilogue (requantize_int8.h, `requantize`),
// else by the scalar rule; a template parameter, so a build without the epilogues (which the
// portable descriptor alone serves) never refers to their plans.
template <bool kVectorEpilogue>
class Conv2dBinaryPopcount final : public Conv2dKernel {
 public:
    Conv2dBinaryPopcount(const NodeView& node, const BinaryPopcountUkernel& ukernel,
                         const Int8RequantizeUkernel* requantize, const BinaryRowUkernel* row)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kInt8, DType::kInt32)),
          c_(node, params_),
          ukernel_(ukernel),
          requantize_(requantize),
          reference_(make_conv2d_int8_reference(node)) {
        if constexpr (kVectorEpilogue) {
            output_.emplace(c_.output_zero_point, c_.clamp.lo, c_.clamp.hi);
        }
        const Conv2dParams& p = params_;
        taps_ = p.kernel_h * p.kernel_w;
        words_ = ceil_div(p.group_in_channels, kWordBits);
        blocks_ = ceil_div(p.out_per_group(), ukernel_.channels);
        // weights_[g][block][t][j][lane]: zero bits past the channels and outputs
        weights_.assign(size_t(p.groups * blocks_ * taps_ * words_ * ukernel_.channels), 0);
        tap_sums_.assign(size_t(p.out_channels * taps_), 0);
        for (int64_t o = 0; o < p.out_channels; ++o) {
            const int64_t g = o / p.out_per_group(), og = o % p.out_per_group();
            const int64_t block = og / ukernel_.channels, lane = og % ukernel_.channels;
            for (int64_t ic = 0; ic < p.group_in_channels; ++ic) {
                for (int64_t t = 0; t < taps_; ++t) {
                    const int8_t w = c_.weight[(o * p.group_in_channels + ic) * taps_ + t];
                    tap_sums_[size_t(t * p.out_channels + o)] += w;
                    const int64_t j = ic / kWordBits;
                    const size_t at = size_t(
                        (((g * blocks_ + block) * taps_ + t) * words_ + j) * ukernel_.channels +
                        lane);
                    weights_[at] |= uint64_t{w < 0} << (ic % kWordBits);
                }
            }
        }
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
            for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                tap_offsets_.emplace_back(ky * p.dilation_h, kx * p.dilation_w);
            }
        }
        scale_sums();
        if (c_.pad_value == 0) {  // the file's sizes, which runs nearly always have
            const Shape& x = node.activation_input(0, DType::kInt8).shape;
            const Shape& y = node.output(0, DType::kInt8).shape;
            classes_ = padded_classes(x[2], x[3], y[2], y[3]);
        }
        // The row pass where a word holds a group's every input channel: its broadcast weights
        // cost the main loop more than the 4x32 tile's (A/B on BiRealNet18, Zen 5: 64 channels
        // 0.081 -> 0.076 ms a layer at 1 thread, 0.047 -> 0.042 at 2; 128 to 512 channels
        // 5-20% slower), which its epilogue repays only where the sums are short.
        if constexpr (kVectorEpilogue) {
            if (row != nullptr && p.stride_w == 1 && words_ == 1 &&
                ukernel_.channels % row->channels == 0 && row_requantization(*row)) {
                row_ = row;
                if (c_.pad_value == 0) {
                    row_missed_ = row_tile_missed(node.output(0, DType::kInt8).shape[3]);
                }
            }
        }
    }

    size_t workspace_bytes(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs,
                           int threads) const override {
        return runs_fast(inputs[0], outputs[0]) ? layout(inputs[0], outputs[0], threads).bytes()
                                                  : 0;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        if (!runs_fast(*io.input_shapes[0], *io.output_shapes[0])) {
            reference_->run(io, pool);
            return;
        }
        const Conv2dParams& p = params_;
        const Shape& x_shape = *io.input_shapes[0];
        const Shape& y_shape = *io.output_shapes[0];
        const int64_t batch = x_shape[0], height = x_shape[2], width = x_shape[3];
        const int64_t padded_h = height + 2 * p.pad_h, padded_w = width + 2 * p.pad_w;
        const int64_t pixel_words = p.groups * words_;
        const WorkspaceLayout parts = layout(x_shape, y_shape, pool.threads());
        uint64_t* image = reinterpret_cast<uint64_t*>(io.workspace);
        const int8_t* x = io.input<int8_t>(0);
        // Where word `word` of padded pixel (py, px) of sample n lies: pixel by pixel, or in word
        // planes for the row micro-kernel.
        const bool planar = row_ != nullptr;
        const auto word_at = [&](int64_t n, int64_t word, int64_t py, int64_t px) {
            return planar ? image + ((n * pixel_words + word) * padded_h + py) * padded_w + px
                          : image + ((n * padded_h + py) * padded_w + px) * pixel_words + word;
        };
        const int64_t pixel_step = planar ? 1 : pixel_words;  // between a word's pixels

        // Pack: one task per run of 64 pixels of a plane (across its rows where they are short),
        // group and word of 64 channels, whose signs the micro-kernel's packing (or the portable
        // one) turns into one word per pixel, each put in its place in the padded image; and one
        // per padded row, which zeroes the row's border (in the same call: one wait less).
        const int64_t plane_pixels = height * width, runs = ceil_div(plane_pixels, kWordBits);
        const int64_t pack_tasks = batch * p.groups * words_ * runs;
        const auto pack = ukernel_.pack != nullptr ? ukernel_.pack : pack_portable;
        pool.parallel_for(pack_tasks + batch * padded_h, [&](int64_t begin, int64_t end) {
            uint64_t bits[kWordBits];
            for (int64_t task = begin; task < end; ++task) {
                if (task >= pack_tasks) {
                    const int64_t row = task - pack_tasks, n = row / padded_h;
                    const int64_t py = row % padded_h, iy = py - p.pad_h;
                    const bool inside = iy >= 0 && iy < height;
                    // pixel by pixel one run of the row's words, else each word plane's
                    for (int64_t word = 0; word < (planar ? pixel_words : 1); ++word) {
                        uint64_t* out = word_at(n, word, py, 0);
                        const int64_t run = planar ? 1 : pixel_words;
                        if (!inside) {
                            std::fill(out, out + padded_w * run, uint64_t{0});
                            continue;
                        }
                        std::fill(out, out + p.pad_w * run, uint64_t{0});
                        std::fill(out + (p.pad_w + width) * run, out + padded_w * run,
                                  uint64_t{0});
                    }
                    continue;
                }
                const int64_t first = task % runs * kWordBits, j = task / runs % words_;
                const int64_t g = task / runs / words_ % p.groups;
                const int64_t n = task / runs / words_ / p.groups;
                const int64_t c0 = g * p.group_in_channels + j * kWordBits;
                const int64_t pixels = std::min(kWordBits, plane_pixels - first);
                pack(x + (n * x_shape[1] + c0) * plane_pixels + first, plane_pixels,
                     std::min(kWordBits, p.group_in_channels - j * kWordBits), pixels,
                     c_.thresholds.data() + c0, bits);
                // into place a row's stretch at a time (in word planes one copy: the row pass's
                // planes are most of the packing)
                uint64_t* word = word_at(n, g * words_ + j, 0, 0);
                for (int64_t i = 0; i < pixels;) {
                    const int64_t iy = (first + i) / width, ix = (first + i) % width;
                    const int64_t stretch = std::min(pixels - i, width - ix);
                    uint64_t* out = word + ((iy + p.pad_h) * padded_w + p.pad_w + ix) * pixel_step;
                    if (planar) {
                        std::copy(bits + i, bits + i + stretch, out);
                    } else {
                        for (int64_t k = 0; k < stretch; ++k) {
                            out[k * pixel_step] = bits[i + k];
                        }
                    }
                    i += stretch;
                }
            }
        });

        // Each tap's first word relative to the receptive field's, in the shared workspace after
        // the image.
        int64_t* offsets = reinterpret_cast<int64_t*>(
            io.workspace + WorkspaceLayout::aligned(size_t(image_words(x_shape)) * 8));
        for (size_t t = 0; t < tap_offsets_.size(); ++t) {
            offsets[t] = (tap_offsets_[t].first * padded_w + tap_offsets_[t].second) * pixel_step;
        }
        const int64_t out_h = y_shape[2], out_w = y_shape[3], plane = out_h * out_w;
        const int64_t chunks = ceil_div(plane, kChunk);
        int8_t* y = io.output<int8_t>(0);
        if (planar) {
            run_rows(image, batch, padded_h, padded_w, out_h, out_w, offsets, y, pool);
            return;
        }
        // Compute: one task per chunk of kChunk output pixels of a sample, in the output plane's
        // order (rows one after another), so a block's weights serve the whole chunk from L1 and
        // each channel's sums requantize as one run of its plane; and per part of the blocks, a
        // part a thread where the blocks allow (more where the chunks are fewer than 4 a thread:
        // a 7x7 plane is one chunk). Tasks go part by part, so each thread writes its own
        // channels' planes, the part of the output that an element-wise op after it (the add,
        // the PReLU) gives the same thread.
        const int64_t block_parts = std::min(
            blocks_, std::max<int64_t>(pool.threads(),
                                       ceil_div(4 * pool.threads(), batch * chunks)));
        pool.parallel_for_slots(batch * chunks * block_parts, [&](int64_t slot, int64_t begin,
                                                            int64_t end) {
            const int tile = ukernel_.pixels, lanes = ukernel_.channels;
            int32_t* sums = reinterpret_cast<int32_t*>(parts.slot(io.workspace, slot));
            int64_t field[kChunk];  // kChunk: whole tiles
            const uint64_t* fields[kChunk];
            int32_t missed_at[kChunk];  // per pixel: its class's row in classes_.missed
            bool passes[kChunk];        // per tile: whether a window passes the input
            for (int64_t task = begin; task < end; ++task) {
                const int64_t part = task / (batch * chunks), n = task % (batch * chunks) / chunks;
                const int64_t first = task % chunks * kChunk;
                const int64_t count = std::min<int64_t>(kChunk, plane - first);
                // Each pixel's receptive field (its first word in a sample's group), once for
                // every group and block, past the chunk up to whole tiles its last pixel again;
                // and the pixels whose windows pass the input (pad_value 0).
                std::fill(passes, passes + ceil_div(count, tile), false);
                for (int64_t i = 0, oy = first / out_w, ox = first % out_w; i < count; ++i) {
                    field[i] = (oy * p.stride_h * padded_w + ox * p.stride_w) * pixel_words;
                    if (!classes_.row.empty()) {
                        const int32_t c = classes_.row[size_t(oy)] * classes_.columns +
                                          classes_.column[size_t(ox)];
                        missed_at[i] = c * int32_t(p.out_channels);
                        passes[i / tile] = passes[i / tile] || c != classes_.interior;
                    }
                    if (++ox == out_w) {
                        ox = 0;
                        ++oy;
                    }
                }
                for (int64_t i = count; i < ceil_div(count, tile) * tile; ++i) {
                    field[i] = field[count - 1];
                    missed_at[i] = classes_.row.empty() ? 0 : missed_at[count - 1];
                }
                for (int64_t g = 0; g < p.groups; ++g) {
                    const uint64_t* sample = image + n * padded_h * padded_w * pixel_words +
                                             g * words_;
                    for (int64_t i = 0; i < ceil_div(count, tile) * tile; ++i) {
                        fields[i] = sample + field[i];
                    }
                    for (int64_t block = part * blocks_ / block_parts;
                         block < (part + 1) * blocks_ / block_parts; ++block) {
                        const uint64_t* w =
                            &weights_[size_t((g * blocks_ + block) * taps_ * words_ * lanes)];
                        const int64_t o0 = g * p.out_per_group() + block * lanes;
                        const int64_t outputs =
                            std::min<int64_t>(lanes, p.out_per_group() - block * lanes);
                        // pad_value 0: tiles with a window that passes the input less the
                        // missed taps' weights (PaddedClasses)
                        const int32_t* missed_rows[kMaxTilePixels];
                        for (int64_t i0 = 0; i0 < count; i0 += tile) {
                            for (int j = 0; j < tile && passes[i0 / tile]; ++j) {
                                missed_rows[j] = classes_.missed.data() + missed_at[i0 + j] + o0;
                            }
                            ukernel_.run(&fields[i0], offsets, taps_, words_, w,
                                         int32_t(p.products_per_output()), scale_,
                                         passes[i0 / tile] ? missed_rows : nullptr, sums + i0,
                                         kChunk);
                        }
                        for (int64_t k = 0; k < outputs; ++k) {
                            const int64_t o = o0 + k;
                            requantize_run(o, sums + k * kChunk, count,
                                           y + (n * y_shape[1] + o) * plane + first);
                        }
                    }
                }
            }
        });
    }

 private:
    // Output pixels per task: a multiple of every micro-kernel's pixels, whose sums of 32 channels
    // take 16 KiB. Each channel's run of them is one call of the requantization, whose setup
    // 64-pixel runs paid too often (BiRealNet18 1.93 -> 1.88 ms, Zen 5, 1 thread).
    static constexpr int64_t kChunk = 128;
    static constexpr int kMaxTilePixels = 8;  // of any micro-kernel

    // The row micro-kernel's pass over the word planes: tasks of one output row and a part of the
    // channel blocks, part-major as the tiles' tasks are (threads write their own channels'
    // planes), each block's weights serving the row's tiles from L1.
    void run_rows(const uint64_t* image, int64_t batch, int64_t padded_h, int64_t padded_w,
                  int64_t out_h, int64_t out_w, const int64_t* offsets, int8_t* y,
                  ThreadPool& pool) const {
        const Conv2dParams& p = params_;
        const BinaryRowUkernel& row = *row_;
        const int64_t plane_words = padded_h * padded_w, pixel_words = p.groups * words_;
        const int64_t blocks = ceil_div(p.out_per_group(), row.channels);  // a group's
        const int64_t tiles = ceil_div(out_w, row.pixels), rows = batch * out_h;
        const int64_t parts = std::min(
            blocks, std::max<int64_t>(pool.threads(), ceil_div(4 * pool.threads(), rows)));
        const int64_t lanes = ukernel_.channels;  // of the weights' packing
        pool.parallel_for(parts * rows, [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
                const int64_t part = task / rows, n = task % rows / out_h, oy = task % out_h;
                const int64_t* missed_at =
                    row_missed_.at.empty() ? nullptr
                                           : &row_missed_.at[size_t(classes_.row[size_t(oy)] *
                                                                    tiles)];
                for (int64_t g = 0; g < p.groups; ++g) {
                    const uint64_t* field = image + (n * pixel_words + g * words_) * plane_words +
                                            oy * p.stride_h * padded_w;
                    for (int64_t block = part * blocks / parts;
                         block < (part + 1) * blocks / parts; ++block) {
                        const int64_t first = block * row.channels;  // in the group
                        const int64_t o0 = g * p.out_per_group() + first;
                        const uint64_t* w = &weights_[size_t(
                            (g * blocks_ + first / lanes) * taps_ * words_ * lanes +
                            first % lanes)];
                        const Int8HighHalfBlock* requant =
                            &row_requant_[size_t((g * blocks + block) * row.channels / 2)];
                        int8_t* out = y + ((n * p.out_channels + o0) * out_h + oy) * out_w;
                        for (int64_t tile = 0; tile < tiles; ++tile) {
                            const int64_t ox0 = tile * row.pixels;
                            const int32_t* missed =
                                missed_at == nullptr || missed_at[tile] < 0
                                    ? nullptr
                                    : &row_missed_.values[size_t(missed_at[tile] +
                                                                 o0 * row.pixels)];
                            row.run(field + ox0, offsets, taps_, words_, plane_words, w, lanes,
                                    int32_t(p.products_per_output()), scale_, missed, requant,
                                    *output_, std::min<int64_t>(row.pixels, out_w - ox0),
                                    std::min<int64_t>(row.channels, p.out_per_group() - first),
                                    out + ox0, out_h * out_w);
                        }
                    }
                }
            }
        });
    }

    // The row micro-kernel's requantization: per block of its channels, per pair of them, the
    // high-half constants of each repeated in `pixels` lanes; false (no row pass) where a
    // shift, scaled, lies outside the form's range.
    bool row_requantization(const BinaryRowUkernel& row) {
        const Conv2dParams& p = params_;
        if (2 * row.pixels != 16) {  // a pair of channels per 16 lanes
            return false;
        }
        const int64_t blocks = ceil_div(p.out_per_group(), row.channels);
        const size_t lanes = size_t(row.channels * row.pixels);
        std::vector<int32_t> offset(lanes), multiplier(lanes), shift(lanes);
        row_requant_.resize(size_t(p.groups * blocks * row.channels / 2));
        for (int64_t g = 0; g < p.groups; ++g) {
            for (int64_t block = 0; block < blocks; ++block) {
                for (int64_t i = 0; i < row.channels; ++i) {
                    const int64_t og = block * row.channels + i;
                    const int64_t o = g * p.out_per_group() + og;
                    const bool valid = og < p.out_per_group();  // else stored by no one
                    for (int64_t k = 0; k < row.pixels; ++k) {
                        const size_t at = size_t(i * row.pixels + k);
                        offset[at] = valid ? scaled_bias_[size_t(o)] : 0;
                        multiplier[at] = valid ? c_.multiplier[o] : 0;
                        shift[at] = valid ? scaled_shift_[size_t(o)] : kHighHalfMinShift;
                    }
                }
                if (!int8_high_half_blocks(
                        offset.data(), multiplier.data(), shift.data(), int64_t(lanes), *output_,
                        &row_requant_[size_t((g * blocks + block) * row.channels / 2)])) {
                    row_requant_.clear();
                    return false;
                }
            }
        }
        return true;
    }

    // pad_value 0, the row pass: per row class and tile of `pixels` output columns with a window
    // that passes the input, each channel's missed weights per pixel ([O][pixels], 0 past the
    // row), as the row micro-kernel subtracts them; -1 for a tile whose windows miss nothing.
    struct RowTileMissed {
        std::vector<int64_t> at;  // [row class][tile]: offset into values, or -1
        std::vector<int32_t> values;
    };

    RowTileMissed row_tile_missed(int64_t out_w) const {
        const Conv2dParams& p = params_;
        const int64_t pixels = row_->pixels, tiles = ceil_div(out_w, pixels);
        const int64_t row_classes =
            *std::max_element(classes_.row.begin(), classes_.row.end()) + 1;
        RowTileMissed table;
        for (int64_t r = 0; r < row_classes; ++r) {
            for (int64_t tile = 0; tile < tiles; ++tile) {
                const int64_t ox0 = tile * pixels, valid = std::min(pixels, out_w - ox0);
                bool passes = false;
                for (int64_t k = 0; k < valid; ++k) {
                    passes = passes || r * classes_.columns + classes_.column[size_t(ox0 + k)] !=
                                           classes_.interior;
                }
                if (!passes) {
                    table.at.push_back(-1);
                    continue;
                }
                table.at.push_back(int64_t(table.values.size()));
                table.values.resize(table.values.size() + size_t(p.out_channels * pixels), 0);
                int32_t* values = &table.values[size_t(table.at.back())];
                for (int64_t k = 0; k < valid; ++k) {
                    const int64_t c = r * classes_.columns + classes_.column[size_t(ox0 + k)];
                    for (int64_t o = 0; o < p.out_channels; ++o) {
                        values[o * pixels + k] = classes_.missed[size_t(c * p.out_channels + o)];
                    }
                }
            }
        }
        return table;
    }

    // The bit image and the tap offsets shared; a chunk's sums per thread.
    WorkspaceLayout layout(const Shape& x, const Shape&, int threads) const {
        WorkspaceLayout parts;
        parts.shared = WorkspaceLayout::aligned(size_t(image_words(x)) * 8) + size_t(taps_) * 8;
        parts.per_thread = size_t(ukernel_.channels * kChunk) * sizeof(int32_t);
        parts.threads = threads;
        return parts;
    }

    // A binary conv's sums are small (|sum| <= K, its products), and its requantization's scale
    // ratio large: shifts of 29 to 32 in BiRealNet18, below the high-half form's 33, so its
    // epilogue took the int64 form. Sums scaled by 2^e with the shift raised by e give the same
    // bytes, (2^e a M + 2^(n+e-1)) >> (n+e) = (a M + 2^(n-1)) >> n: the micro-kernel scales its
    // sums, and the bias and the missed taps' sums are scaled here, as far as every channel's
    // |bias| + K keeps int32 (BiRealNet18 1.92 -> 1.85 ms, Zen 5, 1 thread).
    void scale_sums() {
        const Conv2dParams& p = params_;
        int64_t largest = 0;
        int32_t least_shift = kHighHalfMinShift, greatest_shift = 0;
        for (int64_t o = 0; o < p.out_channels; ++o) {
            largest = std::max(largest, std::abs(int64_t{c_.bias[size_t(o)]}));
            least_shift = std::min(least_shift, c_.shift[o]);
            greatest_shift = std::max(greatest_shift, c_.shift[o]);
        }
        largest += p.products_per_output();
        // every shift stays within spec 2's 62
        while (scale_ < kHighHalfMinShift - least_shift && greatest_shift + scale_ < 62 &&
               (largest << (scale_ + 1)) < (int64_t{1} << 31)) {
            ++scale_;
        }
        scaled_bias_.resize(size_t(p.out_channels));
        scaled_shift_.resize(size_t(p.out_channels));
        for (int64_t o = 0; o < p.out_channels; ++o) {
            scaled_bias_[size_t(o)] = c_.bias[size_t(o)] * (int32_t{1} << scale_);
            scaled_shift_[size_t(o)] = c_.shift[o] + scale_;
        }
        for (int32_t& sum : tap_sums_) {
            sum *= int32_t{1} << scale_;
        }
    }

    // pad_value 0: a padded tap adds nothing, but the image read it as +1, so a window that passes
    // the input sums less the weights of the taps it misses. Which those are depends only on the
    // range of kernel rows its output row keeps inside the input and the range of kernel columns
    // its column keeps: one class per pair of ranges (a 3x3 window with padding 1 has 3 x 3, one
    // of them the interior's), and per class and output channel the missed taps' sum of weights,
    // computed at load for the file's sizes.
    struct PaddedClasses {
        int64_t height = -1, width = -1;   // the input's, which they are for
        std::vector<int32_t> row, column;  // per output row / column: its range's index
        int32_t columns = 0;               // column ranges
        int32_t interior = -1;             // the class missing no tap, if any
        std::vector<int32_t> missed;       // [row range][column range][O]
    };

    // Per output position along one axis, the index of its range [lo, hi) of kernel positions
    // inside the input (of `size`), and the ranges.
    static std::vector<int32_t> kept_ranges(int64_t outputs, int64_t stride, int64_t pad,
                                            int64_t kernel, int64_t dilation, int64_t size,
                                            std::vector<std::pair<int64_t, int64_t>>* ranges) {
        std::vector<int32_t> index(static_cast<size_t>(outputs));
        for (int64_t o = 0; o < outputs; ++o) {
            const int64_t start = o * stride - pad;
            int64_t lo = 0;
            while (lo < kernel && start + lo * dilation < 0) {
                ++lo;
            }
            int64_t hi = lo;
            while (hi < kernel && start + hi * dilation < size) {
                ++hi;
            }
            const auto at = std::find(ranges->begin(), ranges->end(), std::make_pair(lo, hi));
            index[size_t(o)] = int32_t(at - ranges->begin());
            if (at == ranges->end()) {
                ranges->emplace_back(lo, hi);
            }
        }
        return index;
    }

    PaddedClasses padded_classes(int64_t height, int64_t width, int64_t out_h,
                                 int64_t out_w) const {
        const Conv2dParams& p = params_;
        std::vector<std::pair<int64_t, int64_t>> rows, columns;
        PaddedClasses classes;
        classes.height = height;
        classes.width = width;
        classes.row = kept_ranges(out_h, p.stride_h, p.pad_h, p.kernel_h, p.dilation_h, height,
                                  &rows);
        classes.column = kept_ranges(out_w, p.stride_w, p.pad_w, p.kernel_w, p.dilation_w,
                                     width, &columns);
        classes.columns = int32_t(columns.size());
        // with a micro-kernel's channels of zeros past the last row, which its last block reads
        classes.missed.assign(
            rows.size() * columns.size() * size_t(p.out_channels) + size_t(ukernel_.channels), 0);
        for (size_t r = 0; r < rows.size(); ++r) {
            for (size_t c = 0; c < columns.size(); ++c) {
                const int32_t at = int32_t(r * columns.size() + c);
                int32_t* missed = classes.missed.data() + at * p.out_channels;
                bool none = true;
                for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
                    for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                        if (ky >= rows[r].first && ky < rows[r].second &&
                            kx >= columns[c].first && kx < columns[c].second) {
                            continue;
                        }
                        none = false;
                        const int32_t* sums = &tap_sums_[size_t((ky * p.kernel_w + kx) *
                                                                p.out_channels)];
                        for (int64_t o = 0; o < p.out_channels; ++o) {
                            missed[o] += sums[o];
                        }
                    }
                }
                if (none) {
                    classes.interior = at;
                }
            }
        }
        return classes;
    }

    // A run of output channel o's plane: bias, then spec 2's requantization, by the vector
    // epilogue where the level has one.
    void requantize_run(int64_t o, const int32_t* sums, int64_t count, int8_t* y) const {
        if constexpr (kVectorEpilogue) {
            requantize_->channel(sums, count, 1, count, scaled_bias_[size_t(o)],
                                 c_.multiplier[o], scaled_shift_[size_t(o)], *output_, y);
        } else {
            for (int64_t i = 0; i < count; ++i) {
                y[i] = arith::requantize(scaled_bias_[size_t(o)] + sums[i], c_.multiplier[o],
                                         scaled_shift_[size_t(o)], c_.output_zero_point,
                                         c_.clamp.lo, c_.clamp.hi);
            }
        }
    }

    // Whether the padded bit image stays within a few times the tensors' own size (padding far
    // wider than the input, a stride that skips most of it, would make it huge for a small
    // output), and with pad_value 0 whether the input has the file's size, whose classes of
    // windows it has (a session changes only the batch). Else the reference's loop runs.
    bool runs_fast(const Shape& x, const Shape& y) const {
        if (c_.fused_prelu()) {  // the epilogues take one multiplier per channel
            return false;
        }
        if (c_.pad_value == 0 && (x[2] != classes_.height || x[3] != classes_.width)) {
            return false;
        }
        const Conv2dParams& p = params_;
        const double words = double(x[0]) * double(x[2] + 2 * p.pad_h) *
                             double(x[3] + 2 * p.pad_w) * double(p.groups * words_);  // no overflow
        return words <= 2 * double(element_count(x) + element_count(y)) + double(1 << 16);
    }

    // The bit image's words, and the row pass's slack: its tiles read up to `pixels` - 1 words
    // past a row's last, past the image's end for the last one.
    int64_t image_words(const Shape& x) const {
        const Conv2dParams& p = params_;
        return x[0] * (x[2] + 2 * p.pad_h) * (x[3] + 2 * p.pad_w) * p.groups * words_ +
               (row_ != nullptr ? row_->pixels : 0);
    }

    const Conv2dInt8Constants c_;
    const BinaryPopcountUkernel& ukernel_;
    const Int8RequantizeUkernel* const requantize_;  // kVectorEpilogue's
    const std::unique_ptr<OpKernel> reference_;
    std::optional<Int8Output> output_;  // the vector epilogue's plan
    int64_t taps_ = 0, words_ = 0, blocks_ = 0;
    std::vector<uint64_t> weights_;
    int scale_ = 0;  // the sums' scale 2^scale_ (scale_sums)
    std::vector<int32_t> scaled_bias_, scaled_shift_;    // per output channel
    std::vector<int32_t> tap_sums_;  // [taps][O]: sum over channels of w, 2^scale_ times
    std::vector<std::pair<int64_t, int64_t>> tap_offsets_;  // (dy, dx) of each tap
    PaddedClasses classes_;  // pad_value 0: for the file's sizes
    // The row pass (stride_w 1, every scaled shift in the high-half form), where the level has it.
    const BinaryRowUkernel* row_ = nullptr;
    std::vector<Int8HighHalfBlock> row_requant_;  // [groups][blocks][pairs]
    RowTileMissed row_missed_;                    // pad_value 0
};

template <const BinaryPopcountUkernel& kUkernel, const Int8RequantizeUkernel& kRequantize>
std::unique_ptr<OpKernel> make_vector(const NodeView& node) {
    return std::make_unique<Conv2dBinaryPopcount<true>>(node, kUkernel, &kRequantize, nullptr);
}

template <const BinaryPopcountUkernel& kUkernel, const Int8RequantizeUkernel& kRequantize,
          const BinaryRowUkernel& kRow>
std::unique_ptr<OpKernel> make_with_rows(const NodeView& node) {
    return std::make_unique<Conv2dBinaryPopcount<true>>(node, kUkernel, &kRequantize, &kRow);
}

template <const BinaryPopcountUkernel& kUkernel>
std::unique_ptr<OpKernel> make_scalar_epilogue(const NodeView& node) {
    return std::make_unique<Conv2dBinaryPopcount<false>>(node, kUkernel, nullptr, nullptr);
}

}  // namespace

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kConv2dBinaryPopcount4x32Avx512Vbmi = {
    "conv2d_binary_popcount_4x32_avx512_vbmi", IsaLevel::kAvx512Vbmi,
    make_with_rows<kBinaryPopcount4x32Avx512Vbmi, kInt8RequantizeAvx512,
                   kBinaryPopcountRow8x16Avx512Vbmi>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kConv2dBinaryPopcount4x8Avx2 = {
    "conv2d_binary_popcount_4x8_avx2", IsaLevel::kAvx2,
    make_vector<kBinaryPopcount4x8Avx2, kInt8RequantizeAvx2>};
#endif
#if QTK_ARM_NEON
extern const OpAlgo kConv2dBinaryPopcount4x8Neon = {
    "conv2d_binary_popcount_4x8_neon", IsaLevel::kNeon,
    make_vector<kBinaryPopcount4x8Neon, kInt8RequantizeNeon>};
#endif
extern const OpAlgo kConv2dBinaryPopcount4x8Portable = {
    "conv2d_binary_popcount_4x8_portable", IsaLevel::kScalar,
    make_scalar_epilogue<kBinaryPopcount4x8Portable>};

}  // namespace detail
}  // namespace qtk
