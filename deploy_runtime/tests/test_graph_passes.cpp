// The runtime's graph passes (src/graph_passes.h): which residual adds fuse into the conv before
// them and which must not, and that a fused model gives the bytes of the file's own nodes, with
// every conv2d algorithm this CPU runs, at 1 and 2 threads and batch 1 and 3. Also the errors for a
// hand-made fused conv that does not fit.
#include <cmath>
#include <string>
#include <vector>

#include "check.h"
#include "cpu_features.h"
#include "model_builder.h"
#include "op_registry.h"
#include "qtk/runtime.h"

using qtk::Shape;
using qtk_test::AttrSpec;
using qtk_test::ModelBuilder;
using qtk_test::Rng;

namespace {

constexpr int64_t kChannels = 6, kSize = 9;

// A 3x3 conv (depthwise where asked; or 1x1, unpadded) of `x` into a new activation of as many
// channels; stride 1, pad 1; planes of size x size.
uint32_t conv(ModelBuilder& b, Rng& rng, const std::string& name, uint32_t x, bool depthwise,
              int64_t kernel = 3, int64_t channels = kChannels, int64_t size = kSize) {
    const int64_t per_group = depthwise ? 1 : channels, taps = kernel * kernel;
    const uint32_t w =
        b.weight(name + ".weight", {channels, per_group, kernel, kernel},
                 qtk_test::random_weights(rng, size_t(channels * per_group * taps)));
    const uint32_t bias =
        b.bias(name + ".bias", {channels}, qtk_test::random_bias(rng, size_t(channels)));
    const int32_t zy = static_cast<int32_t>(rng.uniform(-20, 20));
    const uint32_t y = b.activation(name, {1, channels, size, size}, 0.1f, zy);
    std::vector<AttrSpec> attrs = qtk_test::requant_attrs(
        size_t(channels), 0.05, 0.05 / std::sqrt(double(per_group * taps)), 0.1, zy, 127);
    const int64_t pad = kernel / 2;
    attrs.insert(attrs.begin(), {AttrSpec("stride", {1, 1}), AttrSpec("padding", {pad, pad}),
                                 AttrSpec("dilation", {1, 1}),
                                 AttrSpec("groups", {depthwise ? channels : 1})});
    b.node("conv2d", name, {x, w, bias}, {y}, attrs);
    return y;
}

// a + c with unequal multipliers, so that swapping the operands changes the sum.
uint32_t add(ModelBuilder& b, const std::string& name, uint32_t a, uint32_t c,
             int64_t channels = kChannels) {
    const uint32_t y = b.activation(name, {1, channels, kSize, kSize}, 0.15f, -3);
    const auto m = qtk_test::rescale_multipliers({0.1, 0.06}, 0.15);
    b.node("add", name, {a, c}, {y},
           {AttrSpec("multiplier", m.first), AttrSpec("shift", {m.second}),
            AttrSpec("clamp", {-3, 127})});
    return y;
}

// A PReLU (spec 22) with `slopes` slopes (1, or one per channel), some negative.
uint32_t prelu(ModelBuilder& b, const std::string& name, uint32_t x, int64_t slopes) {
    const uint32_t y = b.activation(name, {1, kChannels, kSize, kSize}, 0.12f, 6);
    const qtk_test::Requant positive = qtk_test::quantize_multiplier(0.15 / 0.12);
    std::vector<int64_t> multipliers, shifts;
    for (int64_t c = 0; c < slopes; ++c) {
        const double slope = c % 3 == 1 ? -0.3 : 0.1 * double(c + 1);
        const qtk_test::Requant r = qtk_test::quantize_multiplier(std::abs(slope) * 0.15 / 0.12);
        multipliers.push_back(slope < 0 ? -int64_t{r.multiplier} : int64_t{r.multiplier});
        shifts.push_back(r.shift);
    }
    b.node("prelu", name, {x}, {y},
           {AttrSpec("positive_multiplier", {positive.multiplier}),
            AttrSpec("positive_shift", {positive.shift}), AttrSpec("multiplier", multipliers),
            AttrSpec("shift", shifts), AttrSpec("clamp", {-128, 127})});
    return y;
}

// A lut's table constant: one [256], or one per channel [C, 256].
uint32_t lut_table(ModelBuilder& b, int64_t tables) {
    std::vector<int8_t> entries(size_t(tables * 256));
    for (size_t i = 0; i < entries.size(); ++i) {
        entries[i] = static_cast<int8_t>((i * 37 + i / 256) % 256 - 128);
    }
    return b.weight("table", tables == 1 ? std::vector<int64_t>{256}
                                         : std::vector<int64_t>{tables, 256},
                    entries);
}

struct Graph {
    std::string name;
    ModelBuilder builder;
    size_t fused_nodes;  // node count once the pass ran
};

std::vector<Graph> graphs() {
    std::vector<Graph> out;
    Rng rng(11);
    auto start = [](const std::string& name) {
        Graph g{name, {}, 0};
        g.builder.inputs = {g.builder.activation("x", {1, kChannels, kSize, kSize}, 0.05f, 4)};
        return g;
    };
    {  // the residual is the graph input, on either side of the add
        for (int side = 0; side < 2; ++side) {
            Graph g = start(side == 0 ? "conv + x" : "x + conv");
            ModelBuilder& b = g.builder;
            const uint32_t x = b.inputs[0];
            const uint32_t y = conv(b, rng, "conv", x, false);
            b.outputs = {side == 0 ? add(b, "add", y, x) : add(b, "add", x, y)};
            g.fused_nodes = 1;
            out.push_back(std::move(g));
        }
    }
    {  // ResNet's downsampling block: the second conv runs after the first; it takes the add
        Graph g = start("conv1 + conv2");
        ModelBuilder& b = g.builder;
        const uint32_t x = b.inputs[0];
        const uint32_t a = conv(b, rng, "conv1", x, false);
        const uint32_t c = conv(b, rng, "conv2", x, true);
        b.outputs = {add(b, "add", a, c)};
        g.fused_nodes = 2;
        out.push_back(std::move(g));
    }
    {  // two blocks: the first block's fused output is the second's residual
        Graph g = start("two blocks");
        ModelBuilder& b = g.builder;
        const uint32_t x = b.inputs[0];
        const uint32_t s1 = add(b, "add1", conv(b, rng, "conv1", x, true), x);
        b.outputs = {add(b, "add2", s1, conv(b, rng, "conv2", s1, false))};
        g.fused_nodes = 2;
        out.push_back(std::move(g));
    }
    {  // the conv's output is read again: it must be stored, so nothing fuses
        Graph g = start("conv read twice");
        ModelBuilder& b = g.builder;
        const uint32_t x = b.inputs[0];
        const uint32_t y = conv(b, rng, "conv", x, false);
        b.outputs = {add(b, "add", y, x), y};
        g.fused_nodes = 2;
        out.push_back(std::move(g));
    }
    {  // conv + itself: no residual
        Graph g = start("conv + conv output");
        ModelBuilder& b = g.builder;
        const uint32_t y = conv(b, rng, "conv", b.inputs[0], false);
        b.outputs = {add(b, "add", y, y)};
        g.fused_nodes = 2;
        out.push_back(std::move(g));
    }
    // Lookups after an add that no conv took (fuse_lookups_into_adds): a PReLU with a slope per
    // channel or one, and a lut with one table; none where the sum is read again.
    for (int64_t slopes : {kChannels, int64_t{1}}) {
        Graph g = start("conv + conv output, PReLU of " + std::to_string(slopes) + " slope(s)");
        ModelBuilder& b = g.builder;
        const uint32_t y = conv(b, rng, "conv", b.inputs[0], false);
        b.outputs = {prelu(b, "act", add(b, "add", y, y), slopes)};
        g.fused_nodes = 2;
        out.push_back(std::move(g));
    }
    for (int64_t tables : {int64_t{1}, kChannels}) {
        Graph g = start("x + x, lut of " + std::to_string(tables) + " table(s)");
        ModelBuilder& b = g.builder;
        const uint32_t x = b.inputs[0];
        const uint32_t t = lut_table(b, tables);
        const uint32_t y = b.activation("lut", {1, kChannels, kSize, kSize}, 0.2f, -7);
        b.node("lut", "lut", {add(b, "add", x, x), t}, {y}, {});
        b.outputs = {y};
        g.fused_nodes = 1;
        out.push_back(std::move(g));
    }
    {  // two luts read the sum: it must be stored
        Graph g = start("x + x read by two luts");
        ModelBuilder& b = g.builder;
        const uint32_t sum = add(b, "add", b.inputs[0], b.inputs[0]);
        const uint32_t t = lut_table(b, 1);
        const uint32_t y1 = b.activation("lut1", {1, kChannels, kSize, kSize}, 0.2f, -7);
        const uint32_t y2 = b.activation("lut2", {1, kChannels, kSize, kSize}, 0.2f, 3);
        b.node("lut", "lut1", {sum, t}, {y1}, {});
        b.node("lut", "lut2", {sum, t}, {y2}, {});
        b.outputs = {y1, y2};
        g.fused_nodes = 3;
        out.push_back(std::move(g));
    }
    {
        Graph g = start("x + x read twice, PReLU");
        ModelBuilder& b = g.builder;
        const uint32_t sum = add(b, "add", b.inputs[0], b.inputs[0]);
        b.outputs = {prelu(b, "act", sum, kChannels), sum};
        g.fused_nodes = 2;
        out.push_back(std::move(g));
    }
    return out;
}

std::vector<int8_t> run(const std::vector<uint8_t>& bytes, bool optimize_graph, int threads,
                        int64_t batch, const std::vector<int8_t>& x, size_t* nodes,
                        int64_t channels = kChannels) {
    qtk::LoadOptions options;
    options.optimize_graph = optimize_graph;
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size(), options);
    *nodes = model->node_count();
    qtk::Session session(model, {threads});
    std::vector<int8_t> joined;
    for (const qtk::Tensor& t : session.run({x.data()}, {{batch, channels, kSize, kSize}})) {
        joined.insert(joined.end(), t.data.begin(), t.data.end());
    }
    return joined;
}

void test_fusion_is_exact() {
    Rng rng(5);
    const std::vector<int8_t> x = rng.int8s(size_t(3 * kChannels * kSize * kSize));
    for (Graph& g : graphs()) {
        const std::vector<uint8_t> bytes = g.builder.build();
        size_t nodes = 0;
        qtk_test::set_env("QTK_CONV_ALGO", "conv2d_int8_reference");
        const std::vector<int8_t> want = run(bytes, false, 1, 3, x, &nodes);
        CHECK_EQ(nodes, g.builder.nodes.size());
        std::vector<const char*> algos = {nullptr};
        for (const qtk::detail::Conv2dAlgo* algo :
             qtk::detail::conv2d_algos(qtk::DType::kInt8)) {
            // Channels-last algorithms pinned add the layout pass's permutes: test_nhwc_layout.
            if (qtk::detail::cpu_supports(algo->isa) && algo->isa <= qtk::detail::isa_cap() &&
                algo->nchw) {
                algos.push_back(algo->name);
            }
        }
        for (const char* algo : algos) {
            qtk_test::set_env("QTK_CONV_ALGO", algo);
            for (int threads : {1, 2}) {
                for (int64_t batch : {3, 1}) {
                    const std::vector<int8_t> got = run(bytes, true, threads, batch, x, &nodes);
                    CHECK_EQ(nodes, g.fused_nodes);
                    const std::vector<int8_t> expected(
                        want.begin(), want.begin() + int64_t(want.size()) / 3 * batch);
                    if (batch == 3 && got != want) {
                        qtk_test::report_failure(
                            __FILE__, __LINE__,
                            g.name + ": fused differs under " + (algo ? algo : "the default") +
                                ", threads " + std::to_string(threads));
                    }
                    if (batch == 1 && g.builder.outputs.size() == 1 && got != expected) {
                        qtk_test::report_failure(__FILE__, __LINE__,
                                                 g.name + ": fused batch 1 differs");
                    }
                }
            }
        }
        qtk_test::set_env("QTK_CONV_ALGO", nullptr);
        std::printf("%s: %zu -> %zu nodes, fused bytes equal\n", g.name.c_str(),
                    g.builder.nodes.size(), g.fused_nodes);
    }
}

// A malformed lookup after an add is left to its own kernel, whose error names it: a lut table of
// 5 channels for a sum of 6, a prelu of 5 slopes.
void test_malformed_lookup_after_an_add() {
    for (const char* op : {"lut", "prelu"}) {
        ModelBuilder b;
        const uint32_t x = b.activation("x", {1, kChannels, kSize, kSize}, 0.05f, 4);
        b.inputs = {x};
        const uint32_t sum = add(b, "add", x, x);
        if (std::string(op) == "lut") {
            const uint32_t y = b.activation("lut", {1, kChannels, kSize, kSize}, 0.2f, -7);
            b.node("lut", "lut", {sum, lut_table(b, kChannels - 1)}, {y}, {});
            b.outputs = {y};
        } else {
            b.outputs = {prelu(b, "act", sum, kChannels - 1)};
        }
        const std::vector<uint8_t> bytes = b.build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(bytes.data(), bytes.size()),
                          std::string("node '") + (std::string(op) == "lut" ? "lut" : "act") +
                              "' (" + op + ")");
    }
}

// A file may hold the fused form itself; the conv kernel checks it like any node.
void test_fused_conv_in_a_file() {
    Graph g = std::move(graphs()[0]);
    ModelBuilder& b = g.builder;
    qtk_test::NodeSpec add_node = b.nodes[1];
    b.nodes.pop_back();
    qtk_test::NodeSpec& c = b.nodes[0];
    c.inputs.push_back(b.inputs[0]);
    c.outputs = add_node.outputs;
    c.attrs.push_back(AttrSpec("conv_zero_point", {0}));
    c.attrs.push_back(AttrSpec("add_multiplier", add_node.attrs[0].ints));
    c.attrs.push_back(AttrSpec("add_shift", add_node.attrs[1].ints));
    c.attrs.push_back(AttrSpec("add_clamp", add_node.attrs[2].ints));
    {
        const std::vector<uint8_t> bytes = b.build();
        CHECK_EQ(qtk::Model::from_bytes(bytes.data(), bytes.size())->node_count(), size_t{1});
    }
    c.attrs.pop_back();
    {
        const std::vector<uint8_t> bytes = b.build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(bytes.data(), bytes.size()),
                          "node 'conv' (conv2d): missing attribute 'add_clamp'");
    }
    c.attrs.push_back(AttrSpec("add_clamp", {-3, 127}));
    {  // a file may say "layout" = 1 (NHWC) itself, nothing else
        c.attrs.push_back(AttrSpec("layout", {2}));
        const std::vector<uint8_t> bytes = b.build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(bytes.data(), bytes.size()),
                          "node 'conv' (conv2d): attribute 'layout'");
        c.attrs.pop_back();
    }
    const uint32_t small = b.activation("small", {1, kChannels, kSize - 1, kSize}, 0.05f, 0);
    b.inputs.push_back(small);
    c.inputs[3] = small;
    const std::vector<uint8_t> bytes = b.build();
    CHECK_THROWS_WITH(qtk::Model::from_bytes(bytes.data(), bytes.size()),
                      "node 'conv' (conv2d): the fused residual has shape [1, 6, 8, 9], the conv "
                      "computes [1, 6, 9, 9]");
}

// The model optimized gives `want` at 1 and 2 threads with `nodes` nodes once loaded, of which
// `nhwc_convs` convs run a channels-last algorithm.
void check_layout(const std::vector<uint8_t>& bytes, const std::vector<int8_t>& input,
                  const std::vector<int8_t>& want, int64_t channels, size_t nodes,
                  size_t nhwc_convs, const std::string& what) {
    for (int threads : {1, 2}) {
        size_t loaded_nodes = 0;
        CHECK(run(bytes, true, threads, 3, input, &loaded_nodes, channels) == want);
        CHECK_EQ(loaded_nodes, nodes);
    }
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    size_t count = 0;
    for (const std::string& algo : model->algorithms()) {
        count += algo.find("_nhwc_") != std::string::npos;
    }
    CHECK_EQ(count, nhwc_convs);
    std::printf("NHWC layout, %s: %zu nodes, %zu channels-last convs, bytes equal\n",
                what.c_str(), nodes, count);
}

// check_layout at QTK_ISA=amx_int8, avx512_vnni and avx2 on random input: `nodes` nodes, plus
// `permutes` and with `nhwc_convs` channels-last convs where the region converts (`converts`, at
// AVX-512 VNNI and up on a CPU that has it).
void check_layout_at_each_cap(const std::vector<uint8_t>& bytes, Rng& rng, int64_t channels,
                              bool converts, size_t nodes, size_t permutes, size_t nhwc_convs,
                              const std::string& what) {
    const std::vector<int8_t> input = rng.int8s(size_t(3 * channels * kSize * kSize));
    size_t file_nodes = 0;
    const std::vector<int8_t> want = run(bytes, false, 1, 3, input, &file_nodes, channels);
    using qtk::detail::IsaLevel;
    for (IsaLevel cap : {IsaLevel::kAmxInt8, IsaLevel::kAvx512Vnni, IsaLevel::kAvx2}) {
        const char* isa = qtk::detail::isa_name(cap);
        qtk_test::set_env("QTK_ISA", isa);
        const bool nhwc = converts && cap >= IsaLevel::kAvx512Vnni &&
                          qtk::detail::cpu_supports(IsaLevel::kAvx512Vnni);
        check_layout(bytes, input, want, channels, nodes + (nhwc ? permutes : 0),
                     nhwc ? nhwc_convs : 0, what + ", QTK_ISA=" + isa);
    }
    qtk_test::set_env("QTK_ISA", nullptr);
}

// The layout pass on chains of mobilenet_v2's block: 1x1 expand, depthwise 3x3, 1x1 project plus
// the block's input (fused). The first block's expand output is also a graph output and its
// depthwise output is read by an add: both need their NCHW value back. Where this CPU has the
// channels-last kernels (AVX-512 VNNI and up), a chain of 6 blocks runs all its convs NHWC behind
// one permute of x (read by the first expand and as its residual) and three permutes back; one
// block alone moves too many bytes through those permutes for what it saves (1.5 times its convs'
// activations against the 8 the pass asks for) and stays NCHW, as does everything under
// QTK_ISA=avx2. Bytes as the file's own nodes in every case.
void test_nhwc_layout() {
    for (int blocks : {1, 6}) {
        Rng rng(7);
        ModelBuilder b;
        const uint32_t x = b.activation("x", {1, kChannels, kSize, kSize}, 0.05f, 4);
        b.inputs = {x};
        uint32_t block = x, first_expand = 0, dw_twice = 0;
        for (int i = 0; i < blocks; ++i) {
            const std::string name = "block" + std::to_string(i);
            const uint32_t expand = conv(b, rng, name + ".expand", block, false, 1);
            const uint32_t dw = conv(b, rng, name + ".dw", expand, true);
            if (i == 0) {
                first_expand = expand;
                dw_twice = add(b, "dw_twice", dw, dw);
            }
            block = add(b, name + ".add", conv(b, rng, name + ".project", dw, false, 1), block);
        }
        b.outputs = {block, first_expand, dw_twice};
        // The convs, the unfused add (+ 4 permutes).
        check_layout_at_each_cap(b.build(), rng, kChannels, blocks > 1, size_t(3 * blocks + 1), 4,
                                 size_t(3 * blocks), std::to_string(blocks) + " block(s)");
    }
}

// resnet's basic blocks (3x3 conv, 3x3 conv plus the block's input, fused) at 40 channels, a 3x3
// max-pool after the second: with AMX or AVX-512 VNNI the implicit GEMM takes every conv and the
// max-pool joins them, so the chain runs NHWC behind one permute in and one out (10 convs'
// activations against 2 permutes); under QTK_ISA=avx2 it stays NCHW. Bytes as the file's own
// nodes.
void test_nhwc_layout_dense() {
    constexpr int64_t channels = 40;
    constexpr int blocks = 5;
    Rng rng(9);
    ModelBuilder b;
    uint32_t block = b.activation("x", {1, channels, kSize, kSize}, 0.05f, 4);
    b.inputs = {block};
    for (int i = 0; i < blocks; ++i) {
        const std::string name = "block" + std::to_string(i);
        const uint32_t conv1 = conv(b, rng, name + ".conv1", block, false, 3, channels);
        const uint32_t conv2 = conv(b, rng, name + ".conv2", conv1, false, 3, channels);
        block = add(b, name + ".add", conv2, block, channels);
        if (i == 1) {
            const uint32_t pooled = b.activation("pool", {1, channels, kSize, kSize}, 0.15f, -3);
            b.node("max_pool2d", "pool", {block}, {pooled},
                   {AttrSpec("kernel", {3, 3}), AttrSpec("stride", {1, 1}),
                    AttrSpec("padding", {1, 1}), AttrSpec("dilation", {1, 1})});
            block = pooled;
        }
    }
    b.outputs = {block};
    // The convs and the max-pool (+ 2 permutes).
    check_layout_at_each_cap(b.build(), rng, channels, true, size_t(2 * blocks + 1), 2,
                             size_t(2 * blocks), std::to_string(blocks) + " basic blocks");
    // A file's max_pool2d may say "layout" = 1 (NHWC) too, nothing else.
    for (qtk_test::NodeSpec& node : b.nodes) {
        if (node.op == "max_pool2d") {
            node.attrs.push_back(AttrSpec("layout", {2}));
        }
    }
    const std::vector<uint8_t> bad = b.build();
    CHECK_THROWS_WITH(qtk::Model::from_bytes(bad.data(), bad.size()),
                      "node 'pool' (max_pool2d): attribute 'layout'");
}

// An image's stem alone: a 7x7 conv over 3 channels and a 3x3 max-pool, as BiRealNet18's before
// its binary (NCHW) blocks. Its permutes move as many bytes as its conv's activations, far from
// the 8 times the pass asks for, but a conv over fewer than 4 channels converts its region
// anyway (channels-last packs its K by kernel rows): with AVX-512 VNNI the conv and the max-pool
// run NHWC behind one permute in and one out. Bytes as the file's own nodes.
void test_nhwc_layout_stem() {
    constexpr int64_t in = 3, out = 16;
    Rng rng(13);
    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, in, kSize, kSize}, 0.05f, 4);
    b.inputs = {x};
    const uint32_t w = b.weight("stem.weight", {out, in, 7, 7},
                                qtk_test::random_weights(rng, size_t(out * in * 49)));
    const uint32_t bias = b.bias("stem.bias", {out}, qtk_test::random_bias(rng, size_t(out)));
    const uint32_t y = b.activation("stem", {1, out, kSize, kSize}, 0.1f, -5);
    std::vector<AttrSpec> attrs =
        qtk_test::requant_attrs(size_t(out), 0.05, 0.05 / std::sqrt(double(in * 49)), 0.1, -5, 127);
    attrs.insert(attrs.begin(), {AttrSpec("stride", {1, 1}), AttrSpec("padding", {3, 3}),
                                 AttrSpec("dilation", {1, 1}), AttrSpec("groups", {1})});
    b.node("conv2d", "stem", {x, w, bias}, {y}, attrs);
    const uint32_t pooled = b.activation("pool", {1, out, kSize, kSize}, 0.1f, -5);
    b.node("max_pool2d", "pool", {y}, {pooled},
           {AttrSpec("kernel", {3, 3}), AttrSpec("stride", {1, 1}), AttrSpec("padding", {1, 1}),
            AttrSpec("dilation", {1, 1})});
    b.outputs = {pooled};
    // The conv and the max-pool (+ 2 permutes).
    check_layout_at_each_cap(b.build(), rng, in, true, 2, 2, 1, "stem over 3 channels");
}

}  // namespace

// mobilenet_v3's block with squeeze-excitation at 40 channels: 1x1 expand, depthwise 3x3, then
// global_avg_pool2d (keeping its dims), two 1x1 convs on the 1x1 plane, a lut (hard-sigmoid's
// int8 form) and the mul of the depthwise output by those per-channel factors, then the 1x1
// project plus the block's input (fused). With the channels-last kernels (AVX-512 VNNI and up) the
// pooling, lut and mul join the convs' region, so 4 blocks run NHWC behind one permute in and one
// out; under QTK_ISA=avx2 everything stays NCHW. Bytes as the file's own nodes.
void test_nhwc_layout_squeeze_excitation() {
    constexpr int64_t channels = 40;
    constexpr int blocks = 4;
    Rng rng(13);
    ModelBuilder b;
    uint32_t block = b.activation("x", {1, channels, kSize, kSize}, 0.05f, 4);
    b.inputs = {block};
    for (int i = 0; i < blocks; ++i) {
        const std::string name = "block" + std::to_string(i);
        const uint32_t expand = conv(b, rng, name + ".expand", block, false, 1, channels);
        const uint32_t dw = conv(b, rng, name + ".dw", expand, true, 3, channels);
        const uint32_t pooled = b.activation(name + ".pool", {1, channels, 1, 1}, 0.1f,
                                             b.values[dw].zero_point);  // pooling keeps it
        b.node("global_avg_pool2d", name + ".pool", {dw}, {pooled}, {AttrSpec("keepdim", {1})});
        const uint32_t reduce = conv(b, rng, name + ".fc1", pooled, false, 1, channels, 1);
        const uint32_t excite = conv(b, rng, name + ".fc2", reduce, false, 1, channels, 1);
        const uint32_t table = b.weight(name + ".table", {256}, rng.int8s(256));
        const uint32_t factors = b.activation(name + ".gate", {1, channels, 1, 1}, 0.004f, -128);
        b.node("lut", name + ".gate", {excite, table}, {factors});
        const uint32_t scaled = b.activation(name + ".scaled", {1, channels, kSize, kSize}, 0.1f, 2);
        const auto m = qtk_test::rescale_multipliers({0.1 * 0.004}, 0.1);
        b.node("mul", name + ".scaled", {dw, factors}, {scaled},
               {AttrSpec("multiplier", m.first), AttrSpec("shift", {m.second}),
                AttrSpec("clamp", {-128, 127})});
        const uint32_t project = conv(b, rng, name + ".project", scaled, false, 1, channels);
        block = add(b, name + ".add", project, block, channels);
    }
    b.outputs = {block};
    // 8 nodes a block once the add is fused (+ 2 permutes).
    check_layout_at_each_cap(b.build(), rng, channels, true, size_t(8 * blocks), 2,
                             size_t(5 * blocks),
                             std::to_string(blocks) + " squeeze-excitation blocks");
}

// mobilenet_v3's block with a HardSwish between the expand and the depthwise conv, 40 channels,
// 6 blocks. With one table per lut, the lut joins the convs' region as in test_nhwc_layout: every
// conv runs NHWC behind one permute in and one out. With a table per channel (spec 25)
// channels-last would look up a byte at a time, so those luts stay NCHW, which leaves no region
// worth its permutes: every node runs NCHW. Bytes as the file's own nodes in both.
void test_nhwc_layout_per_channel_lut() {
    constexpr int64_t channels = 40;
    constexpr int blocks = 6;
    for (bool per_channel : {false, true}) {
        Rng rng(17);
        ModelBuilder b;
        uint32_t block = b.activation("x", {1, channels, kSize, kSize}, 0.05f, 4);
        b.inputs = {block};
        const int64_t tables = per_channel ? channels : 1;
        for (int i = 0; i < blocks; ++i) {
            const std::string name = "block" + std::to_string(i);
            const uint32_t expand = conv(b, rng, name + ".expand", block, false, 1, channels);
            const uint32_t table =
                b.weight(name + ".table", per_channel ? std::vector<int64_t>{channels, 256}
                                                      : std::vector<int64_t>{256},
                         rng.int8s(size_t(tables * 256)));
            const uint32_t swished = b.activation(name + ".hswish", {1, channels, kSize, kSize},
                                                  0.1f, b.values[expand].zero_point);
            b.node("lut", name + ".hswish", {expand, table}, {swished});
            const uint32_t dw = conv(b, rng, name + ".dw", swished, true, 3, channels);
            block = add(b, name + ".add", conv(b, rng, name + ".project", dw, false, 1, channels),
                        block, channels);
        }
        b.outputs = {block};
        // 4 nodes a block once the add is fused (+ 2 permutes where the region converts).
        check_layout_at_each_cap(b.build(), rng, channels, !per_channel, size_t(4 * blocks), 2,
                                 per_channel ? 0 : size_t(3 * blocks),
                                 std::to_string(blocks) + " blocks with " +
                                     std::to_string(tables) + " table(s) per lut");
    }
}

int main() {
    test_fusion_is_exact();
    test_fused_conv_in_a_file();
    test_malformed_lookup_after_an_add();
    test_nhwc_layout();
    test_nhwc_layout_dense();
    test_nhwc_layout_stem();
    test_nhwc_layout_squeeze_excitation();
    test_nhwc_layout_per_channel_lut();
    return qtk_test::check_report();
}
