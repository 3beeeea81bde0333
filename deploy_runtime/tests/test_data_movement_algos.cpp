// Every algorithm of concat, global_avg_pool2d, avg_pool2d, prelu and lut (int8; lut also with a
// table per channel in either layout), of add, mul and max_pool2d (int8 and float32; max_pool2d
// also channels-last, whose reference gives the NCHW bytes permuted, and in ceil mode, whose
// output sizes are checked against torch's formula written out here), of quantize
// (float32 in) and of permute (int8 and float32) against the op's reference, byte for byte. Each
// node is built as a graph and every candidate the registry offers on this CPU (every ISA level it
// runs, the portable fast paths, the reference last) runs with 1 and 2 threads over shapes around
// the vector widths (8, 16, 32, 64) and tiles (32), odd sizes, and adversarial values: -128 and
// 127, multipliers 0 and 2^31 - 1, shifts 1 to 62, identity rescales; float32 with NaN,
// infinities, +0 and -0. The float32 functions with vector kernels (hardswish, hardsigmoid:
// bytes; sigmoid, silu: a stated bound) are here too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>
#include <string>

#include "check.h"
#include "cpu_features.h"
#include "graph.h"
#include "model_builder.h"
#include "op_kernel.h"
#include "op_registry.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

using qtk::DType;
using qtk::Shape;
using qtk::detail::Attr;
using qtk::detail::AttrKind;
using qtk::detail::Graph;
using qtk::detail::IsaLevel;
using qtk::detail::KernelCandidate;
using qtk::detail::Node;
using qtk::detail::Value;
using qtk_test::Rng;

namespace {

using Bytes = std::vector<uint8_t>;

int64_t count_of(const Shape& s) {
    return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<int64_t>());
}

// A one-node graph: activations x0.. of `shapes` with zero points `zero_points`, one output.
struct OneNode {
    Graph graph;
    std::vector<Bytes> inputs;

    OneNode(const std::string& op, DType dtype, const std::vector<Shape>& shapes,
            const std::vector<int32_t>& zero_points, int32_t output_zero_point,
            std::vector<Attr> attrs) {
        Node node{op, op, {}, {}, std::move(attrs)};
        for (size_t i = 0; i < shapes.size(); ++i) {
            graph.values.push_back(
                {"x" + std::to_string(i), dtype, shapes[i], 0.1f, zero_points[i]});
            node.inputs.push_back(static_cast<uint32_t>(i));
        }
        graph.values.push_back({"y", dtype, shapes[0], 0.1f, output_zero_point});
        node.outputs = {static_cast<uint32_t>(shapes.size())};
        graph.inputs = node.inputs;
        graph.outputs = node.outputs;
        graph.nodes.push_back(node);
    }
};

Attr ints(const char* key, std::vector<int64_t> values) {
    return Attr{key, AttrKind::kInts, std::move(values), {}};
}

// The output bytes of candidate `index` (of `names`, filled by the first call) on the inputs.
Bytes run_candidate(const OneNode& c, size_t index, int threads, std::vector<std::string>* names) {
    const auto pick = [&](const Graph&, const Node&, const std::vector<KernelCandidate>& all) {
        for (const KernelCandidate& k : all) {
            names->push_back(k.algorithm);
        }
        return index;
    };
    names->clear();
    const auto created = qtk::detail::create_kernel(c.graph, c.graph.nodes[0], pick);
    if (names->empty()) {  // a single candidate: the registry asks no picker
        names->push_back(created.algorithm);
    }
    const auto& kernel = created.kernel;
    qtk::detail::NodeIO io;
    std::vector<Shape> shapes;
    for (uint32_t id : c.graph.nodes[0].inputs) {
        shapes.push_back(c.graph.values[id].shape);
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
        io.inputs.push_back(c.inputs[i].data());
        io.input_shapes.push_back(&shapes[i]);
    }
    const std::vector<Shape> out_shapes = kernel->infer_shapes(shapes);
    const size_t size = qtk::dtype_size(c.graph.values[c.graph.nodes[0].inputs[0]].dtype);
    Bytes y(size_t(count_of(out_shapes[0])) * size, 0xA5);
    io.outputs.push_back(y.data());
    io.output_shapes.push_back(&out_shapes[0]);
    qtk::detail::ThreadPool pool(threads);
    kernel->run(io, pool);
    return y;
}

int g_cases = 0;
std::set<std::string> g_checked;  // the algorithms compared with a reference

// Every candidate, with 1 and 2 threads, against the last one (the reference); returns the
// reference's bytes.
Bytes check_all(const OneNode& c, const std::string& what) {
    ++g_cases;
    std::vector<std::string> names;
    run_candidate(c, 0, 1, &names);
    const size_t reference = names.size() - 1;
    CHECK(names[reference].find("_reference") != std::string::npos);
    const Bytes want = run_candidate(c, reference, 1, &names);
    for (size_t i = 0; i < reference; ++i) {
        g_checked.insert(names[i]);
        for (int threads : {1, 2}) {
            if (run_candidate(c, i, threads, &names) != want) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         names[i] + " differs from the reference on " + what +
                                             ", threads " + std::to_string(threads));
            }
        }
    }
    return want;
}

// x [N, C, H, W] of `size`-byte elements, channels-last: [N, H, W, C].
Bytes to_nhwc(const Bytes& x, const Shape& s, size_t size) {
    Bytes y(x.size());
    const int64_t plane = s[2] * s[3];
    for (int64_t n = 0; n < s[0]; ++n) {
        for (int64_t c = 0; c < s[1]; ++c) {
            for (int64_t p = 0; p < plane; ++p) {
                std::memcpy(&y[size_t(((n * plane + p) * s[1] + c)) * size],
                            &x[size_t(((n * s[1] + c) * plane + p)) * size], size);
            }
        }
    }
    return y;
}

std::string describe(const Shape& s) { return qtk::to_string(s); }

Bytes random_bytes(Rng& rng, size_t n) {
    Bytes b(n);
    for (uint8_t& x : b) {
        x = static_cast<uint8_t>(rng.next());
    }
    return b;
}

// Adversarial int8 data: random, or mostly -128 / 127.
Bytes int8_data(Rng& rng, size_t n) {
    Bytes b = random_bytes(rng, n);
    const int64_t mode = rng.uniform(0, 3);
    for (uint8_t& x : b) {
        if (mode == 1 && rng.uniform(0, 3) != 0) x = 0x80;  // -128
        if (mode == 2 && rng.uniform(0, 3) != 0) x = 0x7F;  // 127
    }
    return b;
}

// float32 data: random normals, or mostly the values a max or a sum treats specially: NaN (one
// bit pattern, so its bytes compare), +-infinity, +0 and -0, and ties.
Bytes float32_data(Rng& rng, size_t n) {
    const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 1.0f, -1.0f};
    const bool adversarial = rng.uniform(0, 1) == 0;
    std::vector<float> values(n);
    for (float& v : values) {
        v = adversarial && rng.uniform(0, 1) == 0 ? special[rng.uniform(0, 6)]
                                                  : float(rng.uniform(-1000, 1000)) / 64.0f;
    }
    Bytes b(n * 4);
    std::memcpy(b.data(), values.data(), b.size());
    return b;
}

Attr floats(const char* key, std::vector<float> values) {
    return Attr{key, AttrKind::kFloats, {}, std::move(values)};
}

void check_permute(const Shape& x, const std::vector<int64_t>& perm, Rng& rng) {
    for (DType dtype : {DType::kInt8, DType::kFloat32}) {
        OneNode c("permute", dtype, {x}, {0}, 0, {ints("perm", perm)});
        c.inputs = {random_bytes(rng, size_t(count_of(x)) * qtk::dtype_size(dtype))};
        check_all(c, "permute " + describe(x) + " perm " + describe(perm) +
                         (dtype == DType::kInt8 ? " int8" : " float32"));
    }
}

void test_permute() {
    Rng rng(1);
    // Every perm of ranks 3 to 5 on odd dims and dims of 1.
    for (const Shape& x : {Shape{2, 3, 5}, Shape{1, 33, 17}, Shape{2, 3, 1, 7}, Shape{1, 5, 33, 3},
                           Shape{1, 2, 3, 4, 5}, Shape{2, 1, 7, 3, 2}}) {
        std::vector<int64_t> perm(x.size());
        std::iota(perm.begin(), perm.end(), 0);
        do {
            check_permute(x, perm, rng);
        } while (std::next_permutation(perm.begin() + 1, perm.end()));
    }
    // The channel shuffle of shufflenet, and transposes across the 32 x 32 tiles.
    check_permute({1, 2, 58, 7, 7}, {0, 2, 1, 3, 4}, rng);
    check_permute({2, 2, 3, 5, 7}, {0, 2, 1, 3, 4}, rng);
    check_permute({1, 3, 65, 33}, {0, 2, 3, 1}, rng);
    check_permute({2, 33, 31, 2}, {0, 3, 1, 2}, rng);
    check_permute({1, 64, 64}, {0, 2, 1}, rng);
    // The layout pass's NCHW <-> NHWC with channels and pixels either side of the int8 16 x 16
    // blocks and the 32 x 32 tiles.
    for (const Shape& nchw : {Shape{2, 17, 5, 7}, Shape{1, 32, 112, 3}, Shape{1, 33, 7, 9},
                              Shape{2, 48, 4, 4}, Shape{1, 16, 1, 16}}) {
        check_permute(nchw, {0, 2, 3, 1}, rng);
        check_permute({nchw[0], nchw[2], nchw[3], nchw[1]}, {0, 3, 1, 2}, rng);
    }
    check_permute({3, 1, 1, 1}, {0, 3, 2, 1}, rng);
    // Images of 2 to 4 channels into pixels (int8: by unpacks, 16 pixels a step, or 64 by byte
    // permutes), pixel counts around the steps and the tasks' rows, one ending the output exactly
    // at a step.
    for (const Shape& image : {Shape{1, 2, 17, 9}, Shape{2, 3, 16, 16}, Shape{1, 3, 224, 224},
                               Shape{1, 4, 33, 5}, Shape{3, 3, 5, 3}, Shape{1, 2, 9, 57},
                               Shape{2, 3, 13, 11}, Shape{1, 4, 16, 20}, Shape{1, 3, 8, 8}}) {
        check_permute(image, {0, 2, 3, 1}, rng);
    }
    // Random perms of ranks 6 to 8.
    const int64_t dims[] = {1, 2, 3, 5, 7};
    for (int trial = 0; trial < 60; ++trial) {
        Shape x(size_t(rng.uniform(6, 8)));
        for (int64_t& d : x) {
            d = dims[rng.uniform(0, 4)];
        }
        std::vector<int64_t> perm(x.size());
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = perm.size() - 1; i > 1; --i) {
            std::swap(perm[i], perm[size_t(rng.uniform(1, int64_t(i)))]);
        }
        check_permute(x, perm, rng);
    }
}

// Multiplier and shift pairs: identity, ordinary, and the extremes of spec 2's ranges.
std::pair<int64_t, int64_t> random_requant(Rng& rng) {
    switch (rng.uniform(0, 5)) {
        case 0: return {int64_t{1} << 30, 30};  // the same (scale, zero_point)
        case 1: return {0, rng.uniform(1, 62)};
        case 2: return {(int64_t{1} << 31) - 1, rng.uniform(1, 62)};
        case 3: return {(int64_t{1} << 31) - 1, 31};
        default: return {rng.uniform(1 << 29, (int64_t{1} << 31) - 1), rng.uniform(28, 34)};
    }
}

void test_concat() {
    Rng rng(2);
    for (int trial = 0; trial < 150; ++trial) {
        const size_t rank = size_t(rng.uniform(2, 5));
        Shape base(rank);
        for (int64_t& d : base) {
            d = rng.uniform(1, 9);
        }
        const int64_t axis = rng.uniform(1, int64_t(rank) - 1);
        const size_t count = size_t(rng.uniform(1, 4));
        std::vector<Shape> shapes;
        std::vector<int32_t> zero_points;
        std::vector<int64_t> multipliers, shifts;
        const int32_t output_zero_point = int32_t(rng.uniform(-128, 127));
        for (size_t i = 0; i < count; ++i) {
            shapes.push_back(base);
            shapes.back()[size_t(axis)] = rng.uniform(1, 40);
            const auto [m, n] = random_requant(rng);
            multipliers.push_back(m);
            shifts.push_back(n);
            zero_points.push_back(m == int64_t{1} << 30 && rng.uniform(0, 1) == 0
                                      ? output_zero_point
                                      : int32_t(rng.uniform(-128, 127)));
        }
        OneNode c("concat", DType::kInt8, shapes, zero_points, output_zero_point,
                  {ints("axis", {axis}), ints("multiplier", multipliers), ints("shift", shifts)});
        for (const Shape& s : shapes) {
            c.inputs.push_back(int8_data(rng, size_t(count_of(s))));
        }
        check_all(c, "concat of " + std::to_string(count) + " on axis " + std::to_string(axis) +
                         ", input 0 " + describe(shapes[0]));
    }
}

// torch's max_pool2d output size (aten's pooling_output_shape): floor or ceil of
// (H + 2p - d(k-1) - 1) / s, plus 1; in ceil mode one fewer when the last window would start at or
// beyond H + p.
int64_t torch_pool_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
    const int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
    int64_t out = int64_t(std::floor(double(span) / double(s))) + 1;
    if (ceil && (out - 1) * s >= in + p) {
        --out;
    }
    return out;
}

// The reference's output shape for a few ceil-mode geometries checked with torch (GoogLeNet's 3x3
// stride 2 on 112 and 55; SqueezeNet's on 111 and 13; sizes where ceil adds a window or not, a
// window longer than the padded input, a last window dropped for starting in the padding).
void test_max_pool2d_ceil_sizes() {
    struct Case {
        int64_t in, k, s, p, d, want;
    };
    const Case cases[] = {{112, 3, 2, 0, 1, 56}, {55, 3, 2, 0, 1, 27}, {111, 3, 2, 0, 1, 55},
                          {13, 3, 2, 0, 1, 6},   {5, 2, 2, 0, 1, 3},   {6, 2, 2, 0, 1, 3},
                          {6, 3, 2, 1, 1, 4},    {7, 3, 3, 1, 1, 3},   {1, 2, 2, 0, 1, 1},
                          {8, 3, 3, 0, 2, 2},    {2, 4, 3, 1, 1, 1},   {5, 3, 3, 1, 1, 2}};
    for (const Case& t : cases) {
        CHECK_EQ(torch_pool_size(t.in, t.k, t.s, t.p, t.d, true), t.want);
        OneNode c("max_pool2d", DType::kInt8, {{1, 1, t.in, 1}}, {0}, 0,
                  {ints("kernel", {t.k, 1}), ints("stride", {t.s, 1}), ints("padding", {t.p, 0}),
                   ints("dilation", {t.d, 1}), ints("ceil_mode", {1})});
        c.inputs = {Bytes(size_t(t.in), 0)};
        const Bytes y = check_all(c, "int8 max_pool2d ceil mode on " + std::to_string(t.in));
        CHECK_EQ(int64_t(y.size()), t.want);
    }
    // Refused by name: a ceil_mode other than 0 or 1, a divisor_override below 1, and a
    // divisor_override on a max pool.
    const auto create = [](const std::string& op, std::vector<Attr> attrs) {
        const OneNode c(op, DType::kInt8, {{1, 1, 5, 5}}, {0}, 0, std::move(attrs));
        const auto first = [](const Graph&, const Node&, const std::vector<KernelCandidate>&) {
            return size_t{0};
        };
        qtk::detail::create_kernel(c.graph, c.graph.nodes[0], first);
    };
    CHECK_THROWS_WITH(create("max_pool2d", {ints("kernel", {2, 2}), ints("stride", {2, 2}),
                                            ints("padding", {0, 0}), ints("dilation", {1, 1}),
                                            ints("ceil_mode", {2})}),
                      "node 'max_pool2d' (max_pool2d): attribute 'ceil_mode'[0] = 2 is outside "
                      "[0, 1]");
    CHECK_THROWS_WITH(create("avg_pool2d", {ints("kernel", {2, 2}), ints("stride", {2, 2}),
                                            ints("padding", {0, 0}), ints("count_include_pad", {1}),
                                            ints("divisor_override", {0})}),
                      "node 'avg_pool2d' (avg_pool2d): attribute 'divisor_override'[0] = 0 is "
                      "outside [1, 2147483647]");
    CHECK_THROWS_WITH(create("max_pool2d", {ints("kernel", {2, 2}), ints("stride", {2, 2}),
                                            ints("padding", {0, 0}), ints("dilation", {1, 1}),
                                            ints("divisor_override", {2})}),
                      "node 'max_pool2d' (max_pool2d): unknown attribute 'divisor_override'");
}

void test_max_pool2d() {
    Rng rng(3);
    int ceil_adds_a_window = 0;
    for (int trial = 0; trial < 900; ++trial) {
        // now and then 9 wide: the stride-2 row kernel's permutes in pairs, an odd one left
        const int64_t kh = rng.uniform(1, 4), kw = trial % 50 == 8 ? 9 : rng.uniform(1, 4);
        const int64_t dh = rng.uniform(0, 3) == 0 ? 2 : 1, dw = rng.uniform(0, 3) == 0 ? 2 : 1;
        const int64_t ph = rng.uniform(0, ((kh - 1) * dh + 1) / 2);
        const int64_t pw = rng.uniform(0, ((kw - 1) * dw + 1) / 2);
        const int64_t sizes[] = {1, 2, 3, 5, 8, 15, 16, 17, 31, 33, 63, 64, 65, 70, 112};
        const int64_t h = sizes[rng.uniform(0, 9)], w = sizes[rng.uniform(0, 14)];
        const int64_t sh = rng.uniform(1, 3), sw = rng.uniform(1, 3);
        // Floor mode, ceil mode (stated as 1) and, now and then, floor mode stated as 0.
        const bool ceil = trial % 3 != 0, stated = ceil || trial % 5 == 0;
        const int64_t out_h = torch_pool_size(h, kh, sh, ph, dh, ceil);
        const int64_t out_w = torch_pool_size(w, kw, sw, pw, dw, ceil);
        if (out_h < 1 || out_w < 1) {
            continue;
        }
        ceil_adds_a_window += out_h > torch_pool_size(h, kh, sh, ph, dh, false) ||
                              out_w > torch_pool_size(w, kw, sw, pw, dw, false);
        const int64_t channel_counts[] = {1, 2, 3, 16, 17, 64};
        const Shape x = {rng.uniform(1, 2), channel_counts[rng.uniform(0, 5)], h, w};
        const bool int8 = trial % 2 == 0;
        const int32_t zp = int8 ? int32_t(rng.uniform(-128, 127)) : 0;
        std::vector<Attr> attrs = {ints("kernel", {kh, kw}), ints("stride", {sh, sw}),
                                   ints("padding", {ph, pw}), ints("dilation", {dh, dw})};
        if (stated) {
            attrs.push_back(ints("ceil_mode", {ceil ? 1 : 0}));
        }
        const DType dtype = int8 ? DType::kInt8 : DType::kFloat32;
        OneNode c("max_pool2d", dtype, {x}, {zp}, zp, attrs);
        c.inputs = {int8 ? int8_data(rng, size_t(count_of(x)))
                         : float32_data(rng, size_t(count_of(x)))};
        const std::string what = std::string(int8 ? "int8" : "float32") + " max_pool2d " +
                                 describe(x) + " kernel " + describe({kh, kw}) + " stride " +
                                 describe({sh, sw}) + " pad " + describe({ph, pw}) +
                                 " dilation " + describe({dh, dw}) + (ceil ? " ceil mode" : "");
        const Bytes want = check_all(c, what);
        CHECK_EQ(want.size(), size_t(x[0] * x[1] * out_h * out_w) * (int8 ? 1 : 4));
        // Channels-last (the layout pass's "layout" attribute): every candidate against the
        // reference, which gives the NCHW bytes permuted.
        attrs.push_back(ints("layout", {qtk::detail::kLayoutNhwc}));
        OneNode nhwc("max_pool2d", dtype, {{x[0], x[2], x[3], x[1]}}, {zp}, zp, attrs);
        const size_t size = int8 ? 1 : 4;
        nhwc.inputs = {to_nhwc(c.inputs[0], x, size)};
        const Shape y = {x[0], x[1], out_h, out_w};
        if (check_all(nhwc, what + " channels-last") != to_nhwc(want, y, size)) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     "the channels-last reference differs on " + what);
        }
    }
    CHECK(ceil_adds_a_window >= 100);  // of the ~600 ceil-mode trials
}

// Planes of 1 to 70x70 (either side of the 16-byte sums), all -128 or 127 now and then, random
// zero points, keepdim 0 and 1; channels-last too (channel counts either side of its 64-channel
// runs and 16-lane vectors), whose reference gives the NCHW bytes (the same for [N, 1, 1, C]).
// float32 on the same shapes (channel counts either side of the 8 planes summed together), values
// whose sums round, and specials.
void test_global_avg_pool2d() {
    Rng rng(9);
    const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 33, 70};
    const int64_t channel_counts[] = {1, 3, 5, 15, 16, 17, 63, 64, 65, 130};
    for (int trial = 0; trial < 200; ++trial) {
        const Shape x = {rng.uniform(1, 2),
                         trial % 4 < 2 ? rng.uniform(1, 5) : channel_counts[rng.uniform(0, 9)],
                         sizes[rng.uniform(0, 11)], sizes[rng.uniform(0, 11)]};
        const int32_t zp = int32_t(rng.uniform(-128, 127));
        OneNode c("global_avg_pool2d", DType::kInt8, {x}, {zp}, zp,
                  {ints("keepdim", {trial % 2})});
        c.inputs = {trial % 7 == 3   ? Bytes(size_t(count_of(x)), 0x80)
                    : trial % 7 == 5 ? Bytes(size_t(count_of(x)), 0x7F)
                                     : int8_data(rng, size_t(count_of(x)))};
        const std::string what =
            "int8 global_avg_pool2d " + describe(x) + " zero point " + std::to_string(zp);
        const Bytes want = check_all(c, what);
        OneNode nhwc("global_avg_pool2d", DType::kInt8, {{x[0], x[2], x[3], x[1]}}, {zp}, zp,
                     {ints("keepdim", {trial % 2}), ints("layout", {qtk::detail::kLayoutNhwc})});
        nhwc.inputs = {to_nhwc(c.inputs[0], x, 1)};
        if (check_all(nhwc, what + " channels-last") != want) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     "the channels-last reference differs on " + what);
        }
        OneNode f("global_avg_pool2d", DType::kFloat32, {x}, {0}, 0,
                  {ints("keepdim", {trial % 2})});
        // Full mantissas (float32_data's 64ths sum exactly in any order), specials now and then.
        Bytes values = float32_data(rng, size_t(count_of(x)));
        for (size_t i = 0; i < values.size(); i += 4) {
            float v;
            std::memcpy(&v, &values[i], 4);
            if (std::isfinite(v)) {
                v = float(rng.uniform(-1000000, 1000000)) / 7919.0f;
                std::memcpy(&values[i], &v, 4);
            }
        }
        f.inputs = {values};
        check_all(f, "float32 global_avg_pool2d " + describe(x));
    }
}

// Windows of 1x1 to 5x5, 7x7, 3x2 and 20 wide, strides 1 to 3, on planes either side of them and
// of the row passes' vector widths (SSE2's 16 bytes and 8 columns, AVX-512's 64 and 32), in
// batches of planes where the windows tile the rows; whole windows (the constant-divisor path)
// and, now and then, padding, ceil mode or a divisor_override (up to 2^31 - 1, past the path's
// 2^30) that send the fast path to the reference's loop, and windows of 256 rows (past its int16
// column sums) and 65 columns (past its runs); inputs all -128 or 127 now and then, random zero
// points.
void test_avg_pool2d() {
    Rng rng(12);
    const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 56, 63, 64, 65};
    for (int trial = 0; trial < 400; ++trial) {
        const int64_t kh = trial % 10 == 7 ? 7 : rng.uniform(1, 5);
        const int64_t kw = trial == 398      ? 65  // past the fast path's 64 runs
                           : trial % 9 == 4    ? 2
                           : trial % 10 == 7 ? 7
                           : trial % 25 == 11 ? 20  // wider than sum_rows' vector slack
                                              : rng.uniform(1, 5);
        Shape x = {rng.uniform(1, 2), rng.uniform(1, 5),
                   std::max<int64_t>(kh, sizes[rng.uniform(0, 14)]),
                   std::max<int64_t>(kw, sizes[rng.uniform(0, 14)])};
        if (trial == 399) {  // 256 rows: the reference's loop
            x = {1, 2, 256, std::max<int64_t>(kw, 3)};
        }
        const int64_t pad = trial % 5 == 0 ? std::min(kh, kw) / 2 : 0;
        std::vector<Attr> attrs = {ints("kernel", {trial == 399 ? 256 : kh, kw}),
                                   ints("stride", {rng.uniform(1, 3), rng.uniform(1, 3)}),
                                   ints("padding", {pad, pad}),
                                   ints("count_include_pad", {rng.uniform(0, 1)})};
        if (trial % 7 == 2) {
            attrs.push_back(ints("ceil_mode", {1}));
        }
        if (trial % 6 == 1) {
            const int64_t overrides[] = {1, 3, 7, 20, 40000, (int64_t{1} << 31) - 1};
            attrs.push_back(ints("divisor_override", {overrides[rng.uniform(0, 5)]}));
        }
        const int32_t zp = int32_t(rng.uniform(-128, 127));
        OneNode c("avg_pool2d", DType::kInt8, {x}, {zp}, zp, attrs);
        c.inputs = {trial % 11 == 3   ? Bytes(size_t(count_of(x)), 0x80)
                    : trial % 11 == 5 ? Bytes(size_t(count_of(x)), 0x7F)
                                      : int8_data(rng, size_t(count_of(x)))};
        check_all(c, "int8 avg_pool2d " + describe(x) + " kernel " + std::to_string(kh) + "x" +
                         std::to_string(kw) + " zero point " + std::to_string(zp));
    }
    // 2x2 at stride 2 (a pass of its own where the level has one): widths either side of its
    // 32-window steps and odd (the last column unread), heights odd and even (planes joined),
    // divisor overrides, extreme values.
    const int64_t widths[] = {2, 3, 15, 32, 35, 63, 64, 65, 66, 129};
    for (int trial = 0; trial < 40; ++trial) {
        const Shape x = {1 + trial % 2, 1 + trial % 5, 2 + trial % 7, widths[trial % 10]};
        std::vector<Attr> attrs = {ints("kernel", {2, 2}), ints("stride", {2, 2}),
                                   ints("padding", {0, 0}),
                                   ints("count_include_pad", {trial % 3 == 0})};
        if (trial % 4 == 3) {
            attrs.push_back(ints("divisor_override", {trial % 8 == 3 ? 1 : 3}));
        }
        const int32_t zp = int32_t(rng.uniform(-128, 127));
        OneNode c("avg_pool2d", DType::kInt8, {x}, {zp}, zp, attrs);
        c.inputs = {trial % 9 == 2   ? Bytes(size_t(count_of(x)), 0x80)
                    : trial % 9 == 5 ? Bytes(size_t(count_of(x)), 0x7F)
                                     : int8_data(rng, size_t(count_of(x)))};
        check_all(c, "int8 avg_pool2d 2x2 stride 2 " + describe(x) + " zero point " +
                         std::to_string(zp));
    }
}

// One slope and one per channel (dim 1) on ranks 2 to 4, slopes of either sign and zero,
// multipliers up to 2^31 - 1, shifts 1 to 62; the table algorithm per channel plane against the
// reference's two requantizations.
void test_prelu() {
    Rng rng(13);
    const int64_t sizes[] = {1, 3, 7, 16, 17, 63, 64, 65, 130};
    for (int trial = 0; trial < 200; ++trial) {
        Shape x = {rng.uniform(1, 2), rng.uniform(1, 6)};
        for (int64_t d = 2; d < rng.uniform(2, 4); ++d) {
            x.push_back(sizes[rng.uniform(0, 8)]);
        }
        const int64_t slopes = trial % 3 == 0 ? 1 : x[1];
        std::vector<int64_t> multipliers, shifts;
        for (int64_t c = 0; c < slopes; ++c) {
            const auto [m, n] = random_requant(rng);
            multipliers.push_back(rng.uniform(0, 2) == 0 ? -m : m);
            shifts.push_back(n);
        }
        const auto [positive, positive_shift] = random_requant(rng);
        const int32_t zp = int32_t(rng.uniform(-128, 127)), zy = int32_t(rng.uniform(-128, 127));
        const int64_t lo = rng.uniform(-128, 0), hi = rng.uniform(0, 127);
        OneNode c("prelu", DType::kInt8, {x}, {zp}, zy,
                  {ints("positive_multiplier", {positive}),
                   ints("positive_shift", {positive_shift}), ints("multiplier", multipliers),
                   ints("shift", shifts), ints("clamp", {lo, hi})});
        c.inputs = {int8_data(rng, size_t(count_of(x)))};
        check_all(c, "int8 prelu " + describe(x) + " with " + std::to_string(slopes) + " slopes");
    }
}

void test_add() {
    Rng rng(4);
    const int64_t sizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1001};
    for (int trial = 0; trial < 300; ++trial) {
        // Trailing dims past 4: a gate's runs long enough for the vector loop.
        const int64_t runs[] = {1, 2, 3, 4, 5, 8, 49};
        const Shape x = {rng.uniform(1, 2), sizes[rng.uniform(0, 14)], runs[rng.uniform(0, 6)]};
        auto [ma, shift] = random_requant(rng);
        // Either side of 2^31 - 2^15, where the AVX-512 kernel's 16-bit form stops.
        const int64_t edges[] = {(int64_t{1} << 31) - 1, (int64_t{1} << 31) - (1 << 15),
                                 (int64_t{1} << 31) - (1 << 15) - 1};
        const int64_t mb = rng.uniform(0, 3) == 0 ? edges[rng.uniform(0, 2)]
                                                  : rng.uniform(0, (int64_t{1} << 31) - 1);
        if (rng.uniform(0, 3) == 0) {
            shift = rng.uniform(1, 62);
        }
        const int64_t lo = rng.uniform(-128, 127), hi = rng.uniform(lo, 127);
        OneNode c("add", DType::kInt8, {x, x},
                  {int32_t(rng.uniform(-128, 127)), int32_t(rng.uniform(-128, 127))},
                  int32_t(rng.uniform(-128, 127)),
                  {ints("multiplier", {ma, mb}), ints("shift", {shift}),
                   ints("clamp", rng.uniform(0, 1) == 0 ? std::vector<int64_t>{-128, 127}
                                                        : std::vector<int64_t>{lo, hi})});
        c.inputs = {int8_data(rng, size_t(count_of(x))), int8_data(rng, size_t(count_of(x)))};
        check_all(c, "add " + describe(x) + " multipliers " + describe({ma, mb}) + " shift " +
                         std::to_string(shift));
    }
}

// int8 add with the lookup the graph pass fuses (graph_passes.h): one table or one per channel of
// dim 1, planes either side of the vector widths and single elements (a [N, C] add), against the
// plain add's bytes looked up here; a table that fits no channel count is refused.
void test_add_lookup() {
    Rng rng(24);
    const int64_t sizes[] = {1, 3, 7, 16, 17, 63, 64, 65, 130};
    for (int trial = 0; trial < 150; ++trial) {
        Shape x = {rng.uniform(1, 2), sizes[rng.uniform(0, 8)]};
        for (int64_t d = 2; d < rng.uniform(2, 4); ++d) {
            x.push_back(sizes[rng.uniform(0, 8)]);
        }
        const int64_t channels = trial % 3 == 0 ? 1 : x[1];
        const auto [ma, shift] = random_requant(rng);
        const int64_t mb = rng.uniform(0, (int64_t{1} << 31) - 1);
        const std::vector<int32_t> zero_points = {int32_t(rng.uniform(-128, 127)),
                                                  int32_t(rng.uniform(-128, 127))};
        const int64_t zs = rng.uniform(-128, 127);
        const std::vector<Attr> attrs = {ints("multiplier", {ma, mb}), ints("shift", {shift}),
                                         ints("clamp", {zs, 127})};
        OneNode plain("add", DType::kInt8, {x, x}, zero_points, int32_t(zs), attrs);
        plain.inputs = {int8_data(rng, size_t(count_of(x))), int8_data(rng, size_t(count_of(x)))};
        const Bytes sums = check_all(plain, "add " + describe(x));

        std::vector<Attr> fused_attrs = attrs;
        fused_attrs.push_back(ints("sum_zero_point", {zs}));
        OneNode fused("add", DType::kInt8, {x, x}, zero_points, int32_t(rng.uniform(-128, 127)),
                      fused_attrs);
        const Bytes table = random_bytes(rng, size_t(channels * 256));
        const Shape table_shape = channels == 1 ? Shape{256} : Shape{channels, 256};
        fused.graph.values.push_back(
            {"table", DType::kInt8, table_shape, 0.1f, 0, true, table.data(), table.size()});
        fused.graph.nodes[0].inputs.push_back(uint32_t(fused.graph.values.size() - 1));
        fused.inputs = {plain.inputs[0], plain.inputs[1], table};
        const Bytes got = check_all(fused, "add " + describe(x) + " looked up in " +
                                               std::to_string(channels) + " table(s)");
        const int64_t plane = count_of(x) / (x[0] * x[1]);
        Bytes want(sums.size());
        for (size_t i = 0; i < sums.size(); ++i) {
            const int64_t c = channels == 1 ? 0 : int64_t(i) / plane % channels;
            want[i] = table[size_t(c * 256 + int8_t(sums[i]) + 128)];
        }
        CHECK(got == want);
    }
    OneNode bad("add", DType::kInt8, {{1, 4, 3}, {1, 4, 3}}, {0, 0}, 0,
                {ints("multiplier", {1 << 30, 1 << 30}), ints("shift", {31}),
                 ints("clamp", {-128, 127}), ints("sum_zero_point", {0})});
    const Bytes table(3 * 256, 0);
    bad.graph.values.push_back(
        {"table", DType::kInt8, {3, 256}, 0.1f, 0, true, table.data(), table.size()});
    bad.graph.nodes[0].inputs.push_back(uint32_t(bad.graph.values.size() - 1));
    const auto first = [](const Graph&, const Node&, const std::vector<KernelCandidate>&) {
        return size_t{0};
    };
    CHECK_THROWS_WITH(qtk::detail::create_kernel(bad.graph, bad.graph.nodes[0], first),
                      "must have shape [256] or [C, 256]");
    bad.graph.nodes[0].attrs.pop_back();  // a table without the sum's zero point
    CHECK_THROWS_WITH(qtk::detail::create_kernel(bad.graph, bad.graph.nodes[0], first),
                      "a fused lookup takes both the table (input 2) and 'sum_zero_point'");
}

// int8 mul: same shapes (one run), an input broadcast over a stretch of the other's dims either way
// round (squeeze-excitation's [N, C, H, W] * [N, C, 1, 1], channels-last [N, H, W, C] *
// [N, 1, 1, C], a scalar), runs either side of the fast kernel's 1024-product chunks and the
// vector widths, and a broadcast over two separate stretches (the reference's walk), with
// adversarial values, shifts and clamps.
void test_mul() {
    Rng rng(6);
    const int64_t sizes[] = {1, 3, 7, 15, 16, 17, 33, 64, 65, 1023, 1025};
    for (int trial = 0; trial < 300; ++trial) {
        const Shape x = {rng.uniform(1, 2), rng.uniform(1, 5), sizes[rng.uniform(0, 10)],
                         rng.uniform(1, 3)};
        const int64_t form = rng.uniform(0, 5);
        const Shape s = form == 0   ? x
                        : form == 1 ? Shape{x[0], x[1], 1, 1}
                        : form == 2 ? Shape{1, 1, 1, 1}
                        : form == 3 ? Shape{x[0], 1, 1, x[3]}
                        : form == 4 ? Shape{x[0], x[1], 1, x[3]}
                                    : Shape{x[0], 1, x[2], 1};
        const bool swap = rng.uniform(0, 1) == 0;
        const auto [m, shift] = random_requant(rng);
        const int64_t lo = rng.uniform(-128, 127), hi = rng.uniform(lo, 127);
        OneNode c("mul", DType::kInt8, swap ? std::vector<Shape>{s, x} : std::vector<Shape>{x, s},
                  {int32_t(rng.uniform(-128, 127)), int32_t(rng.uniform(-128, 127))},
                  int32_t(rng.uniform(-128, 127)),
                  {ints("multiplier", {m}), ints("shift", {shift}),
                   ints("clamp", rng.uniform(0, 1) == 0 ? std::vector<int64_t>{-128, 127}
                                                        : std::vector<int64_t>{lo, hi})});
        c.graph.values.back().shape = x;  // the output's
        const Bytes dx = int8_data(rng, size_t(count_of(x)));
        const Bytes ds = int8_data(rng, size_t(count_of(s)));
        c.inputs = swap ? std::vector<Bytes>{ds, dx} : std::vector<Bytes>{dx, ds};
        check_all(c, "int8 mul " + describe(swap ? s : x) + " * " + describe(swap ? x : s) +
                         " multiplier " + std::to_string(m) + " shift " + std::to_string(shift));
    }
}

// int8 lut: every length up to two vectors and a few longer, random tables (and the identity),
// every byte value in the input.
void test_lut() {
    Rng rng(8);
    for (int64_t count : {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 256, 1000}) {
        const Shape x = {1, count};
        OneNode c("lut", DType::kInt8, {x}, {0}, 0, {});
        Bytes table = random_bytes(rng, 256);
        if (count == 256) {
            for (int i = 0; i < 256; ++i) {
                table[size_t(i)] = uint8_t(i - 128);
            }
        }
        c.graph.values.push_back({"table", DType::kInt8, {256}, 0.1f, 0, true, nullptr, 256});
        c.graph.nodes[0].inputs.push_back(uint32_t(c.graph.values.size() - 1));
        c.graph.values.back().data = table.data();
        Bytes data = random_bytes(rng, size_t(count));
        for (int64_t i = 0; i < count && count >= 256; ++i) {
            data[size_t(i)] = uint8_t(i);  // every value
        }
        c.inputs = {data, table};
        check_all(c, "int8 lut of " + std::to_string(count));
    }
}

// int8 lut with a table per channel (spec 25): ranks 2 to 4, channels around the vector widths,
// NCHW (a plane per channel) and channels-last (the "layout" attribute: the channel is the last
// dim), against y = table[c][x + 128] written out here; a table of the wrong shape is refused.
void test_lut_per_channel() {
    Rng rng(18);
    const int64_t sizes[] = {1, 3, 7, 16, 17, 63, 64, 65};
    for (int trial = 0; trial < 120; ++trial) {
        Shape x = {rng.uniform(1, 2), sizes[rng.uniform(0, 7)]};
        for (int64_t d = 2; d < rng.uniform(2, 4); ++d) {
            x.push_back(sizes[rng.uniform(0, 7)]);
        }
        const bool channels_last = x.size() == 4 && trial % 2 == 1;
        const int64_t channels = channels_last ? x.back() : x[1];
        OneNode c("lut", DType::kInt8, {x}, {0}, 0,
                  channels_last ? std::vector<Attr>{ints("layout", {1})} : std::vector<Attr>{});
        const Bytes table = random_bytes(rng, size_t(channels * 256));
        c.graph.values.push_back({"table", DType::kInt8, {channels, 256}, 0.1f, 0, true, nullptr,
                                  size_t(channels * 256)});
        c.graph.nodes[0].inputs.push_back(uint32_t(c.graph.values.size() - 1));
        c.graph.values.back().data = table.data();
        c.inputs = {int8_data(rng, size_t(count_of(x))), table};
        const std::string what = "int8 lut per channel " + describe(x) +
                                 (channels_last ? " channels-last" : "");
        const Bytes got = check_all(c, what);
        const int64_t plane = channels_last ? 1 : count_of(x) / (x[0] * channels);
        for (int64_t i = 0; i < count_of(x); ++i) {
            const int64_t entry = i / plane % channels * 256 + int8_t(c.inputs[0][size_t(i)]) + 128;
            if (got[size_t(i)] != table[size_t(entry)]) {
                qtk_test::report_failure(__FILE__, __LINE__, what + ": not table[c][x + 128]");
                break;
            }
        }
        if (trial == 0) {  // one row short
            c.graph.values.back().shape = {channels + 1, 256};
            CHECK_THROWS_WITH(
                qtk::detail::create_kernel(c.graph, c.graph.nodes[0],
                                           [](const Graph&, const Node&,
                                              const std::vector<KernelCandidate>&) { return 0; }),
                "or [C, 256] (a table per channel C");
        }
    }
}

// float32 add and mul: same shapes (the flat loop) and broadcasts (the reference's walk), with and
// without bounds.
void test_float32_add_mul() {
    const float kInfinity = std::numeric_limits<float>::infinity();
    Rng rng(5);
    const int64_t sizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1001};
    for (int trial = 0; trial < 200; ++trial) {
        // Trailing dims past 4: a gate's runs long enough for the vector loop.
        const int64_t runs[] = {1, 2, 3, 4, 5, 8, 49};
        const Shape x = {rng.uniform(1, 2), sizes[rng.uniform(0, 14)], runs[rng.uniform(0, 6)]};
        const Shape b = rng.uniform(0, 3) == 0 ? Shape{1, x[1], 1} : x;
        std::vector<Attr> attrs;
        if (rng.uniform(0, 1) == 0) {
            attrs.push_back(floats("bounds", {0.0f, rng.uniform(0, 1) == 0 ? 6.0f : kInfinity}));
        }
        // b (a gate [1, C, 1] where it is not x's shape) on either side.
        const std::vector<Shape> shapes =
            rng.uniform(0, 1) == 0 ? std::vector<Shape>{b, x} : std::vector<Shape>{x, b};
        for (const char* op : {"add", "mul"}) {
            OneNode c(op, DType::kFloat32, shapes, {0, 0}, 0, attrs);
            c.inputs = {float32_data(rng, size_t(count_of(shapes[0]))),
                        float32_data(rng, size_t(count_of(shapes[1])))};
            check_all(c, std::string("float32 ") + op + " " + describe(shapes[0]) + " and " +
                             describe(shapes[1]) + (attrs.empty() ? "" : " bounded"));
        }
    }
}

// Inputs of a float32 function: float32_data's values and specials, plus where exp over- and
// underflows and the results turn subnormal (|x| from 80 to 110), tiny and huge values.
Bytes function_inputs(Rng& rng, int64_t n) {
    Bytes b = float32_data(rng, size_t(n));
    std::vector<float> values(b.size() / 4);
    std::memcpy(values.data(), b.data(), b.size());
    for (float& v : values) {
        const int64_t mode = rng.uniform(0, 5);
        if (mode == 0) {
            v = float(rng.uniform(-110000, 110000)) / 1000.0f;
        } else if (mode == 1) {
            v = std::ldexp(float(rng.uniform(-1000, 1000)), int(rng.uniform(-140, 120)));
        }
    }
    std::memcpy(b.data(), values.data(), b.size());
    return b;
}

// sigmoid and silu: every candidate (the reference too) at 1 and 2 threads within the bound of
// docs/design.md of the function in double, 2^-21 |f| + 2^-126 max(1, |x|) (below x = -88.7
// exp(-x) overflows float and both give 0), infinite and NaN exactly where it is; every vector
// kernel with the same bits (one exp, whatever the ISA).
void check_function_bound(const OneNode& c, const std::string& op, const std::string& what) {
    ++g_cases;
    std::vector<std::string> names;
    run_candidate(c, 0, 1, &names);
    const int64_t n = int64_t(c.inputs[0].size() / 4);
    std::vector<float> x(c.inputs[0].size() / 4), y(x.size());
    std::memcpy(x.data(), c.inputs[0].data(), c.inputs[0].size());
    Bytes vector_bits;
    for (size_t i = 0; i < names.size(); ++i) {
        const bool reference = i + 1 == names.size();
        for (int threads : {1, 2}) {
            const Bytes got = run_candidate(c, i, threads, &names);
            std::memcpy(y.data(), got.data(), got.size());
            for (int64_t j = 0; j < n; ++j) {
                const double v = x[size_t(j)], s = 1.0 / (1.0 + std::exp(-v));
                const double want = op == "sigmoid" ? s : v * s, got_j = y[size_t(j)];
                const bool ok =
                    std::isnan(want)   ? std::isnan(got_j)
                    : std::isinf(want) ? got_j == want
                                       : std::fabs(got_j - want) <=
                                             std::ldexp(std::fabs(want), -21) +
                                                 std::ldexp(std::max(1.0, std::fabs(v)), -126);
                if (!ok) {
                    qtk_test::report_failure(
                        __FILE__, __LINE__,
                        names[i] + " on " + what + ": " + op + "(" + std::to_string(v) + ") = " +
                            std::to_string(got_j) + ", want " + std::to_string(want) +
                            ", threads " + std::to_string(threads));
                    return;
                }
            }
            if (!reference && vector_bits.empty()) {
                vector_bits = got;
            } else if (!reference && got != vector_bits) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         names[i] + " differs from " + names[0] + " on " + what);
            }
        }
        if (!reference) {
            g_checked.insert(names[i]);
        }
    }
}

// hardswish, hardsigmoid, sigmoid and silu (float32) over lengths around the vector widths and
// the driver's tasks of 4096: the first two byte for byte with the reference, the others within
// check_function_bound's bound.
void test_float32_functions() {
    Rng rng(9);
    for (const char* op : {"hardswish", "hardsigmoid", "sigmoid", "silu"}) {
        for (int64_t size : {1, 7, 8, 9, 15, 16, 17, 33, 4095, 4097, 10001}) {
            OneNode c(op, DType::kFloat32, {{1, size}}, {0}, 0, {});
            c.inputs = {function_inputs(rng, size)};
            const std::string what = std::string(op) + " of " + std::to_string(size);
            if (std::string(op) == "hardswish" || std::string(op) == "hardsigmoid") {
                check_all(c, what);
            } else {
                check_function_bound(c, op, what);
            }
        }
    }
}

// The quantizer of a session's float inputs (detail::choose_int8_quantizer) against
// arith::quantize at every QTK_ISA level this CPU runs.
void check_session_quantizer(const float* x, int64_t count, float scale, int32_t zero_point,
                             const std::string& what) {
    const float inv_scale = qtk::arith::inverse_scale(scale);
    std::vector<int8_t> want(static_cast<size_t>(count)), got(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
        want[size_t(i)] = qtk::arith::quantize(x[i], inv_scale, zero_point);
    }
    for (IsaLevel level : qtk::detail::kIsaLevels) {
        if (!qtk::detail::cpu_supports(level)) {
            continue;
        }
        qtk_test::set_env("QTK_ISA", qtk::detail::isa_name(level));
        qtk::detail::choose_int8_quantizer()(x, count, inv_scale, zero_point, got.data());
        if (got != want) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     std::string("the session quantizer at QTK_ISA=") +
                                         qtk::detail::isa_name(level) + " differs on " + what);
        }
    }
    qtk_test::set_env("QTK_ISA", nullptr);
}

// quantize (float32 -> int8): ties at .5 (scales of a power of two make x / scale exact), values
// far outside the int8 range, NaN, infinities and signed zeros, random zero points; and the same
// values through the quantizer of a session's float inputs at every QTK_ISA level.
void test_quantize() {
    Rng rng(6);
    const int64_t sizes[] = {1, 7, 8, 9, 15, 16, 17, 33, 64, 65, 1001};
    for (int trial = 0; trial < 200; ++trial) {
        const Shape x = {rng.uniform(1, 2), sizes[rng.uniform(0, 10)]};
        const int32_t zp = int32_t(rng.uniform(-128, 127));
        OneNode c("quantize", DType::kFloat32, {x}, {0}, zp, {});
        qtk::detail::Value& y = c.graph.values.back();
        y.dtype = DType::kInt8;
        y.scale = rng.uniform(0, 1) == 0 ? float(1 << rng.uniform(0, 8)) / 64.0f
                                         : float(rng.uniform(1, 100000)) / 100000.0f;
        Bytes data = float32_data(rng, size_t(count_of(x)));
        float* values = reinterpret_cast<float*>(data.data());
        for (int64_t i = 0; i < count_of(x); ++i) {
            if (rng.uniform(0, 3) == 0) {  // k + 1/2 steps of the scale: a tie
                values[i] = (float(rng.uniform(-300, 300)) + 0.5f) * y.scale;
            }
        }
        c.inputs = {data};
        const std::string what = "quantize " + describe(x) + " scale " +
                                 std::to_string(y.scale) + " zero point " + std::to_string(zp);
        check_all(c, what);
        check_session_quantizer(values, count_of(x), y.scale, zp, what);
    }
}

}  // namespace

int main() {
    test_permute();
    test_concat();
    test_max_pool2d_ceil_sizes();
    test_max_pool2d();
    test_global_avg_pool2d();
    test_avg_pool2d();
    test_prelu();
    test_add();
    test_add_lookup();
    test_mul();
    test_lut();
    test_lut_per_channel();
    test_float32_add_mul();
    test_float32_functions();
    test_quantize();
    std::printf("%d nodes checked against the reference with:", g_cases);
    for (const std::string& name : g_checked) {
        std::printf(" %s", name.c_str());
    }
    std::printf("\n");
    return qtk_test::check_report();
}
