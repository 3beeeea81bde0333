// DeviceSession (include/qtk/device_session.h) against qtk::Session, byte for byte: a model of
// every op the device runs, at several batch sizes, on the emulated CUDA device (the GPU kernels'
// host twins, both convolutions, and Fast-Run between them) and, built with QTK_TEST_ON_GPU, on
// GPU 0 as well; channel shuffles and splits; and the errors for what the device cannot run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "device.h"
#include "check.h"
#include "model_builder.h"
#include "qtk/device_session.h"
#include "qtk/runtime.h"

namespace {

using qtk_test::AttrSpec;
using qtk_test::ModelBuilder;
using qtk_test::requant_attrs;
using qtk_test::Rng;

std::vector<AttrSpec> conv_attrs(size_t out, std::vector<int64_t> stride,
                                 std::vector<int64_t> padding, std::vector<int64_t> dilation,
                                 int64_t groups, double sx, double sy, int64_t lo) {
    std::vector<AttrSpec> attrs = requant_attrs(out, sx, 0.01, sy, lo, 127);
    attrs.insert(attrs.begin(), {AttrSpec("stride", stride), AttrSpec("padding", padding),
                                 AttrSpec("dilation", dilation), AttrSpec("groups", {groups})});
    return attrs;
}

// x [N, 6, 11, 11] -> conv 3x3 (ReLU) -> a [N, 10, 11, 11] -> depthwise 3x3 stride 2 -> b
// [N, 10, 6, 6] -> conv 1x1 -> c; add(b, c) -> d; conv 3x3 dilation 2 stride 2, 10 -> 5
// channels (quads not filled) -> k [N, 5, 2, 2]; conv 1x1 (d) -> m [N, 3, 6, 6]; concat(m, d)
// -> cat [N, 13, 6, 6]; max_pool 3x3 stride 2 padding 1 -> e [N, 13, 3, 3]; avg_pool 2x2
// stride 1 -> f [N, 13, 2, 2]; global_avg_pool2d -> g [N, 13, 1, 1]; lut (a table per channel)
// -> gate; mul(gate, f), the gate broadcast over f's plane -> s [N, 13, 2, 2]; global_avg_pool2d
// -> t; flatten -> h [N, 13]; linear -> out [N, 7]. Outputs: out, d, k.
ModelBuilder device_model() {
    ModelBuilder b;
    Rng rng(23);
    const uint32_t x = b.activation("x", {1, 6, 11, 11}, 0.05f, 3);
    const uint32_t a = b.activation("a", {1, 10, 11, 11}, 0.1f, -7);
    b.node("conv2d", "conv1",
           {x, b.weight("conv1.weight", {10, 6, 3, 3}, qtk_test::random_weights(rng, 540)),
            b.bias("conv1.bias", {10}, qtk_test::random_bias(rng, 10))},
           {a}, conv_attrs(10, {1, 1}, {1, 1}, {1, 1}, 1, 0.05, 0.1, -7));
    const uint32_t bv = b.activation("b", {1, 10, 6, 6}, 0.08f, 4);
    b.node("conv2d", "dw",
           {a, b.weight("dw.weight", {10, 1, 3, 3}, qtk_test::random_weights(rng, 90)),
            b.bias("dw.bias", {10}, qtk_test::random_bias(rng, 10))},
           {bv}, conv_attrs(10, {2, 2}, {1, 1}, {1, 1}, 10, 0.1, 0.08, -128));
    const uint32_t c = b.activation("c", {1, 10, 6, 6}, 0.12f, -2);
    b.node("conv2d", "pw",
           {bv, b.weight("pw.weight", {10, 10, 1, 1}, qtk_test::random_weights(rng, 100)),
            b.bias("pw.bias", {10}, qtk_test::random_bias(rng, 10))},
           {c}, conv_attrs(10, {1, 1}, {0, 0}, {1, 1}, 1, 0.08, 0.12, -128));
    const uint32_t d = b.activation("d", {1, 10, 6, 6}, 0.15f, 1);
    const auto m = qtk_test::rescale_multipliers({0.08, 0.12}, 0.15);
    b.node("add", "add", {bv, c}, {d},
           {AttrSpec("multiplier", m.first), AttrSpec("shift", {m.second}),
            AttrSpec("clamp", {1, 127})});
    const uint32_t k = b.activation("k", {1, 5, 2, 2}, 0.2f, 0);
    b.node("conv2d", "dilated",
           {d, b.weight("dilated.weight", {5, 10, 3, 3}, qtk_test::random_weights(rng, 450)),
            b.bias("dilated.bias", {5}, qtk_test::random_bias(rng, 5))},
           {k}, conv_attrs(5, {2, 2}, {1, 1}, {2, 2}, 1, 0.15, 0.2, -128));
    const uint32_t mv = b.activation("m", {1, 3, 6, 6}, 0.1f, -3);
    b.node("conv2d", "narrow",
           {d, b.weight("narrow.weight", {3, 10, 1, 1}, qtk_test::random_weights(rng, 30)),
            b.bias("narrow.bias", {3}, qtk_test::random_bias(rng, 3))},
           {mv}, conv_attrs(3, {1, 1}, {0, 0}, {1, 1}, 1, 0.15, 0.1, -128));
    const uint32_t cat = b.activation("cat", {1, 13, 6, 6}, 0.15f, 1);
    const qtk_test::Requant from_m = qtk_test::quantize_multiplier(0.1 / 0.15);
    b.node("concat", "cat", {mv, d}, {cat},
           {AttrSpec("axis", {1}), AttrSpec("multiplier", {from_m.multiplier, 1 << 30}),
            AttrSpec("shift", {from_m.shift, 30})});
    const uint32_t e = b.activation("e", {1, 13, 3, 3}, 0.15f, 1);
    b.node("max_pool2d", "maxpool", {cat}, {e},
           {AttrSpec("kernel", {3, 3}), AttrSpec("stride", {2, 2}), AttrSpec("padding", {1, 1}),
            AttrSpec("dilation", {1, 1})});
    const uint32_t f = b.activation("f", {1, 13, 2, 2}, 0.15f, 1);
    b.node("avg_pool2d", "avgpool", {e}, {f},
           {AttrSpec("kernel", {2, 2}), AttrSpec("stride", {1, 1}), AttrSpec("padding", {0, 0}),
            AttrSpec("count_include_pad", {0})});
    const uint32_t g = b.activation("g", {1, 13, 1, 1}, 0.15f, 1);
    b.node("global_avg_pool2d", "gap", {f}, {g});
    const uint32_t gate = b.activation("gate", {1, 13, 1, 1}, 0.004f, -128);
    b.node("lut", "gate", {g, b.weight("gate.tables", {13, 256}, rng.int8s(13 * 256))}, {gate});
    const uint32_t sv = b.activation("s", {1, 13, 2, 2}, 0.15f, 1);
    const auto gated = qtk_test::rescale_multipliers({0.004 * 0.15}, 0.15);
    b.node("mul", "scale", {gate, f}, {sv},
           {AttrSpec("multiplier", gated.first), AttrSpec("shift", {gated.second}),
            AttrSpec("clamp", {-128, 127})});
    const uint32_t t = b.activation("t", {1, 13, 1, 1}, 0.15f, 1);
    b.node("global_avg_pool2d", "gap2", {sv}, {t});
    const uint32_t h = b.activation("h", {1, 13}, 0.15f, 1);
    b.node("flatten", "flatten", {t}, {h});
    const uint32_t out = b.activation("out", {1, 7}, 0.3f, -1);
    b.node("linear", "fc",
           {h, b.weight("fc.weight", {7, 13}, qtk_test::random_weights(rng, 91)),
            b.bias("fc.bias", {7}, qtk_test::random_bias(rng, 7))},
           {out}, requant_attrs(7, 0.15, 0.02, 0.3));
    b.inputs = {x};
    b.outputs = {out, d, k};
    return b;
}

std::shared_ptr<const qtk::Model> load(const ModelBuilder& b) {
    const std::vector<uint8_t> bytes = b.build();
    return qtk::Model::from_bytes(bytes.data(), bytes.size());
}

// run_on_device on buffers in the device's own memory: x uploaded, the outputs downloaded.
std::vector<std::vector<int8_t>> run_in_device_memory(qtk::DeviceSession& session,
                                                      qtk::Device& device,
                                                      const std::vector<int8_t>& x,
                                                      const qtk::Shape& shape) {
    std::vector<std::vector<int8_t>> outputs;
    std::vector<void*> buffers;
    for (const qtk::Shape& s : session.output_shapes(shape[0])) {
        int64_t bytes = 1;
        for (int64_t d : s) {
            bytes *= d;
        }
        outputs.emplace_back(size_t(bytes));
        buffers.push_back(device.allocate(size_t(bytes)));
    }
    void* input = device.allocate(x.size());
    device.upload(input, x.data(), x.size());
    session.run_on_device({input}, {shape}, buffers);
    for (size_t i = 0; i < buffers.size(); ++i) {
        device.download(outputs[i].data(), buffers[i], outputs[i].size());
        device.release(buffers[i]);
    }
    device.release(input);
    return outputs;
}

// Every output of the device session equals the CPU session's, from host or from device memory;
// each takes 8 values or more.
void check_against_cpu(const std::shared_ptr<qtk::Device>& device,
                       const qtk::DeviceOptions& options = {}) {
    const auto model = load(device_model());
    qtk::Session cpu(model, {2});
    qtk::DeviceSession on_device(model, device, options);
    std::printf("%s\n", on_device.device_name().c_str());
    const std::vector<std::string> kernels = on_device.kernels();
    CHECK_EQ(kernels.size(), size_t(15));  // the file's nodes (the CPU fuses the add)
    CHECK(kernels[1] == "conv2d_int8_depthwise" && kernels[6] == "concat_int8" &&
          kernels[10] == "lut_int8" && kernels[11] == "mul_int8");
    Rng rng(5);
    std::vector<std::vector<bool>> seen(3, std::vector<bool>(256, false));  // per output
    for (int64_t batch : {1, 3, 1, 2}) {  // replans on every change of batch size
        const std::vector<int8_t> x = rng.int8s(size_t(batch * 6 * 11 * 11));
        const qtk::Shape shape{batch, 6, 11, 11};
        const std::vector<qtk::Tensor> want = cpu.run({x.data()}, {shape});
        const std::vector<qtk::Tensor> got = on_device.run({x.data()}, {shape});
        CHECK_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
            if (got[i].shape != want[i].shape || got[i].data != want[i].data) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         on_device.device_name() + ": output " +
                                             std::to_string(i) + " differs from the CPU's at batch " +
                                             std::to_string(batch));
            }
            for (int8_t v : want[i].data) {
                seen[i][uint8_t(v)] = true;
            }
        }
    }
    for (const std::vector<bool>& values : seen) {  // a wrong plan cannot match by accident
        CHECK(std::count(values.begin(), values.end(), true) >= 8);
    }
    for (int64_t batch : {2, 3}) {  // device memory in and out, also as the batch size changes
        const std::vector<int8_t> x = rng.int8s(size_t(batch * 6 * 11 * 11));
        const qtk::Shape shape{batch, 6, 11, 11};
        const std::vector<qtk::Tensor> want = cpu.run({x.data()}, {shape});
        const std::vector<std::vector<int8_t>> got =
            run_in_device_memory(on_device, *device, x, shape);
        CHECK_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
            CHECK(got[i] == want[i].data);
        }
    }
    std::vector<int8_t> x(6 * 11 * 11), y(7);
    CHECK_THROWS_WITH(on_device.run_on_device({x.data()}, {{1, 6, 11, 11}}, {y.data()}),
                      "the model has 3 graph output(s), got 1 pointer(s)");
    CHECK_THROWS_WITH(on_device.output_shapes(0), "the batch size must be 1 or more");
    CHECK(on_device.output_shapes(4)[0] == (qtk::Shape{4, 7}));
    CHECK(on_device.arena_bytes() > 0);
    CHECK_EQ(on_device.time_runs(2).size(), size_t(2));
}

// Fast-Run times both GEMM convolutions per layer and batch size and records the winners under
// the device's name; a later session with kUse reads them back. The bytes never change.
void test_fast_run() {
    const char* cache = "test_device_session.cache";
    std::remove(cache);
    qtk::DeviceOptions search;
    search.fast_run = qtk::FastRun::kSearch;
    search.fast_run_cache = cache;
    check_against_cpu(qtk::emulated_cuda_device(), search);
    std::ifstream in(cache);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("emulated CUDA (host twins, conv2d_int8_mma first) | qtk ") !=
          std::string::npos);
    CHECK(text.find("conv2d x[3, 6, 11, 11] out 10 kernel 3x3 stride 1x1 padding 1x1") !=
          std::string::npos);
    CHECK(text.find("\tconv2d_int8_") != std::string::npos);

    const auto model = load(device_model());
    qtk::DeviceSession searched(model, qtk::emulated_cuda_device(), search);
    qtk::DeviceOptions use = search;
    use.fast_run = qtk::FastRun::kUse;
    qtk::DeviceSession used(model, qtk::emulated_cuda_device(), use);
    const std::vector<int8_t> x(2 * 6 * 11 * 11, 9);
    searched.run({x.data()}, {{2, 6, 11, 11}});
    used.run({x.data()}, {{2, 6, 11, 11}});
    CHECK(searched.kernels() == used.kernels());
    std::remove(cache);
}

// Reshapes that keep the NCHW4 bytes are aliases, also of a graph input and as a graph output:
// x [N, 12] -> reshape [N, 12, 1, 1] -> max_pool 1x1 -> p -> flatten -> y [N, 12] (an output
// aliasing p's bytes); a reshape that would move bytes ([N, 3, 2, 2]) is refused per batch.
void test_reshapes() {
    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, 12}, 0.1f, 5);
    const uint32_t r = b.activation("r", {1, 12, 1, 1}, 0.1f, 5);
    b.node("reshape", "to4d", {x}, {r}, {AttrSpec("shape", {12, 1, 1})});
    const uint32_t pooled = b.activation("p", {1, 12, 1, 1}, 0.1f, 5);
    b.node("max_pool2d", "pool", {r}, {pooled},
           {AttrSpec("kernel", {1, 1}), AttrSpec("stride", {1, 1}), AttrSpec("padding", {0, 0}),
            AttrSpec("dilation", {1, 1})});
    const uint32_t y = b.activation("y", {1, 12}, 0.1f, 5);
    b.node("flatten", "flatten", {pooled}, {y});
    b.inputs = {x};
    b.outputs = {y, pooled};
    const auto model = load(b);
    qtk::Session cpu(model, {1});
    qtk::DeviceSession on_device(model, qtk::emulated_cuda_device());
    Rng rng(3);
    for (int64_t batch : {2, 5}) {
        const std::vector<int8_t> input = rng.int8s(size_t(batch * 12));
        const std::vector<qtk::Tensor> want = cpu.run({input.data()}, {{batch, 12}});
        const std::vector<qtk::Tensor> got = on_device.run({input.data()}, {{batch, 12}});
        CHECK(got.size() == 2 && got[0].data == want[0].data && got[1].data == want[1].data);
        CHECK(got[0].data == input);  // the pools of 1x1 windows copy
    }

    ModelBuilder moving;
    const uint32_t mx = moving.activation("x", {1, 12}, 0.1f, 5);
    const uint32_t my = moving.activation("y", {1, 3, 2, 2}, 0.1f, 5);
    moving.node("reshape", "to_planes", {mx}, {my}, {AttrSpec("shape", {3, 2, 2})});
    moving.inputs = {mx};
    moving.outputs = {my};
    qtk::DeviceSession refused(load(moving), qtk::emulated_cuda_device());
    const std::vector<int8_t> input(12);
    CHECK_THROWS_WITH(refused.run({input.data()}, {{1, 12}}),
                      "a reshape from [1, 12] to [1, 3, 2, 2] (only [N, C, 1, 1] <-> [N, C]");
    // The failed plan is made again (and fails again) rather than used half-made.
    CHECK_THROWS_WITH(refused.run({input.data()}, {{1, 12}}), "has no CUDA kernel yet");
}

// shufflenet's channel shuffle and split: x [N, 10, 3, 3] -> reshape [N, 2, 5, 3, 3] -> permute
// (0, 2, 1, 3, 4) -> reshape [N, 10, 3, 3] -> s -> split {3, 7}. Outputs: s and both parts. Any
// other permute is refused as the session is made.
void test_channel_shuffle(const std::shared_ptr<qtk::Device>& device) {
    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, 10, 3, 3}, 0.1f, 5);
    const uint32_t view = b.activation("view", {1, 2, 5, 3, 3}, 0.1f, 5);
    b.node("reshape", "view", {x}, {view}, {AttrSpec("shape", {2, 5, 3, 3})});
    const uint32_t moved = b.activation("moved", {1, 5, 2, 3, 3}, 0.1f, 5);
    b.node("permute", "transpose", {view}, {moved}, {AttrSpec("perm", {0, 2, 1, 3, 4})});
    const uint32_t shuffled = b.activation("s", {1, 10, 3, 3}, 0.1f, 5);
    b.node("reshape", "back", {moved}, {shuffled}, {AttrSpec("shape", {10, 3, 3})});
    const uint32_t first = b.activation("first", {1, 3, 3, 3}, 0.1f, 5);
    const uint32_t rest = b.activation("rest", {1, 7, 3, 3}, 0.1f, 5);
    b.node("split", "chunk", {shuffled}, {first, rest},
           {AttrSpec("axis", {1}), AttrSpec("sizes", {3, 7})});
    b.inputs = {x};
    b.outputs = {shuffled, first, rest};
    const auto model = load(b);
    qtk::Session cpu(model, {1});
    qtk::DeviceSession on_device(model, device);
    CHECK(on_device.kernels()[1] == "gather_channels_int8" &&
          on_device.kernels()[3] == "gather_channels_int8");
    Rng rng(7);
    for (int64_t batch : {1, 2}) {
        const std::vector<int8_t> input = rng.int8s(size_t(batch * 90));
        const std::vector<qtk::Tensor> want = cpu.run({input.data()}, {{batch, 10, 3, 3}});
        const std::vector<qtk::Tensor> got = on_device.run({input.data()}, {{batch, 10, 3, 3}});
        CHECK(got.size() == 3);
        for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
            CHECK(got[i].shape == want[i].shape && got[i].data == want[i].data);
        }
        CHECK(want[0].data != input);  // the shuffle moved channels
    }

    ModelBuilder other;
    const uint32_t ox = other.activation("x", {1, 4, 3, 5}, 0.1f, 5);
    const uint32_t oy = other.activation("y", {1, 4, 5, 3}, 0.1f, 5);
    other.node("permute", "swap_hw", {ox}, {oy}, {AttrSpec("perm", {0, 1, 3, 2})});
    other.inputs = {ox};
    other.outputs = {oy};
    CHECK_THROWS_WITH(qtk::DeviceSession(load(other), device),
                      "node 'swap_hw' (permute): a permute other than a channel shuffle's");
}

void test_errors() {
    const auto device = qtk::emulated_cuda_device();
    // sample_model has a clamp node and a grouped conv: the first one is named.
    CHECK_THROWS_WITH(qtk::DeviceSession(load(qtk_test::sample_model()), device),
                      "node 'relu6' (clamp): op 'clamp' has no CUDA kernel yet");
    CHECK_THROWS_WITH(qtk::DeviceSession(load(qtk_test::mixed_model()), device),
                      "the device session takes and gives int8");
    CHECK_THROWS_WITH(qtk::DeviceSession(nullptr, device), "must not be null");

    const auto model = load(device_model());
    qtk::DeviceSession session(model, device);
    const std::vector<int8_t> x(6 * 11 * 11);
    CHECK_THROWS_WITH(session.run({x.data()}, {{1, 6, 11, 12}}),
                      "graph input 'x' takes [N, 6, 11, 11] int8");
    CHECK_THROWS_WITH(session.run({}, {}), "the model has 1 graph input(s)");
    CHECK_THROWS_WITH(session.time_runs(1), "run the session once first");

    // A mul broadcasting other than [N, C, 1, 1] over [N, C, H, W] is refused as it is planned.
    ModelBuilder rows;
    const uint32_t a = rows.activation("a", {1, 4, 3, 3}, 0.1f, 0);
    const uint32_t row = rows.activation("row", {1, 1, 3, 3}, 0.1f, 0);
    const uint32_t y = rows.activation("y", {1, 4, 3, 3}, 0.1f, 0);
    const auto m = qtk_test::rescale_multipliers({0.01}, 0.1);
    const std::vector<AttrSpec> mul_attrs = {AttrSpec("multiplier", m.first),
                                             AttrSpec("shift", {m.second}),
                                             AttrSpec("clamp", {-128, 127})};
    rows.node("mul", "by_row", {a, row}, {y}, mul_attrs);
    rows.inputs = {a, row};
    rows.outputs = {y};
    qtk::DeviceSession broadcast(load(rows), device);
    const std::vector<int8_t> av(36), rowv(9);
    CHECK_THROWS_WITH(broadcast.run({av.data(), rowv.data()}, {{1, 4, 3, 3}, {1, 1, 3, 3}}),
                      "node 'by_row' (mul): a mul of [1, 4, 3, 3] by [1, 1, 3, 3] (the CUDA "
                      "kernel broadcasts only [N, C, 1, 1] over [N, C, H, W]) has no CUDA kernel");

    // An add with a fused lookup (what the CPU's graph pass writes; a file may hold it) is refused.
    ModelBuilder looked_up;
    const uint32_t la = looked_up.activation("a", {1, 4, 3, 3}, 0.1f, 0);
    const uint32_t ly = looked_up.activation("y", {1, 4, 3, 3}, 0.1f, 0);
    const uint32_t table = looked_up.weight("table", {256}, std::vector<int8_t>(256, 1));
    const auto am = qtk_test::rescale_multipliers({0.1, 0.1}, 0.1);
    looked_up.node("add", "add", {la, la, table}, {ly},
                   {AttrSpec("multiplier", am.first), AttrSpec("shift", {am.second}),
                    AttrSpec("clamp", {-128, 127}), AttrSpec("sum_zero_point", {0})});
    looked_up.inputs = {la};
    looked_up.outputs = {ly};
    CHECK_THROWS_WITH(qtk::DeviceSession(load(looked_up), device),
                      "node 'add' (add): an add with a fused lookup");

    // A rank-5 view is held as [N, A B, H, W]: a table per channel of its dim 1 is refused.
    ModelBuilder view;
    const uint32_t vx = view.activation("x", {1, 2, 3, 2, 2}, 0.1f, 0);
    const uint32_t vy = view.activation("y", {1, 2, 3, 2, 2}, 0.1f, 0);
    view.node("lut", "per_channel", {vx, view.weight("tables", {2, 256}, std::vector<int8_t>(512))},
              {vy});
    view.inputs = {vx};
    view.outputs = {vy};
    qtk::DeviceSession tables(load(view), device);
    const std::vector<int8_t> vin(24);
    CHECK_THROWS_WITH(tables.run({vin.data()}, {{1, 2, 3, 2, 2}}),
                      "a lut with a table per channel of a rank-5 view");

    // A file may mark a lut channels-last (the CPU's kernels read that layout), and split along
    // any axis: the device's kernels read NCHW4 channels only, so both are refused, named.
    ModelBuilder nhwc;
    const uint32_t nx = nhwc.activation("x", {1, 3, 3, 4}, 0.1f, 0);
    const uint32_t ny = nhwc.activation("y", {1, 3, 3, 4}, 0.1f, 0);
    nhwc.node("lut", "channels_last", {nx, nhwc.weight("table", {256}, std::vector<int8_t>(256))},
              {ny}, {AttrSpec("layout", {1})});
    nhwc.inputs = {nx};
    nhwc.outputs = {ny};
    CHECK_THROWS_WITH(qtk::DeviceSession(load(nhwc), device),
                      "node 'channels_last' (lut): a channels-last lut has no CUDA kernel yet");
    ModelBuilder rows_split;
    const uint32_t sx = rows_split.activation("x", {1, 2, 4, 3}, 0.1f, 0);
    const uint32_t top = rows_split.activation("top", {1, 2, 1, 3}, 0.1f, 0);
    const uint32_t bottom = rows_split.activation("bottom", {1, 2, 3, 3}, 0.1f, 0);
    rows_split.node("split", "by_rows", {sx}, {top, bottom},
                    {AttrSpec("axis", {2}), AttrSpec("sizes", {1, 3})});
    rows_split.inputs = {sx};
    rows_split.outputs = {top, bottom};
    CHECK_THROWS_WITH(qtk::DeviceSession(load(rows_split), device),
                      "node 'by_rows' (split): a split along another axis than the channels");
}

}  // namespace

int main() {
    check_against_cpu(qtk::emulated_cuda_device(true));
    check_against_cpu(qtk::emulated_cuda_device(false));
    test_fast_run();
    test_reshapes();
    test_channel_shuffle(qtk::emulated_cuda_device());
    test_errors();
#if QTK_TEST_ON_GPU
    try {
        check_against_cpu(qtk::cuda_device());
        qtk::DeviceOptions search;
        search.fast_run = qtk::FastRun::kSearch;
        check_against_cpu(qtk::cuda_device(), search);
        test_channel_shuffle(qtk::cuda_device());
    } catch (const qtk::Error& e) {
        std::printf("%s: the GPU run is skipped\n", e.what());
        return qtk_test::check_report() == 0 ? 77 : 1;
    }
#endif
    return qtk_test::check_report();
}
