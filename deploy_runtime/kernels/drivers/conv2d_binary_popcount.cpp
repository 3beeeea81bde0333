// conv2d_binary by xor and popcount (spec 24), NCHW, any stride, padding, dilation and groups.
//
// Each run packs the input's signs into a bit image [N, H + 2 pad_h, W + 2 pad_w, groups, words]
// of 64-bit words (bit 1 for -1, channel c of a group at bit c mod 64 of word c / 64; padding and
// the bits past a group's channels 0), so every output pixel's receptive field is `taps` runs of
// `words` words at fixed offsets from its first word. A micro-kernel (popcount_binary.h) counts
// differing bits against the weights packed alike, and the epilogue turns counts into the sum:
//   sum = K - 2 count                              padded bits read +1, as pad_value 1 wants;
//   sum -= sum over padded taps of sum_c w[o][c][t]  for pad_value 0, on border pixels only.
// Then bias and the int8 conv's requantization. Threads take output rows.
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "../contracts/popcount_binary.h"
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

// The portable micro-kernel: any CPU, and the contract in its plainest form.
template <int kPixels, int kChannels>
void popcount_portable(const uint64_t* const* pixel, const int64_t* tap_offset, int64_t taps,
                       int64_t words, const uint64_t* w, int32_t* counts) {
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
    std::copy(&acc[0][0], &acc[0][0] + kPixels * kChannels, counts);
}

const BinaryPopcountUkernel kBinaryPopcount4x8Portable = {4, 8, popcount_portable<4, 8>};

class Conv2dBinaryPopcount final : public Conv2dKernel {
 public:
    Conv2dBinaryPopcount(const NodeView& node, const BinaryPopcountUkernel& ukernel)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kInt8, DType::kInt32)),
          c_(node, params_),
          ukernel_(ukernel),
          reference_(make_conv2d_int8_reference(node)) {
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
                    tap_sums_[size_t(o * taps_ + t)] += w;
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
    }

    size_t workspace_bytes(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs,
                           int) const override {
        return packs(inputs[0], outputs[0]) ? size_t(image_words(inputs[0])) * sizeof(uint64_t)
                                            : 0;
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        if (!packs(*io.input_shapes[0], *io.output_shapes[0])) {
            reference_->run(io, pool);
            return;
        }
        const Conv2dParams& p = params_;
        const Shape& x_shape = *io.input_shapes[0];
        const Shape& y_shape = *io.output_shapes[0];
        const int64_t batch = x_shape[0], height = x_shape[2], width = x_shape[3];
        const int64_t padded_h = height + 2 * p.pad_h, padded_w = width + 2 * p.pad_w;
        const int64_t pixel_words = p.groups * words_;
        uint64_t* image = reinterpret_cast<uint64_t*>(io.workspace);
        const int8_t* x = io.input<int8_t>(0);

        // Pack: one task per padded row.
        pool.parallel_for(batch * padded_h, [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
                const int64_t n = row / padded_h, iy = row % padded_h - p.pad_h;
                uint64_t* out = image + row * padded_w * pixel_words;
                std::fill(out, out + padded_w * pixel_words, uint64_t{0});
                if (iy < 0 || iy >= height) {
                    continue;
                }
                for (int64_t c = 0; c < p.groups * p.group_in_channels; ++c) {
                    const int64_t g = c / p.group_in_channels, ic = c % p.group_in_channels;
                    const int8_t* in = x + ((n * x_shape[1] + c) * height + iy) * width;
                    uint64_t* word = out + p.pad_w * pixel_words + g * words_ + ic / kWordBits;
                    const int bit = int(ic % kWordBits);
                    for (int64_t ix = 0; ix < width; ++ix, word += pixel_words) {
                        *word |= uint64_t{in[ix] < c_.input_zero_point} << bit;
                    }
                }
            }
        });

        const int64_t out_h = y_shape[2], out_w = y_shape[3];
        std::vector<int64_t> offsets(tap_offsets_.size());
        for (size_t t = 0; t < offsets.size(); ++t) {
            offsets[t] = (tap_offsets_[t].first * padded_w + tap_offsets_[t].second) * pixel_words;
        }
        int8_t* y = io.output<int8_t>(0);
        // Compute: one task per output row.
        pool.parallel_for(batch * out_h, [&](int64_t begin, int64_t end) {
            const int tile = ukernel_.pixels, lanes = ukernel_.channels;
            std::vector<const uint64_t*> pixel(size_t(tile), nullptr);
            std::vector<int32_t> counts(size_t(tile * lanes));
            for (int64_t row = begin; row < end; ++row) {
                const int64_t n = row / out_h, oy = row % out_h;
                const uint64_t* image_row =
                    image + (n * padded_h + oy * p.stride_h) * padded_w * pixel_words;
                for (int64_t ox0 = 0; ox0 < out_w; ox0 += tile) {
                    const int64_t valid = std::min<int64_t>(tile, out_w - ox0);
                    for (int q = 0; q < tile; ++q) {  // past the row's end: repeat its last pixel
                        pixel[size_t(q)] =
                            image_row + (ox0 + std::min<int64_t>(q, valid - 1)) * p.stride_w *
                                            pixel_words;
                    }
                    for (int64_t g = 0; g < p.groups; ++g) {
                        for (int64_t block = 0; block < blocks_; ++block) {
                            ukernel_.run(pixel.data(), offsets.data(), taps_, words_,
                                         &weights_[size_t((g * blocks_ + block) * taps_ * words_ *
                                                          lanes)],
                                         counts.data());
                            const int64_t o0 = g * p.out_per_group() + block * lanes;
                            const int64_t outputs =
                                std::min<int64_t>(lanes, p.out_per_group() - block * lanes);
                            for (int64_t q = 0; q < valid; ++q) {
                                finish(n, oy, ox0 + q, o0, outputs, &counts[size_t(q * lanes)],
                                       height, width, y, y_shape);
                            }
                        }
                        // the next group's words
                        for (const uint64_t*& at : pixel) {
                            at += words_;
                        }
                    }
                    for (const uint64_t*& at : pixel) {
                        at -= p.groups * words_;
                    }
                }
            }
        });
    }

 private:
    // Whether the padded bit image stays within a few times the tensors' own size. Padding far
    // wider than the input (a stride that skips most of it) would make it huge for a small output:
    // such a layer takes the reference's loop.
    bool packs(const Shape& x, const Shape& y) const {
        const Conv2dParams& p = params_;
        const double words = double(x[0]) * double(x[2] + 2 * p.pad_h) *
                             double(x[3] + 2 * p.pad_w) * double(p.groups * words_);  // no overflow
        return words <= 2 * double(element_count(x) + element_count(y)) + double(1 << 16);
    }

    int64_t image_words(const Shape& x) const {
        const Conv2dParams& p = params_;
        return x[0] * (x[2] + 2 * p.pad_h) * (x[3] + 2 * p.pad_w) * p.groups * words_;
    }

    // Outputs o0 .. o0 + outputs - 1 of pixel (oy, ox) from their counts.
    void finish(int64_t n, int64_t oy, int64_t ox, int64_t o0, int64_t outputs,
                const int32_t* counts, int64_t height, int64_t width, int8_t* y,
                const Shape& y_shape) const {
        const Conv2dParams& p = params_;
        const int64_t iy0 = oy * p.stride_h - p.pad_h, ix0 = ox * p.stride_w - p.pad_w;
        const bool border = c_.pad_value == 0 &&
                            (iy0 < 0 || ix0 < 0 ||
                             iy0 + (p.kernel_h - 1) * p.dilation_h >= height ||
                             ix0 + (p.kernel_w - 1) * p.dilation_w >= width);
        const int32_t products = static_cast<int32_t>(p.products_per_output());
        for (int64_t k = 0; k < outputs; ++k) {
            const int64_t o = o0 + k;
            int32_t sum = products - 2 * counts[k];
            if (border) {
                for (int64_t t = 0; t < taps_; ++t) {
                    const int64_t iy = iy0 + tap_offsets_[size_t(t)].first;
                    const int64_t ix = ix0 + tap_offsets_[size_t(t)].second;
                    if (iy < 0 || iy >= height || ix < 0 || ix >= width) {
                        sum -= tap_sums_[size_t(o * taps_ + t)];
                    }
                }
            }
            y[((n * y_shape[1] + o) * y_shape[2] + oy) * y_shape[3] + ox] =
                c_.requantize(o, c_.bias[size_t(o)] + sum);
        }
    }

    const Conv2dInt8Constants c_;
    const BinaryPopcountUkernel& ukernel_;
    const std::unique_ptr<OpKernel> reference_;
    int64_t taps_ = 0, words_ = 0, blocks_ = 0;
    std::vector<uint64_t> weights_;
    std::vector<int32_t> tap_sums_;                       // [O][taps]: sum over channels of w
    std::vector<std::pair<int64_t, int64_t>> tap_offsets_;  // (dy, dx) of each tap
};

template <const BinaryPopcountUkernel& kUkernel>
std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<Conv2dBinaryPopcount>(node, kUkernel);
}

}  // namespace

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kConv2dBinaryPopcount4x32Avx512Vbmi = {
    "conv2d_binary_popcount_4x32_avx512_vbmi", IsaLevel::kAvx512Vbmi,
    make<kBinaryPopcount4x32Avx512Vbmi>};
#endif
extern const OpAlgo kConv2dBinaryPopcount4x8Portable = {
    "conv2d_binary_popcount_4x8_portable", IsaLevel::kScalar, make<kBinaryPopcount4x8Portable>};

}  // namespace detail
}  // namespace qtk
