// Every conv2d_binary algorithm (spec 24) against a naive sum, byte for byte, through Model and
// Session: at each QTK_ISA level this CPU runs, the algorithm the level picks (checked by name),
// over channel counts either side of the 64-bit words (1, 63, 64, 65, 130), output channels either
// side of the micro-kernels' 8 and 32 (and odd, for the row micro-kernel's pairs of 16), widths
// either side of the 4-pixel tiles, the row micro-kernel's 8-pixel ones (stride 1, up to 64 input
// channels a group), the 64-pixel masks and the 128-pixel tasks (the packing's runs of 64 pixels
// crossing rows), kernels 1x1 to 5x5 and
// 1x3, strides 1 to 3, padding 0 to 2 with both pad values, dilation 2, groups 2 and 3, batch 3
// and 1, 1 and 2 threads; padding far past the input (the driver's reference loop); inputs all at
// the zero point (every sign +1) and all below it; requantization shifts either side of 33; sign
// thresholds per input channel (RSign), -128 and 128 among them.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check.h"
#include "cpu_features.h"
#include "model_builder.h"
#include "qtk/arithmetic.h"
#include "qtk/runtime.h"

using qtk::detail::cpu_supports;
using qtk::detail::isa_name;
using qtk::detail::IsaLevel;
using qtk_test::AttrSpec;
using qtk_test::ModelBuilder;
using qtk_test::Rng;

namespace {

struct Geometry {
    int64_t in_channels, out_channels, kernel_h, kernel_w, stride, pad, dilation, groups, height,
        width;
};

std::string describe(const Geometry& g, int pad_value) {
    return std::to_string(g.in_channels) + "->" + std::to_string(g.out_channels) + " " +
           std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + " stride " +
           std::to_string(g.stride) + " pad " + std::to_string(g.pad) + " (value " +
           std::to_string(pad_value) + ") dilation " + std::to_string(g.dilation) + " groups " +
           std::to_string(g.groups) + " on " + std::to_string(g.height) + "x" +
           std::to_string(g.width);
}

int64_t output_size(int64_t input, int64_t kernel, const Geometry& g) {
    return (input + 2 * g.pad - g.dilation * (kernel - 1) - 1) / g.stride + 1;
}

enum class Fill { kRandom, kZeroPoint, kBelow };

struct Case {
    Geometry g;
    int pad_value;
    std::vector<uint8_t> bytes;
    std::vector<int8_t> x, weight;  // x: batch 3
    std::vector<int32_t> bias, multiplier, shift;
    int32_t zx, zy, lo, hi;
    std::vector<int32_t> thresholds;  // per input channel (RSign's), or empty: the zero point
};

Case build(const Geometry& g, int pad_value, Fill fill, uint64_t seed) {
    Rng rng(seed);
    Case c{g, pad_value, {}, {}, {}, {}, {}, {}, 0, 0, -128, 127, {}};
    const int64_t cg = g.in_channels / g.groups;
    const int64_t products = cg * g.kernel_h * g.kernel_w;
    c.weight.resize(size_t(g.out_channels * products));
    for (int8_t& w : c.weight) {
        w = static_cast<int8_t>(rng.uniform(0, 1) == 0 ? -1 : 1);
    }
    // Every other case a scale ratio of 20 / sqrt(K), the spread of K random signs over a few
    // steps, with biases of that size: shifts 28 to 33, below the high-half form's (the driver
    // scales the sums up); else the common small ratio, shifts of 35 and more.
    const bool large_ratio = seed % 2 == 0;
    const double spread = std::sqrt(double(products));
    c.bias = qtk_test::random_bias(rng, size_t(g.out_channels));
    if (large_ratio) {
        for (int32_t& b : c.bias) {
            b = static_cast<int32_t>(b * 2.0 * spread / 2000.0);
        }
    }
    c.zx = static_cast<int32_t>(rng.uniform(-100, 100));
    c.zy = static_cast<int32_t>(rng.uniform(-128, 127));
    if (rng.uniform(0, 2) == 0) {
        c.lo = c.zy;  // a fused ReLU
    }
    const size_t x_count = size_t(3 * g.in_channels * g.height * g.width);
    c.x = fill == Fill::kRandom      ? rng.int8s(x_count)
          : fill == Fill::kZeroPoint ? std::vector<int8_t>(x_count, int8_t(c.zx))
                                     : std::vector<int8_t>(x_count, int8_t(c.zx - 1));
    const int64_t oh = output_size(g.height, g.kernel_h, g);
    const int64_t ow = output_size(g.width, g.kernel_w, g);

    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, g.in_channels, g.height, g.width}, 0.05f, c.zx);
    const uint32_t w = b.weight("conv.weight", {g.out_channels, cg, g.kernel_h, g.kernel_w},
                                c.weight);
    const uint32_t bi = b.bias("conv.bias", {g.out_channels}, c.bias);
    const uint32_t y = b.activation("y", {1, g.out_channels, oh, ow}, 0.1f, c.zy);
    // sums of up to `products` signs: aim the scale at their typical size
    std::vector<AttrSpec> attrs = qtk_test::requant_attrs(
        size_t(g.out_channels), 1.0,
        large_ratio ? 6.0 / spread : 40.0 / (double(products) + 2000.0), 0.3, c.lo, c.hi);
    if (large_ratio && seed % 4 == 0 && g.out_channels > 1) {
        attrs[1].ints[1] = 61;  // a channel near spec 2's last shift limits the sums' scaling
    }
    c.multiplier.assign(attrs[0].ints.begin(), attrs[0].ints.end());
    c.shift.assign(attrs[1].ints.begin(), attrs[1].ints.end());
    attrs.insert(attrs.begin(),
                 {AttrSpec("stride", {g.stride, g.stride}), AttrSpec("padding", {g.pad, g.pad}),
                  AttrSpec("dilation", {g.dilation, g.dilation}), AttrSpec("groups", {g.groups}),
                  AttrSpec("pad_value", {pad_value})});
    if (seed % 3 == 0) {  // thresholds per input channel, the extremes (never, always) among them
        std::vector<int64_t> t;
        for (int64_t ch = 0; ch < g.in_channels; ++ch) {
            t.push_back(ch % 7 == 3 ? (ch % 2 ? 128 : -128) : rng.uniform(-100, 100));
            c.thresholds.push_back(int32_t(t.back()));
        }
        attrs.push_back(AttrSpec("thresholds", t));
    }
    b.node("conv2d_binary", "conv", {x, w, bi}, {y}, attrs);
    b.inputs = {x};
    b.outputs = {y};
    c.bytes = b.build();
    return c;
}

// Spec 24 as written: the sign of each input, pad_value at padded positions, one product per
// weight, then spec 2.
std::vector<int8_t> naive(const Case& c) {
    const Geometry& g = c.g;
    const int64_t cg = g.in_channels / g.groups, og = g.out_channels / g.groups;
    const int64_t oh = output_size(g.height, g.kernel_h, g);
    const int64_t ow = output_size(g.width, g.kernel_w, g);
    std::vector<int8_t> y;
    for (int64_t n = 0; n < 3; ++n) {
        for (int64_t o = 0; o < g.out_channels; ++o) {
            for (int64_t oy = 0; oy < oh; ++oy) {
                for (int64_t ox = 0; ox < ow; ++ox) {
                    int32_t acc = c.bias[size_t(o)];
                    for (int64_t ic = 0; ic < cg; ++ic) {
                        const int64_t channel = o / og * cg + ic;
                        for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
                            for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
                                const int64_t iy = oy * g.stride - g.pad + ky * g.dilation;
                                const int64_t ix = ox * g.stride - g.pad + kx * g.dilation;
                                const bool inside =
                                    iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
                                const int32_t sign =
                                    inside ? qtk::arith::binary_sign(
                                                 c.x[size_t(((n * g.in_channels + channel) *
                                                                 g.height + iy) * g.width + ix)],
                                                 c.thresholds.empty()
                                                     ? c.zx
                                                     : c.thresholds[size_t(channel)])
                                           : c.pad_value;
                                acc += sign * c.weight[size_t(((o * cg + ic) * g.kernel_h + ky) *
                                                                  g.kernel_w + kx)];
                            }
                        }
                    }
                    y.push_back(qtk::arith::requantize(acc, c.multiplier[size_t(o)],
                                                       c.shift[size_t(o)], c.zy, c.lo, c.hi));
                }
            }
        }
    }
    return y;
}

std::vector<int8_t> run(const Case& c, IsaLevel level, int threads, int64_t batch,
                        std::string* algorithm) {
    qtk_test::set_env("QTK_ISA", isa_name(level));
    const auto model = qtk::Model::from_bytes(c.bytes.data(), c.bytes.size());
    *algorithm = model->algorithms().at(0);
    qtk::Session session(model, {threads});
    return session.run({c.x.data()}, {{batch, c.g.in_channels, c.g.height, c.g.width}})[0].data;
}

// The algorithm each level picks where the CPU has it.
const char* expected_algorithm(IsaLevel level) {
    switch (level) {
        case IsaLevel::kScalar:
            return "conv2d_binary_popcount_4x8_portable";
        case IsaLevel::kAvx2:
        case IsaLevel::kAvxVnni:
        case IsaLevel::kAvx512Vnni:
#if QTK_X86_AVX2
            return "conv2d_binary_popcount_4x8_avx2";
#else
            return "conv2d_binary_popcount_4x8_portable";
#endif
        case IsaLevel::kAvx512Vbmi:
        case IsaLevel::kAmxInt8:
#if QTK_X86_AVX512_VBMI
            return "conv2d_binary_popcount_4x32_avx512_vbmi";
#else
            return nullptr;
#endif
        case IsaLevel::kNeon:
        case IsaLevel::kDotprod:
        case IsaLevel::kI8mm:
#if QTK_ARM_NEON
            return "conv2d_binary_popcount_4x8_neon";
#else
            return "conv2d_binary_popcount_4x8_portable";
#endif
    }
    return nullptr;
}

int g_cases = 0;

void check_case(const Geometry& g, int pad_value, Fill fill = Fill::kRandom) {
    ++g_cases;
    const Case c = build(g, pad_value, fill, 7000 + uint64_t(g_cases));
    const std::vector<int8_t> want = naive(c);
    const size_t per_sample = want.size() / 3;
    for (IsaLevel level : qtk::detail::kIsaLevels) {
        if (!cpu_supports(level)) {
            continue;
        }
        for (int threads : {1, 2}) {
            for (int64_t batch : {3, 1}) {
                std::string algorithm;
                const std::vector<int8_t> got = run(c, level, threads, batch, &algorithm);
                const char* expected = expected_algorithm(level);
                if (expected != nullptr && algorithm != expected) {
                    qtk_test::report_failure(__FILE__, __LINE__,
                                             std::string("QTK_ISA=") + isa_name(level) +
                                                 " picked " + algorithm + ", not " + expected);
                }
                const std::vector<int8_t> first(want.begin(),
                                                want.begin() + std::ptrdiff_t(per_sample));
                if (got != (batch == 3 ? want : first)) {
                    qtk_test::report_failure(__FILE__, __LINE__,
                                             algorithm + " differs from spec 24 on " +
                                                 describe(g, pad_value) + ", threads " +
                                                 std::to_string(threads) + ", batch " +
                                                 std::to_string(batch));
                }
            }
        }
    }
}

}  // namespace

int main() {
    for (int pad_value : {0, 1}) {
        for (int64_t channels : {1, 63, 64, 65, 130}) {
            for (int64_t outputs : {1, 7, 9, 33}) {
                check_case({channels, outputs, 3, 3, 1, 1, 1, 1, 5, 6}, pad_value);
            }
        }
        for (int64_t width : {1, 3, 4, 5, 9, 63, 64, 65, 70}) {
            check_case({16, 32, 3, 3, 1, 1, 1, 1, 3, width}, pad_value);
        }
        check_case({8, 8, 3, 3, 1, 1, 1, 1, 9, 9}, pad_value);     // 81 pixels: 64-pixel packs
        check_case({8, 8, 3, 3, 1, 1, 1, 1, 12, 12}, pad_value);   // 144: two 128-pixel tasks
        check_case({130, 9, 3, 3, 1, 1, 1, 1, 13, 17}, pad_value);  // packed 64 pixels across rows
        check_case({8, 40, 1, 1, 1, 0, 1, 1, 7, 7}, pad_value);
        check_case({8, 40, 1, 3, 1, 1, 1, 1, 4, 9}, pad_value);
        check_case({24, 16, 5, 5, 2, 2, 1, 1, 11, 12}, pad_value);
        check_case({32, 9, 3, 3, 3, 2, 1, 1, 10, 13}, pad_value);
        check_case({20, 12, 3, 3, 1, 2, 2, 1, 8, 8}, pad_value);
        check_case({24, 12, 3, 3, 1, 1, 1, 2, 6, 7}, pad_value);   // groups
        check_case({129, 66, 3, 3, 2, 1, 1, 3, 7, 5}, pad_value);  // 43 channels per group
        check_case({4, 6, 3, 3, 150, 150, 1, 1, 2, 3}, pad_value);  // the reference loop
        check_case({65, 33, 3, 3, 1, 1, 1, 1, 5, 5}, pad_value, Fill::kZeroPoint);
        check_case({65, 33, 3, 3, 1, 1, 1, 1, 5, 5}, pad_value, Fill::kBelow);
    }
    qtk_test::set_env("QTK_ISA", nullptr);
    std::printf("%d binary conv cases checked against spec 24 at every level\n", g_cases);
    return qtk_test::check_report();
}
