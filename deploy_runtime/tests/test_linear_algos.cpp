// Every int8 linear algorithm against the reference, byte for byte, through Model and Session: at
// each QTK_ISA level this CPU runs, the first usable algorithm (the one the level picks, checked by
// name) over feature counts either side of the vector widths (8, 16, 32, 64) and of the packed k
// groups (2, 4), batch 5 and 1, 1 and 2 threads, random and extreme values (K up to the int32
// accumulator limit); inputs of rank 2, 3 and 4 (x [N, ..., K], every leading dimension rows, as
// ConvNeXt's and the transformers' MLPs), with odd middle dimensions.
//
// Every float32 linear algorithm likewise against a float64 sum within docs/design.md's bound
// |y - bounds(s)| <= 3 K 2^-24 S + 2 K 2^-149 (S = |b| + sum |x w|), output features around the
// micro-kernels' columns (16, 32) and batches 1, 5 and 40 around their rows (6, 8), ranks 2 to 4,
// with bounds and a NaN input (its row's outputs are NaN); batch and threads change no bit.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "check.h"
#include "cpu_features.h"
#include "model_builder.h"
#include "qtk/runtime.h"

using qtk::detail::cpu_supports;
using qtk::detail::isa_name;
using qtk::detail::IsaLevel;
using qtk_test::ModelBuilder;
using qtk_test::Rng;

namespace {

enum class Fill { kRandom, kLowest, kHighest };  // activations all -128 / all 127, weights +-127

// An input's dimensions between the batch and the features: {} for [N, K], {T} for [N, T, K],
// {H, W} for [N, H, W, K].
using Middle = std::vector<int64_t>;

int64_t count_of(const Middle& middle) {
    int64_t count = 1;
    for (int64_t d : middle) {
        count *= d;
    }
    return count;
}

// [batch, middle..., features]
qtk::Shape shape_of(int64_t batch, const Middle& middle, int64_t features) {
    qtk::Shape shape{batch};
    shape.insert(shape.end(), middle.begin(), middle.end());
    shape.push_back(features);
    return shape;
}

std::string describe(int64_t in, int64_t out, const Middle& middle) {
    std::string text = std::to_string(in) + "->" + std::to_string(out);
    if (!middle.empty()) {
        text += " on " + qtk::to_string(shape_of(1, middle, in)) + " per sample";
    }
    return text;
}

struct Built {
    std::vector<uint8_t> bytes;
    std::vector<int8_t> x;  // batch 5
    Middle middle;
};

// One linear node with random zero points, per-feature requantization aimed at the accumulator's
// typical size, sometimes a ReLU clamp; extreme cases take weights +-127 and the largest bias the
// accumulator check allows.
Built build(int64_t in, int64_t out, Fill fill, uint64_t seed, const Middle& middle = {}) {
    Rng rng(seed);
    std::vector<int8_t> weights = qtk_test::random_weights(rng, size_t(in * out));
    std::vector<int32_t> bias = qtk_test::random_bias(rng, size_t(out));
    double typical = std::sqrt(double(in)) * 75 * 73;
    if (fill != Fill::kRandom) {
        const int64_t largest_bias = (int64_t{1} << 31) - 1 - in * 255 * 127;
        for (int8_t& w : weights) {
            w = static_cast<int8_t>(rng.uniform(0, 3) == 0 ? -127 : 127);
        }
        for (int32_t& b : bias) {
            b = static_cast<int32_t>(rng.uniform(0, 1) == 0 ? -largest_bias : largest_bias);
        }
        typical = double(int64_t{1} << 31);
    }
    const int32_t zx = static_cast<int32_t>(rng.uniform(-128, 127));
    const int32_t zy = static_cast<int32_t>(rng.uniform(-128, 127));
    const bool relu = rng.uniform(0, 2) == 0;

    ModelBuilder b;
    const uint32_t x = b.activation("x", shape_of(1, middle, in), 0.05f, zx);
    const uint32_t w = b.weight("fc.weight", {out, in}, weights);
    const uint32_t bi = b.bias("fc.bias", {out}, bias);
    const uint32_t y = b.activation("y", shape_of(1, middle, out), 0.1f, zy);
    b.node("linear", "fc", {x, w, bi}, {y},
           qtk_test::requant_attrs(size_t(out), 1.0, 90.0 / typical, 1.0, relu ? zy : -128, 127));
    b.inputs = {x};
    b.outputs = {y};
    const size_t x_count = size_t(5 * count_of(middle) * in);
    return {b.build(),
            fill == Fill::kRandom   ? rng.int8s(x_count)
            : fill == Fill::kLowest ? std::vector<int8_t>(x_count, -128)
                                    : std::vector<int8_t>(x_count, 127),
            middle};
}

// Loads under QTK_ISA=level and runs `batch` samples; `algorithm` receives what served the node.
std::vector<int8_t> run(const Built& c, int64_t in, IsaLevel level, int threads, int64_t batch,
                        std::string* algorithm) {
    qtk_test::set_env("QTK_ISA", isa_name(level));
    const auto model = qtk::Model::from_bytes(c.bytes.data(), c.bytes.size());
    *algorithm = model->algorithms().at(0);
    qtk::Session session(model, {threads});
    return session.run({c.x.data()}, {shape_of(batch, c.middle, in)})[0].data;
}

int g_cases = 0;

void check_case(int64_t in, int64_t out, Fill fill = Fill::kRandom, const Middle& middle = {}) {
    ++g_cases;
    const Built c = build(in, out, fill, 2000 + uint64_t(g_cases), middle);
    std::string algorithm;
    const std::vector<int8_t> want = run(c, in, IsaLevel::kScalar, 1, 5, &algorithm);
    CHECK(algorithm == "linear_int8_reference");
    CHECK(want.size() == size_t(5 * count_of(middle) * out));
    const std::vector<int8_t> want_first(want.begin(), want.begin() + count_of(middle) * out);
    for (IsaLevel level :
         {IsaLevel::kAvx2, IsaLevel::kAvx512Vnni, IsaLevel::kNeon, IsaLevel::kDotprod}) {
        if (!cpu_supports(level)) {
            continue;
        }
        for (int threads : {1, 2}) {
            for (int64_t batch : {5, 1}) {
                const std::vector<int8_t> got = run(c, in, level, threads, batch, &algorithm);
                if (got != (batch == 5 ? want : want_first)) {
                    qtk_test::report_failure(
                        __FILE__, __LINE__,
                        algorithm + " differs from the reference on " +
                            describe(in, out, middle) +
                            (fill == Fill::kRandom ? "" : fill == Fill::kLowest ? " all -128"
                                                                                : " all 127") +
                            ", threads " + std::to_string(threads) + ", batch " +
                            std::to_string(batch));
                }
            }
        }
    }
}

// The algorithm each level picks: the vector one of that level where the CPU has it.
void test_choice() {
    const Built c = build(17, 33, Fill::kRandom, 1);
    const std::pair<IsaLevel, const char*> expected[] = {
        {IsaLevel::kScalar, "linear_int8_reference"},
        {IsaLevel::kAvx2, "linear_int8_gemv_32c2_avx2"},
        {IsaLevel::kAvxVnni, "linear_int8_gemv_32c2_avx2"},
        {IsaLevel::kAvx512Vnni, "linear_int8_gemv_64c4_avx512_vnni"},
        {IsaLevel::kNeon, "linear_int8_gemv_16c4_neon"},
        {IsaLevel::kDotprod, "linear_int8_gemv_16c4_dotprod"},
        {IsaLevel::kI8mm, "linear_int8_gemv_16c4_dotprod"},
    };
    for (const auto& [level, name] : expected) {
        std::string algorithm;
        run(c, 17, level, 1, 1, &algorithm);
#if (QTK_X86_AVX2 && QTK_X86_AVX512_VNNI) || (QTK_ARM_NEON && QTK_ARM_DOTPROD)
        if (cpu_supports(level)) {
            CHECK(algorithm == name);
        }
#endif
        std::printf("QTK_ISA=%s: %s%s\n", isa_name(level), algorithm.c_str(),
                    cpu_supports(level) ? "" : " (this CPU lacks the level)");
    }
}

struct FloatBuilt {
    std::vector<uint8_t> bytes;
    std::vector<float> x, weight, bias;  // x: batch 40
    Middle middle;
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();
};

FloatBuilt build_float(int64_t in, int64_t out, bool bounded, uint64_t seed,
                       const Middle& middle = {}) {
    Rng rng(seed);
    FloatBuilt c;
    c.middle = middle;
    c.x = rng.floats(size_t(40 * count_of(middle) * in), -1, 1);
    c.weight = rng.floats(size_t(out * in), -1, 1);
    c.bias = rng.floats(size_t(out), -1, 1);
    if (seed % 3 == 0) {
        c.x[size_t(rng.uniform(0, in - 1))] = std::nanf("");  // in row 0
    }
    ModelBuilder b;
    const uint32_t x = b.float_activation("x", shape_of(1, middle, in));
    const uint32_t w = b.float_constant("fc.weight", {out, in}, c.weight);
    const uint32_t bi = b.float_constant("fc.bias", {out}, c.bias);
    const uint32_t y = b.float_activation("y", shape_of(1, middle, out));
    std::vector<qtk_test::AttrSpec> attrs;
    if (bounded) {
        c.lo = 0.0f;
        c.hi = 6.0f;
        attrs.push_back(qtk_test::float_attr("bounds", {c.lo, c.hi}));
    }
    b.node("linear", "fc", {x, w, bi}, {y}, attrs);
    b.inputs = {x};
    b.outputs = {y};
    c.bytes = b.build();
    return c;
}

std::vector<float> run_float(const FloatBuilt& c, int64_t in, IsaLevel level, int threads,
                             int64_t batch, std::string* algorithm) {
    qtk_test::set_env("QTK_ISA", isa_name(level));
    const auto model = qtk::Model::from_bytes(c.bytes.data(), c.bytes.size());
    *algorithm = model->algorithms().at(0);
    qtk::Session session(model, {threads});
    return session.run({c.x.data()}, {shape_of(batch, c.middle, in)})[0].float_data;
}

// Output (n, o) against the float64 sum; NaN exactly where row n has a NaN input.
bool within_bound(const FloatBuilt& c, int64_t in, int64_t out, const std::vector<float>& y,
                  int64_t n, int64_t o) {
    double s = c.bias[size_t(o)], magnitude = std::fabs(s);
    bool nan = false;
    for (int64_t k = 0; k < in; ++k) {
        const double product = double(c.x[size_t(n * in + k)]) * c.weight[size_t(o * in + k)];
        nan = nan || std::isnan(product);
        s += product;
        magnitude += std::fabs(product);
    }
    const float got = y[size_t(n * out + o)];
    if (nan) {
        return std::isnan(got);
    }
    const double want = std::min(std::max(s, double(c.lo)), double(c.hi));
    return std::fabs(double(got) - want) <= 3.0 * double(in) * std::ldexp(magnitude, -24) +
                                                 2.0 * double(in) * std::ldexp(1.0, -149);
}

int g_float_cases = 0;

void check_float_case(int64_t in, int64_t out, const Middle& middle = {}) {
    ++g_float_cases;
    const bool bounded = g_float_cases % 2 == 0;
    const FloatBuilt c = build_float(in, out, bounded, 5000 + uint64_t(g_float_cases), middle);
    const int64_t rows = 40 * count_of(middle);
    for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512Vnni}) {
        if (!cpu_supports(level)) {
            continue;
        }
        std::string algorithm;
        const std::vector<float> want = run_float(c, in, level, 1, 40, &algorithm);
        CHECK(want.size() == size_t(rows * out));
        const std::string what = algorithm + " on " + describe(in, out, middle);
        for (int64_t n = 0; n < rows; ++n) {
            for (int64_t o = 0; o < out; ++o) {
                if (!within_bound(c, in, out, want, n, o)) {
                    qtk_test::report_failure(__FILE__, __LINE__,
                                             what + " exceeds the float bound at row " +
                                                 std::to_string(n) + ", feature " +
                                                 std::to_string(o));
                    return;
                }
            }
        }
        // Batches 1 to 5: each row count the micro-kernels specialise for.
        for (const auto& [threads, batch] :
             {std::pair<int, int64_t>{2, 40}, {1, 5}, {2, 1}, {1, 2}, {2, 3}, {1, 4}}) {
            const std::vector<float> got = run_float(c, in, level, threads, batch, &algorithm);
            if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         what + ": threads " + std::to_string(threads) +
                                             ", batch " + std::to_string(batch) +
                                             " changed bits of batch 40 with 1 thread");
            }
        }
    }
}

// The float32 algorithm each level picks.
void test_float_choice() {
    const FloatBuilt c = build_float(17, 33, false, 1);
    const std::pair<IsaLevel, const char*> expected[] = {
        {IsaLevel::kScalar, "linear_float32_reference"},
        {IsaLevel::kAvx2, "linear_float32_gemm_6x16_avx2"},
        {IsaLevel::kAvxVnni, "linear_float32_gemm_6x16_avx2"},
        {IsaLevel::kAvx512Vnni, "linear_float32_gemm_8x32_avx512"},
    };
    for (const auto& [level, name] : expected) {
        std::string algorithm;
        run_float(c, 17, level, 1, 1, &algorithm);
#if QTK_X86_AVX2 && QTK_X86_AVX512_VNNI
        if (cpu_supports(level)) {
            CHECK(algorithm == name);
        }
#endif
        std::printf("float32, QTK_ISA=%s: %s\n", isa_name(level), algorithm.c_str());
    }
}

}  // namespace

int main() {
    test_choice();
    test_float_choice();
    for (int64_t in : {1, 7, 16, 33, 1280}) {
        for (int64_t out : {1, 5, 6, 7, 8, 9, 17, 33, 1000}) {
            check_float_case(in, out);
        }
    }
    // Feature counts around the lane widths and the k groups; then a classifier head.
    const int64_t features[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 129};
    for (int64_t in : features) {
        for (int64_t out : features) {
            check_case(in, out);
        }
    }
    check_case(1280, 1000);
    // Extremes: activations at -128 or 127 (zero points random), weights at +-127, bias at the
    // accumulator bound; K up to 60000, near the int32 limit K * 255 * 127 < 2^31.
    for (Fill fill : {Fill::kLowest, Fill::kHighest}) {
        for (int64_t in : {5, 64, 60000}) {
            check_case(in, 19, fill);
        }
    }
    // Ranks 3 and 4: the leading dimensions are rows, odd so the row count crosses no tile evenly
    // (6, 8, 16 and 32 rows; 2 and 4 k groups).
    const Middle middles[] = {{1}, {3}, {7}, {2, 3}, {3, 5}, {1, 1}};
    for (const Middle& middle : middles) {
        for (int64_t in : {1, 3, 5, 17, 33, 65}) {
            for (int64_t out : {1, 7, 9, 16, 33, 65}) {
                check_case(in, out, Fill::kRandom, middle);
            }
        }
        for (int64_t in : {1, 7, 33}) {
            for (int64_t out : {1, 5, 7, 9, 17}) {
                check_float_case(in, out, middle);
            }
        }
        check_case(96, 384, Fill::kRandom, middle);  // a ConvNeXt-T MLP's first linear
        check_case(61, 19, Fill::kHighest, middle);
    }
    qtk_test::set_env("QTK_ISA", nullptr);
    std::printf("%d int8 linear cases checked against the reference, %d float32 against float64\n",
                g_cases, g_float_cases);
    return qtk_test::check_report();
}
