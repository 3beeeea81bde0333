// Every float32 conv2d algorithm this CPU runs (pinned by QTK_CONV_ALGO, the reference included)
// against a float64 sum computed here, over shapes around the tile and block edges: channels
// either side of the tile widths, odd planes, 1x1 / 3x3 / 5x5 / 1x3 / 3x1 kernels, strides 1 and
// 2, padding 0 to 2, dilation 1 and 2, groups 1, 2 and depthwise, with and without bounds. Batch 3
// with 2 threads and batch 1 must give the bits of batch 3 with 1 thread. A NaN input passes
// through as in torch. Also the registry: the default choice per QTK_ISA level, QTK_CONV_ALGO's
// pins across dtypes and its errors, and Fast-Run timing the float32 candidates.
//
// The depthwise kernels' bits are defined (conv2d_float32_depthwise.cpp): each output is its bias
// plus its k*k products in the order (ky, kx), padding included as zeros, one fused multiply-add
// each, then the bounds. They must match that float32 sum bit for bit, whatever their layout.
//
// The bound (docs/design.md): float kernels sum in other orders than the reference, so each output
// y is compared with the exact sum s = b + sum over its window of x w (float64 here: the products
// of two floats are exact in it, and the sum's own error is below 2^-29 of the bound). Summing K
// products and a bias in float32 rounds at most 2K times (a multiply and an add each, or one fused
// multiply-add), each time by at most u = 2^-24 of a partial sum, so
//   |y - s| <= gamma_2K * S,  gamma_n = n u / (1 - n u),  S = |b| + sum |x w|
// and gamma_2K <= 3 K u while 2 K u <= 1/3 (K up to 2.8 million). Bounds (min / max) never widen
// a difference. Products below the smallest normal float round absolutely, at most 2^-149 each.
// So the test demands |y - bounds(s)| <= 3 K 2^-24 S + 2 K 2^-149, which no correct summation
// order can fail.
//
// Winograd F(4x4, 3x3) is not a reordering of the same sum: its products are of transformed
// weights and inputs, which cancel only in the output transform. docs/winograd.md ("Float Winograd
// F(4x4, 3x3) for float32 layers") proves, with C = K / 9 channels per group,
//   |y - bounds(s)| <= gamma_(C+13) (|b| + 2304 C max|x| max|w|) + 2304 (C + 13) 2^-149
// (max over the test's input and weights; 2304 = 48^2 from the transform matrices), and a NaN in
// a tile's 6x6 input may make any of the tile's 16 outputs NaN, not only those whose window reads
// it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include "algo_policy.h"
#include "check.h"
#include "conv_geometry.h"
#include "cpu_features.h"
#include "model_builder.h"
#include "op_registry.h"
#include "qtk/runtime.h"

using qtk::DType;

namespace {

struct ConvCase : qtk_test::ConvGeometry {
    bool bounded = false;  // ReLU6, or [-0.5, 0.5] on odd seeds
    bool nan_input = false;

    bool valid() const { return in % groups == 0 && out % groups == 0 && window_fits(); }
    std::string describe() const {
        return ConvGeometry::describe() + (bounded ? " bounded" : "") +
               (nan_input ? " NaN input" : "");
    }
};

struct BuiltCase {
    std::vector<uint8_t> bytes;
    std::vector<float> x, weight, bias;  // x: batch 3
    int64_t nan_at = -1;                 // the index in x of a NaN input, if any
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();
};

BuiltCase build(const ConvCase& cc, uint64_t seed) {
    Rng rng(seed);
    BuiltCase c;
    c.x = rng.floats(size_t(3 * cc.in * cc.height * cc.width), -1, 1);
    c.weight = rng.floats(size_t(cc.out * cc.k_count()), -1, 1);
    c.bias = rng.floats(size_t(cc.out), -1, 1);
    if (cc.nan_input) {
        c.nan_at = rng.uniform(0, int64_t(c.x.size()) - 1);
        c.x[size_t(c.nan_at)] = std::nanf("");
    }
    ModelBuilder b;
    const uint32_t x = b.float_activation("x", {1, cc.in, cc.height, cc.width});
    const uint32_t w =
        b.float_constant("conv.weight", {cc.out, cc.in / cc.groups, cc.kh, cc.kw}, c.weight);
    const uint32_t bias = b.float_constant("conv.bias", {cc.out}, c.bias);
    const uint32_t y = b.float_activation("y", {1, cc.out, cc.out_h(), cc.out_w()});
    std::vector<AttrSpec> attrs = {AttrSpec("stride", {cc.sh, cc.sw}),
                                   AttrSpec("padding", {cc.ph, cc.pw}),
                                   AttrSpec("dilation", {cc.dh, cc.dw}),
                                   AttrSpec("groups", {cc.groups})};
    if (cc.bounded) {
        c.lo = seed % 2 ? -0.5f : 0.0f;
        c.hi = seed % 2 ? 0.5f : 6.0f;
        attrs.push_back(qtk_test::float_attr("bounds", {c.lo, c.hi}));
    }
    b.node("conv2d", "conv", {x, w, bias}, {y}, attrs);
    b.inputs = {x};
    b.outputs = {y};
    c.bytes = b.build();
    return c;
}

// Loads the case under QTK_CONV_ALGO=algo and runs the first `batch` samples; `served` gets the
// algorithm that served the conv.
std::vector<float> run(const BuiltCase& c, const ConvCase& cc, const char* algo, int threads,
                       int64_t batch, std::string* served = nullptr) {
    set_env("QTK_CONV_ALGO", algo);
    const auto model = qtk::Model::from_bytes(c.bytes.data(), c.bytes.size());
    if (served != nullptr) {
        *served = model->algorithms().at(0);
    }
    qtk::Session session(model, {threads});
    return session.run({c.x.data()}, {{batch, cc.in, cc.height, cc.width}})[0].float_data;
}

bool same_bits(const std::vector<float>& a, const float* b) {
    return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

bool is_winograd(const std::string& algo) { return algo.find("_winograd_") != std::string::npos; }

double max_abs(const std::vector<float>& values) {
    double m = 0.0;
    for (float v : values) {
        m = std::isnan(v) ? m : std::max(m, double(std::fabs(v)));
    }
    return m;
}

// The Winograd bound of the header, less its |b| term: gamma_(C+13) and the rest.
struct WinogradBound {
    double gamma, rest;

    WinogradBound(const BuiltCase& c, const ConvCase& cc) {
        const double channels = double(cc.in / cc.groups), n = channels + 13;
        const double u = std::ldexp(1.0, -24);
        gamma = n * u / (1 - n * u);
        rest = gamma * 2304 * channels * max_abs(c.x) * max_abs(c.weight) +
               2304 * n * std::ldexp(1.0, -149);
    }
};

// Whether the NaN input lies in the 6x6 input of the Winograd tile of output (n, group, oy, ox).
bool nan_in_tile(const BuiltCase& c, const ConvCase& cc, int64_t n, int64_t group, int64_t oy,
                 int64_t ox) {
    if (c.nan_at < 0) {
        return false;
    }
    const int64_t plane = cc.height * cc.width, per_group_in = cc.in / cc.groups;
    const int64_t channel = c.nan_at / plane % cc.in;
    const int64_t iy = c.nan_at % plane / cc.width - (oy / 4 * 4 - cc.ph);
    const int64_t ix = c.nan_at % cc.width - (ox / 4 * 4 - cc.pw);
    return c.nan_at / plane / cc.in == n && channel / per_group_in == group && iy >= 0 && iy < 6 &&
           ix >= 0 && ix < 6;
}

// Each output of batch 3 against the float64 sum within the header's bound for `algo`; NaN
// exactly where the sum is NaN (Winograd: also where the NaN is in the output's tile). Returns the
// number of outputs outside it (reporting the first).
int64_t check_bound(const BuiltCase& c, const ConvCase& cc, const std::vector<float>& y,
                    const std::string& algo) {
    const int64_t per_group_in = cc.in / cc.groups, per_group_out = cc.out / cc.groups;
    const int64_t out_h = cc.out_h(), out_w = cc.out_w(), k_count = cc.k_count();
    const double tolerance_per_term = 3.0 * double(k_count) * std::ldexp(1.0, -24);
    const double absolute = 2.0 * double(k_count) * std::ldexp(1.0, -149);
    const bool winograd = is_winograd(algo);
    const WinogradBound winograd_bound(c, cc);
    int64_t bad = 0;
    size_t at = 0;
    for (int64_t n = 0; n < 3; ++n) {
        for (int64_t oc = 0; oc < cc.out; ++oc) {
            const int64_t group = oc / per_group_out;
            for (int64_t oy = 0; oy < out_h; ++oy) {
                for (int64_t ox = 0; ox < out_w; ++ox, ++at) {
                    double sum = c.bias[size_t(oc)], magnitude = std::fabs(sum);
                    for (int64_t ic = 0; ic < per_group_in; ++ic) {
                        const int64_t channel = group * per_group_in + ic;
                        for (int64_t ky = 0; ky < cc.kh; ++ky) {
                            const int64_t iy = oy * cc.sh - cc.ph + ky * cc.dh;
                            for (int64_t kx = 0; kx < cc.kw; ++kx) {
                                const int64_t ix = ox * cc.sw - cc.pw + kx * cc.dw;
                                if (iy < 0 || iy >= cc.height || ix < 0 || ix >= cc.width) {
                                    continue;
                                }
                                const double term =
                                    double(c.x[size_t(((n * cc.in + channel) * cc.height + iy) *
                                                          cc.width +
                                                      ix)]) *
                                    double(c.weight[size_t(((oc * per_group_in + ic) * cc.kh +
                                                            ky) * cc.kw +
                                                           kx)]);
                                sum += term;
                                magnitude += std::fabs(term);
                            }
                        }
                    }
                    // FloatBounds::apply in float64: NaN passes through.
                    const double want = std::min(std::max(sum, double(c.lo)), double(c.hi));
                    const double got = y[at];
                    const double bound =
                        winograd ? winograd_bound.gamma * std::fabs(c.bias[size_t(oc)]) +
                                       winograd_bound.rest
                                 : tolerance_per_term * magnitude + absolute;
                    const bool ok =
                        std::isnan(want) ? std::isnan(got)
                        : std::isnan(got)
                            ? winograd && nan_in_tile(c, cc, n, group, oy, ox)
                            : std::fabs(got - want) <= bound;
                    if (!ok && bad++ == 0) {
                        qtk_test::report_failure(
                            __FILE__, __LINE__,
                            algo + " on " + cc.describe() + ": output " + std::to_string(at) +
                                " is " + std::to_string(got) + ", the float64 sum " +
                                std::to_string(want) + " (bound " + std::to_string(bound) + ")");
                    }
                }
            }
        }
    }
    return bad;
}

// The depthwise kernels' defined bits (the header): for each output, bias then fmaf over (ky, kx),
// then FloatBounds::apply. Returns the number of outputs that differ (reporting the first).
int64_t check_depthwise_bits(const BuiltCase& c, const ConvCase& cc, const std::vector<float>& y,
                             const std::string& algo) {
    const int64_t out_h = cc.out_h(), out_w = cc.out_w();
    int64_t bad = 0;
    size_t at = 0;
    for (int64_t n = 0; n < 3; ++n) {
        for (int64_t ch = 0; ch < cc.out; ++ch) {
            const float* plane = c.x.data() + (n * cc.in + ch) * cc.height * cc.width;
            const float* weights = c.weight.data() + ch * cc.kh * cc.kw;
            for (int64_t oy = 0; oy < out_h; ++oy) {
                for (int64_t ox = 0; ox < out_w; ++ox, ++at) {
                    float sum = c.bias[size_t(ch)];
                    for (int64_t ky = 0; ky < cc.kh; ++ky) {
                        const int64_t iy = oy * cc.sh - cc.ph + ky * cc.dh;
                        for (int64_t kx = 0; kx < cc.kw; ++kx) {
                            const int64_t ix = ox * cc.sw - cc.pw + kx * cc.dw;
                            const bool inside =
                                iy >= 0 && iy < cc.height && ix >= 0 && ix < cc.width;
                            sum = std::fmaf(weights[ky * cc.kw + kx],
                                            inside ? plane[iy * cc.width + ix] : 0.0f, sum);
                        }
                    }
                    const float want = std::min(std::max(sum, c.lo), c.hi);
                    const bool same = std::isnan(want) ? std::isnan(y[at])  // (payloads aside)
                                      : std::memcmp(&want, &y[at], sizeof(float)) == 0;
                    if (!same && bad++ == 0) {
                        qtk_test::report_failure(
                            __FILE__, __LINE__,
                            algo + " on " + cc.describe() + ": output " + std::to_string(at) +
                                " is " + std::to_string(y[at]) + ", its defined float32 sum " +
                                std::to_string(want));
                    }
                }
            }
        }
    }
    return bad;
}

// The float32 algorithms this CPU runs, the reference included.
std::vector<const Conv2dAlgo*> runnable_algos() {
    return qtk_test::runnable_conv2d_algos(DType::kFloat32);
}

int g_cases = 0;
std::map<std::string, int> g_algo_cases;

void check_case(const ConvCase& cc, const std::vector<const Conv2dAlgo*>& algos) {
    if (!cc.valid()) {
        return;
    }
    ++g_cases;
    const BuiltCase c = build(cc, 2000 + uint64_t(g_cases));
    for (const Conv2dAlgo* algo : algos) {
        if (!algo->fits(cc.params())) {
            continue;
        }
        ++g_algo_cases[algo->name];
        std::string served;
        const std::vector<float> y = run(c, cc, algo->name, 1, 3, &served);
        CHECK(served == algo->name);
        check_bound(c, cc, y, algo->name);
        if (std::string(algo->name).find("_depthwise_") != std::string::npos) {
            check_depthwise_bits(c, cc, y, algo->name);
        }
        const std::string where = std::string(algo->name) + " on " + cc.describe();
        if (!same_bits(run(c, cc, algo->name, 2, 3), y.data())) {
            qtk_test::report_failure(__FILE__, __LINE__, where + ": 2 threads change the bits");
        }
        if (!same_bits(run(c, cc, algo->name, 2, 1), y.data())) {
            qtk_test::report_failure(__FILE__, __LINE__, where + ": batch 1 changes the bits");
        }
    }
}

void test_against_float64() {
    const std::vector<const Conv2dAlgo*> algos = runnable_algos();
    // Either side of the tile widths (mr 6 and 8, nr 16 and 32) and of the vector widths.
    const int64_t channels[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                12, 13, 14, 15, 16, 17, 31, 32, 33, 64};
    const int64_t sizes[][2] = {{1, 1}, {5, 5}, {7, 9}, {9, 7}, {13, 11}, {4, 17}, {17, 3}};
    const int64_t kernels[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 3}, {3, 1}};
    int i = 0;
    for (int64_t in : channels) {
        for (const auto& kernel : kernels) {
            ConvCase cc;
            cc.in = in;
            cc.out = channels[(i * 8 + 3) % 21];
            cc.height = sizes[i % 7][0];
            cc.width = sizes[i % 7][1];
            cc.kh = kernel[0];
            cc.kw = kernel[1];
            cc.sh = cc.sw = 1 + i % 2;
            cc.ph = cc.pw = (i / 2) % 3;
            cc.dh = cc.dw = 1 + (i / 3) % 2;
            cc.groups = i % 5 == 0 && in % 2 == 0 && cc.out % 2 == 0 ? 2 : 1;
            cc.bounded = i % 3 == 0;
            ++i;
            check_case(cc, algos);
        }
    }
    // Depthwise 3x3 / 5x5, stride 1 and 2, around the vector widths of a row.
    for (int64_t c : {1, 3, 16, 17, 33}) {
        for (int64_t k : {3, 5}) {
            for (int64_t s : {1, 2}) {
                for (int64_t size : {5, 16, 17, 35}) {
                    ConvCase cc;
                    cc.in = cc.out = cc.groups = c;
                    cc.height = size % 7 + 5;
                    cc.width = size;
                    cc.kh = cc.kw = k;
                    cc.sh = cc.sw = s;
                    cc.ph = cc.pw = size % 3 == 0 ? 0 : k / 2;
                    cc.bounded = size % 2 == 1;
                    check_case(cc, algos);
                }
            }
        }
    }
    // Depthwise rows either side of the ring's 64 outputs and of 8 and 16 lanes, odd heights,
    // padding 0 to 3, dilation 2, strides differing between the axes, 5x5.
    const int64_t dw_widths[] = {1,  2,  3,  7,  8,  9,  14, 15, 16, 17, 31, 32,
                                 33, 47, 48, 49, 63, 64, 65, 66, 95, 127, 129, 131};
    int j = 0;
    for (int64_t width : dw_widths) {
        for (int64_t k : {3, 5}) {
            for (int64_t s : {1, 2}) {
                ConvCase cc;
                cc.in = cc.out = cc.groups = 1 + j % 3;
                cc.height = 3 + (width * 5 + j) % 9;
                cc.width = width;
                cc.kh = cc.kw = k;
                cc.sh = s;
                cc.sw = j % 4 == 3 ? 3 - s : s;
                cc.ph = j % 4;
                cc.pw = (j + 1 + width) % 4;
                cc.dh = cc.dw = j % 5 == 2 ? 2 : 1;
                cc.bounded = j % 3 == 1;
                ++j;
                check_case(cc, algos);
            }
        }
    }
    // Blocks: a 3x3 layer and a pointwise one wide enough for several blocks per plane, and a long
    // K (2 304) with a 7x7 plane; stride, padding and dilation differing between the axes.
    const ConvCase large[] = {
        {{64, 33, 23, 21, 3, 3, 1, 1, 1, 1, 1, 1, 1}, true, false},
        {{256, 17, 23, 23, 1, 1, 1, 1, 0, 0, 1, 1, 1}, false, false},
        {{256, 9, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1}, false, false},
        {{8, 8, 9, 12, 3, 3, 2, 1, 0, 2, 1, 2, 1}, true, false},
        {{6, 12, 8, 8, 1, 1, 2, 2, 0, 0, 1, 1, 3}, false, false},
        {{8, 8, 11, 13, 3, 3, 1, 2, 2, 1, 2, 1, 8}, true, false},  // depthwise
        {{5, 5, 12, 9, 5, 5, 2, 1, 2, 2, 1, 2, 5}, false, false},
        // The implicit GEMM's K chunks (K 4 608 in 9 of 512, and 513 in 2) under a 7x7 plane split
        // into output-channel parts at 2 threads (5 tiles), a conv1-like 7x7 stride 2 window over
        // phase planes, and a 1x1 stride 2 that reads only one of its phases.
        {{512, 40, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1}, true, false},
        {{57, 19, 10, 9, 3, 3, 1, 1, 0, 1, 1, 1, 1}, false, false},
        {{3, 17, 31, 29, 7, 7, 2, 2, 3, 3, 1, 1, 1}, true, false},
        {{33, 20, 15, 14, 1, 1, 2, 2, 0, 0, 1, 1, 1}, false, false},
        // Phase planes at strides above 2 (the GEMM conv's only): 3, and 4 across with dilation.
        {{5, 7, 13, 14, 3, 3, 3, 3, 1, 2, 1, 1, 1}, false, false},
        {{4, 6, 11, 17, 2, 3, 2, 4, 0, 1, 1, 2, 1}, true, false},
        // Depthwise rows of 64 outputs and more, summed row by row over a ring of phase rows
        // (shorter ones as one plane), and a plane of 63 just below.
        {{16, 16, 9, 70, 3, 3, 1, 1, 1, 1, 1, 1, 16}, true, false},
        {{17, 17, 6, 131, 3, 3, 2, 2, 1, 1, 1, 1, 17}, false, false},
        {{3, 3, 7, 72, 5, 5, 1, 1, 2, 2, 2, 2, 3}, false, false},
        {{2, 2, 8, 63, 3, 3, 1, 1, 0, 0, 1, 1, 2}, true, false},
        // Output rows straight into y (16 columns of 18 in wide order): several blocks of rows, K
        // in two chunks (partial sums stored in y), groups.
        {{64, 20, 40, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1}, true, false},
        {{64, 20, 40, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2}, false, false},
        // 3x3 stride 2 from the input itself over several 64-output blocks a row, without padding
        // and with 1 and 2 columns of it (the left edge's lanes moved in registers), a block
        // ending on the row's last column, or one past it.
        {{3, 3, 9, 140, 3, 3, 2, 2, 0, 0, 1, 1, 3}, false, false},
        {{3, 3, 8, 131, 3, 3, 2, 2, 1, 1, 1, 1, 3}, true, false},
        {{3, 3, 7, 259, 3, 3, 2, 2, 2, 2, 1, 1, 3}, false, false},
        {{2, 2, 5, 128, 3, 3, 2, 2, 1, 1, 1, 1, 2}, true, false},
        // Weights that fit one A chunk: at 2 threads the threads split blocks instead of the
        // output channels, a stem's 51 output rows in 6 blocks of 9 rows (the last 6), a 1x1
        // conv's columns in two blocks, the first ending inside a tile (AVX-512: 3 477 columns
        // as 1 744 and 1 733, 99 as 64 and 35; AVX2: 56 and 43), read in place, over padded
        // phases, and in groups (two planes: no even split needed).
        {{3, 17, 101, 61, 7, 7, 2, 2, 3, 3, 1, 1, 1}, true, false},
        {{24, 20, 57, 61, 1, 1, 1, 1, 0, 0, 1, 1, 1}, true, false},
        {{8, 9, 9, 11, 1, 1, 1, 1, 0, 0, 1, 1, 1}, false, false},
        {{5, 9, 10, 11, 1, 1, 1, 1, 1, 1, 1, 1, 1}, false, false},
        {{6, 10, 9, 9, 1, 1, 1, 1, 0, 0, 1, 1, 2}, true, false},
    };
    for (const ConvCase& cc : large) {
        check_case(cc, algos);
    }
    // Winograd F(4x4, 3x3): output sizes around the 4-pixel tiles (1-9, 13, 16, 17, and 56 with
    // several blocks per plane), padding 0-2, channels either side of its minimum of 4 and of the
    // GEMM tiles, groups 2.
    const int64_t wino_channels[] = {4, 5, 7, 8, 9, 16, 17, 33};
    const int64_t wino_sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17};
    for (int j = 0; j < 24; ++j) {
        ConvCase cc;
        cc.in = wino_channels[j % 8];
        cc.out = wino_channels[(j * 3 + 1) % 8];
        cc.ph = j % 3;
        cc.pw = (j + 1) % 3;
        cc.height = std::max<int64_t>(1, wino_sizes[j % 12] + 2 - 2 * cc.ph);
        cc.width = std::max<int64_t>(1, wino_sizes[(j * 5 + 3) % 12] + 2 - 2 * cc.pw);
        cc.groups = j % 6 == 5 ? 2 : 1;
        cc.in *= cc.groups;
        cc.out *= cc.groups;
        cc.bounded = j % 4 == 1;
        check_case(cc, algos);
    }
    check_case({{16, 16, 58, 57, 3, 3, 1, 1, 1, 0, 1, 1, 1}, true, false}, algos);
    // A NaN anywhere in x: NaN in every output whose window reads it, ReLU6 or not.
    for (bool bounded : {false, true}) {
        for (const ConvCase& shape : {ConvCase{{5, 7, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1}},
                                      ConvCase{{9, 9, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 9}},
                                      ConvCase{{12, 5, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1}}}) {
            ConvCase cc = shape;
            cc.bounded = bounded;
            cc.nan_input = true;
            check_case(cc, algos);
        }
    }
    std::printf("%d float32 conv cases\n", g_cases);
    for (const auto& [name, count] : g_algo_cases) {
        std::printf("  %s: %d cases\n", name.c_str(), count);
        CHECK(count > 0);
    }
}

// Under each QTK_ISA level the default is the first algorithm the level and CPU allow that
// prefers the layer: Winograd on outputs of 13x13 and up (16 tiles), the GEMM below and where the
// size is unknown. Both stay Fast-Run's candidates.
void test_default_choice() {
    for (const int64_t size : {0, 7, 13, 14, 56}) {
        Conv2dParams dense = {8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1};
        dense.out_h = dense.out_w = size;
        for (IsaLevel level : qtk::detail::kIsaLevels) {
            const Conv2dAlgo& chosen =
                qtk::detail::choose_conv2d_algo(DType::kFloat32, dense, level, nullptr);
            CHECK(chosen.isa <= level && cpu_supports(chosen.isa));
            for (const Conv2dAlgo* algo : qtk::detail::conv2d_algos(DType::kFloat32)) {
                if (algo == &chosen) {
                    break;
                }
                CHECK(!algo->usable(dense, level) ||
                      (algo->preferred != nullptr && !algo->preferred(dense)));
            }
            bool winograd_usable = false;
            for (const Conv2dAlgo* algo : qtk::detail::conv2d_algos(DType::kFloat32)) {
                winograd_usable = winograd_usable || (is_winograd(algo->name) &&
                                                      algo->usable(dense, level));
            }
            CHECK(is_winograd(chosen.name) == (size >= 13 && winograd_usable));
            const auto usable = qtk::detail::usable_conv2d_algos(DType::kFloat32, dense, level,
                                                                 nullptr);
            CHECK(std::string(usable.back()->name) == "conv2d_float32_reference");
        }
        CHECK(std::string(qtk::detail::choose_conv2d_algo(DType::kFloat32, dense,
                                                          IsaLevel::kScalar, nullptr)
                              .name) == "conv2d_float32_reference");
    }
}

// QTK_CONV_ALGO: an int8 name leaves float layers their default, a float name the int8 layers; a
// name of neither list fails with both lists; a float name the CPU or the cap cannot run fails.
void test_pins() {
    ConvCase cc;
    const BuiltCase c = build(cc, 7);
    std::string unpinned, served;
    run(c, cc, nullptr, 1, 1, &unpinned);
    run(c, cc, "conv2d_int8_reference", 1, 1, &served);
    CHECK(served == unpinned);
    CHECK_THROWS_WITH(run(c, cc, "conv2d_float32_magic", 1, 1),
                      "node 'conv' (conv2d): QTK_CONV_ALGO=conv2d_float32_magic names no float32 "
                      "conv2d algorithm built here; use one of: ");
    CHECK_THROWS_WITH(run(c, cc, "conv2d_float32_magic", 1, 1), "conv2d_float32_reference");
    CHECK_THROWS_WITH(run(c, cc, "conv2d_float32_magic", 1, 1), "(int8 layers: ");
    CHECK_THROWS_WITH(run(c, cc, "conv2d_float32_magic", 1, 1), "conv2d_int8_reference");

    const std::vector<uint8_t> int8_model = qtk_test::sample_model().build();
    set_env("QTK_CONV_ALGO", nullptr);
    const std::string int8_default =
        qtk::Model::from_bytes(int8_model.data(), int8_model.size())->algorithms().at(0);
    set_env("QTK_CONV_ALGO", "conv2d_float32_reference");
    CHECK(qtk::Model::from_bytes(int8_model.data(), int8_model.size())->algorithms().at(0) ==
          int8_default);

    for (const Conv2dAlgo* algo : qtk::detail::conv2d_algos(DType::kFloat32)) {
        if (!cpu_supports(algo->isa)) {
            CHECK_THROWS_WITH(run(c, cc, algo->name, 1, 1),
                              "is not usable here: this CPU lacks " +
                                  std::string(isa_name(algo->isa)));
        } else if (algo->isa != IsaLevel::kScalar) {
            set_env("QTK_ISA", "scalar");
            CHECK_THROWS_WITH(run(c, cc, algo->name, 1, 1),
                              "is not usable here: QTK_ISA=scalar excludes " +
                                  std::string(isa_name(algo->isa)));
            set_env("QTK_ISA", nullptr);
        }
    }
    set_env("QTK_CONV_ALGO", nullptr);
}

// Fast-Run times the float32 candidates and records the winner.
void test_fast_run() {
    const char* cache = "test_float_conv_algos.cache";
    std::remove(cache);
    ConvCase cc;
    cc.in = cc.out = 16;
    const BuiltCase c = build(cc, 8);
    qtk::LoadOptions options;
    options.fast_run = qtk::FastRun::kSearch;
    options.fast_run_cache = cache;
    set_env("QTK_CONV_ALGO", nullptr);
    const auto model = qtk::Model::from_bytes(c.bytes.data(), c.bytes.size(), options);
    const std::string chosen = model->algorithms().at(0);
    CHECK(chosen.rfind("conv2d_float32_", 0) == 0);
    std::ifstream in(cache);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool several = runnable_algos().size() > 1;
    CHECK((text.find("\t" + chosen + "\n") != std::string::npos) == several);
    std::remove(cache);
}

}  // namespace

int main() {
    for (IsaLevel level : qtk::detail::kIsaLevels) {
        std::printf("%s: %s\n", isa_name(level), cpu_supports(level) ? "yes" : "no");
    }
    test_default_choice();
    test_pins();
    test_fast_run();
    test_against_float64();
    return qtk_test::check_report();
}
