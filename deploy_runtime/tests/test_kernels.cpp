// Each reference kernel, run through Model and Session on small builder models, against a naive
// interpreter of the same records written here (explicitly padded inputs, multi-index loops).
// Also: 1 vs 2 threads give identical bytes, and batch 3 equals three batch-1 runs.
#include <algorithm>
#include <functional>
#include <map>

#include "check.h"
#include "model_builder.h"
#include "qtk/arithmetic.h"
#include "qtk/runtime.h"
#include "thread_pool.h"

using qtk::Shape;
using qtk_test::AttrSpec;
using qtk_test::ModelBuilder;
using qtk_test::NodeSpec;
using qtk_test::Rng;
using qtk_test::ValueSpec;

namespace {

struct Naive {
    Shape shape;
    std::vector<int8_t> data;
};

int64_t count_of(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) {
        n *= d;
    }
    return n;
}

const std::vector<int64_t>& attr(const NodeSpec& node, const std::string& key) {
    for (const AttrSpec& a : node.attrs) {
        if (a.key == key) {
            return a.ints;
        }
    }
    static const std::vector<int64_t> kMissing;
    qtk_test::report_failure(__FILE__, __LINE__, "test model lacks attribute " + key);
    return kMissing;
}

std::vector<int32_t> int32_data(const ValueSpec& v) {
    std::vector<int32_t> out(v.data.size() / 4);
    for (size_t i = 0; i < out.size(); ++i) {
        uint32_t u = 0;
        for (int b = 0; b < 4; ++b) {
            u |= uint32_t{v.data[4 * i + b]} << (8 * b);
        }
        out[i] = static_cast<int32_t>(u);
    }
    return out;
}

// [N, C, H, W] -> [N, C, H + 2 ph, W + 2 pw] with `fill` around.
std::vector<int32_t> pad_planes(const Naive& x, int64_t ph, int64_t pw, int32_t fill) {
    const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
    const int64_t hp = h + 2 * ph, wp = w + 2 * pw;
    std::vector<int32_t> out(n * c * hp * wp, fill);
    for (int64_t p = 0; p < n * c; ++p) {
        for (int64_t y = 0; y < h; ++y) {
            for (int64_t xx = 0; xx < w; ++xx) {
                out[(p * hp + y + ph) * wp + xx + pw] = x.data[(p * h + y) * w + xx];
            }
        }
    }
    return out;
}

Naive naive_conv(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const ValueSpec& xv = b.values[node.inputs[0]];
    const ValueSpec& wv = b.values[node.inputs[1]];
    const ValueSpec& yv = b.values[node.outputs[0]];
    const std::vector<int32_t> bias = int32_data(b.values[node.inputs[2]]);
    const auto& stride = attr(node, "stride");
    const auto& pad = attr(node, "padding");
    const auto& dil = attr(node, "dilation");
    const int64_t groups = attr(node, "groups")[0];
    const auto& mult = attr(node, "multiplier");
    const auto& shift = attr(node, "shift");
    const auto& clamp = attr(node, "clamp");
    const int64_t n = x.shape[0], h = x.shape[2], w = x.shape[3];
    const int64_t o = wv.dims[0], cg = wv.dims[1], kh = wv.dims[2], kw = wv.dims[3];
    const int64_t hp = h + 2 * pad[0], wp = w + 2 * pad[1];
    const int64_t ho = (hp - dil[0] * (kh - 1) - 1) / stride[0] + 1;
    const int64_t wo = (wp - dil[1] * (kw - 1) - 1) / stride[1] + 1;
    const std::vector<int32_t> padded = pad_planes(x, pad[0], pad[1], xv.zero_point);
    Naive y{{n, o, ho, wo}, std::vector<int8_t>(n * o * ho * wo)};
    for (int64_t s = 0; s < n; ++s) {
        for (int64_t oc = 0; oc < o; ++oc) {
            for (int64_t oy = 0; oy < ho; ++oy) {
                for (int64_t ox = 0; ox < wo; ++ox) {
                    const int64_t g = oc / (o / groups);
                    int64_t acc = bias[oc];
                    for (int64_t ic = 0; ic < cg; ++ic) {
                        for (int64_t ky = 0; ky < kh; ++ky) {
                            for (int64_t kx = 0; kx < kw; ++kx) {
                                const int64_t c = g * cg + ic;
                                const int32_t xq = padded[((s * x.shape[1] + c) * hp +
                                                           oy * stride[0] + ky * dil[0]) *
                                                              wp +
                                                          ox * stride[1] + kx * dil[1]];
                                const int32_t wq = static_cast<int8_t>(
                                    wv.data[((oc * cg + ic) * kh + ky) * kw + kx]);
                                acc += (xq - xv.zero_point) * wq;
                            }
                        }
                    }
                    y.data[((s * o + oc) * ho + oy) * wo + ox] = qtk::arith::requantize(
                        static_cast<int32_t>(acc), static_cast<int32_t>(mult[oc]),
                        static_cast<int32_t>(shift[oc]), yv.zero_point,
                        static_cast<int32_t>(clamp[0]), static_cast<int32_t>(clamp[1]));
                }
            }
        }
    }
    return y;
}

Naive naive_linear(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const ValueSpec& wv = b.values[node.inputs[1]];
    const std::vector<int32_t> bias = int32_data(b.values[node.inputs[2]]);
    const int32_t zx = b.values[node.inputs[0]].zero_point,
                  zy = b.values[node.outputs[0]].zero_point;
    const auto& mult = attr(node, "multiplier");
    const auto& shift = attr(node, "shift");
    const auto& clamp = attr(node, "clamp");
    const int64_t n = x.shape[0], k = x.shape[1], o = wv.dims[0];
    Naive y{{n, o}, std::vector<int8_t>(n * o)};
    for (int64_t s = 0; s < n; ++s) {
        for (int64_t j = 0; j < o; ++j) {
            int64_t acc = bias[j];
            for (int64_t i = 0; i < k; ++i) {
                acc += (x.data[s * k + i] - zx) * int32_t{static_cast<int8_t>(wv.data[j * k + i])};
            }
            y.data[s * o + j] = qtk::arith::requantize(
                static_cast<int32_t>(acc), static_cast<int32_t>(mult[j]),
                static_cast<int32_t>(shift[j]), zy, static_cast<int32_t>(clamp[0]),
                static_cast<int32_t>(clamp[1]));
        }
    }
    return y;
}

Naive naive_add(const ModelBuilder& b, const NodeSpec& node, const Naive& a, const Naive& c) {
    const auto& mult = attr(node, "multiplier");
    const int32_t shift = static_cast<int32_t>(attr(node, "shift")[0]);
    const auto& clamp = attr(node, "clamp");
    const int32_t za = b.values[node.inputs[0]].zero_point,
                  zb = b.values[node.inputs[1]].zero_point;
    Naive y{a.shape, std::vector<int8_t>(a.data.size())};
    for (size_t i = 0; i < a.data.size(); ++i) {
        const int64_t sum = (a.data[i] - za) * mult[0] + (c.data[i] - zb) * mult[1];
        y.data[i] = qtk::arith::finish_rescaled_sum(
            sum, shift, b.values[node.outputs[0]].zero_point, static_cast<int32_t>(clamp[0]),
            static_cast<int32_t>(clamp[1]));
    }
    return y;
}

Naive naive_clamp(const NodeSpec& node, const Naive& x) {
    const auto& clamp = attr(node, "clamp");
    Naive y = x;
    for (int8_t& v : y.data) {
        v = static_cast<int8_t>(std::min<int64_t>(std::max<int64_t>(v, clamp[0]), clamp[1]));
    }
    return y;
}

// Walks every input element by multi-index and drops it at its place in the output.
Naive naive_concat(const ModelBuilder& b, const NodeSpec& node, const std::vector<Naive>& in) {
    const size_t axis = static_cast<size_t>(attr(node, "axis")[0]);
    const auto& mult = attr(node, "multiplier");
    const auto& shift = attr(node, "shift");
    Naive y{in[0].shape, {}};
    y.shape[axis] = 0;
    for (const Naive& t : in) {
        y.shape[axis] += t.shape[axis];
    }
    y.data.resize(count_of(y.shape));
    int64_t axis_offset = 0;
    for (size_t k = 0; k < in.size(); ++k) {
        const Shape& s = in[k].shape;
        for (int64_t flat = 0; flat < count_of(s); ++flat) {
            std::vector<int64_t> idx(s.size());
            int64_t rest = flat;
            for (size_t d = s.size(); d-- > 0;) {
                idx[d] = rest % s[d];
                rest /= s[d];
            }
            idx[axis] += axis_offset;
            int64_t out_flat = 0;
            for (size_t d = 0; d < s.size(); ++d) {
                out_flat = out_flat * y.shape[d] + idx[d];
            }
            y.data[out_flat] =
                qtk::arith::rescale(in[k].data[flat], b.values[node.inputs[k]].zero_point,
                                    static_cast<int32_t>(mult[k]), static_cast<int32_t>(shift[k]),
                                    b.values[node.outputs[0]].zero_point);
        }
        axis_offset += s[axis];
    }
    return y;
}

// Max and average pooling over an explicitly padded input; `in_bounds` marks real elements.
Naive naive_pool(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const bool is_max = node.op == "max_pool2d";
    const bool global = node.op == "global_avg_pool2d";
    const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
    const std::vector<int64_t> kernel = global ? std::vector<int64_t>{h, w} : attr(node, "kernel");
    const std::vector<int64_t> stride = global ? std::vector<int64_t>{1, 1} : attr(node, "stride");
    const std::vector<int64_t> pad = global ? std::vector<int64_t>{0, 0} : attr(node, "padding");
    const std::vector<int64_t> dil = is_max ? attr(node, "dilation") : std::vector<int64_t>{1, 1};
    const bool include_pad = node.op == "avg_pool2d" && attr(node, "count_include_pad")[0] == 1;
    const int32_t z = b.values[node.inputs[0]].zero_point;
    constexpr int32_t kPad = 1000;  // marks padding
    const std::vector<int32_t> padded = pad_planes(x, pad[0], pad[1], kPad);
    const int64_t hp = h + 2 * pad[0], wp = w + 2 * pad[1];
    const int64_t ho = (hp - dil[0] * (kernel[0] - 1) - 1) / stride[0] + 1;
    const int64_t wo = (wp - dil[1] * (kernel[1] - 1) - 1) / stride[1] + 1;
    Naive y{{n, c, ho, wo}, std::vector<int8_t>(n * c * ho * wo)};
    for (int64_t p = 0; p < n * c; ++p) {
        for (int64_t oy = 0; oy < ho; ++oy) {
            for (int64_t ox = 0; ox < wo; ++ox) {
                int32_t best = -128;
                int64_t sum = 0, count = 0;
                for (int64_t ky = 0; ky < kernel[0]; ++ky) {
                    for (int64_t kx = 0; kx < kernel[1]; ++kx) {
                        const int32_t v = padded[(p * hp + oy * stride[0] + ky * dil[0]) * wp +
                                                 ox * stride[1] + kx * dil[1]];
                        if (v == kPad) {
                            continue;
                        }
                        best = std::max(best, v);
                        sum += v - z;
                        ++count;
                    }
                }
                const int64_t divisor = include_pad ? kernel[0] * kernel[1] : count;
                y.data[(p * ho + oy) * wo + ox] =
                    is_max ? static_cast<int8_t>(best) : qtk::arith::average(sum, divisor, z);
            }
        }
    }
    return y;
}

std::vector<Naive> naive_run(const ModelBuilder& b, const std::vector<Naive>& inputs) {
    std::map<uint32_t, Naive> env;
    for (size_t i = 0; i < b.inputs.size(); ++i) {
        env[b.inputs[i]] = inputs[i];
    }
    for (const NodeSpec& node : b.nodes) {
        const Naive& x = env[node.inputs[0]];
        Naive y;
        if (node.op == "conv2d") {
            y = naive_conv(b, node, x);
        } else if (node.op == "linear") {
            y = naive_linear(b, node, x);
        } else if (node.op == "add") {
            y = naive_add(b, node, x, env[node.inputs[1]]);
        } else if (node.op == "clamp") {
            y = naive_clamp(node, x);
        } else if (node.op == "flatten") {
            y = Naive{{x.shape[0], count_of(x.shape) / x.shape[0]}, x.data};
        } else if (node.op == "concat") {
            std::vector<Naive> in;
            for (uint32_t id : node.inputs) {
                in.push_back(env[id]);
            }
            y = naive_concat(b, node, in);
        } else {
            y = naive_pool(b, node, x);
        }
        env[node.outputs[0]] = y;
    }
    std::vector<Naive> out;
    for (uint32_t id : b.outputs) {
        out.push_back(env[id]);
    }
    return out;
}

std::vector<qtk::Tensor> session_run(qtk::Session& session, const std::vector<Naive>& inputs) {
    std::vector<const int8_t*> ptrs;
    std::vector<Shape> shapes;
    for (const Naive& t : inputs) {
        ptrs.push_back(t.data.data());
        shapes.push_back(t.shape);
    }
    return session.run(ptrs, shapes);
}

std::vector<Naive> random_inputs(const ModelBuilder& b, int64_t batch, Rng& rng) {
    std::vector<Naive> in;
    for (uint32_t id : b.inputs) {
        Shape s = b.values[id].dims;
        s[0] = batch;
        in.push_back(Naive{s, rng.int8s(static_cast<size_t>(count_of(s)))});
    }
    return in;
}

// Sample `n` of a batched tensor as a batch-1 tensor.
Naive sample(const Naive& t, int64_t n) {
    const int64_t per = count_of(t.shape) / t.shape[0];
    Shape s = t.shape;
    s[0] = 1;
    return Naive{s, std::vector<int8_t>(t.data.begin() + n * per, t.data.begin() + (n + 1) * per)};
}

void check_model(const std::string& name, const ModelBuilder& b) {
    std::printf("%s\n", name.c_str());
    const std::vector<uint8_t> bytes = b.build();
    std::shared_ptr<const qtk::Model> model;
    try {
        model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    } catch (const qtk::Error& e) {
        qtk_test::report_failure(__FILE__, __LINE__, name + ": load failed: " + e.what());
        return;
    }
    qtk::Session one_thread(model, {1});
    qtk::Session two_threads(model, {2});
    Rng rng(7);
    for (int64_t batch : {int64_t{1}, int64_t{3}, int64_t{1}}) {
        const std::vector<Naive> inputs = random_inputs(b, batch, rng);
        const std::vector<Naive> expected = naive_run(b, inputs);
        const std::vector<qtk::Tensor> got1 = session_run(one_thread, inputs);
        const std::vector<qtk::Tensor> got2 = session_run(two_threads, inputs);
        CHECK(one_thread.arena_bytes() >= one_thread.arena_lower_bound());
        CHECK_EQ(got1.size(), expected.size());
        for (size_t i = 0; i < std::min(got1.size(), expected.size()); ++i) {
            if (got1[i].shape != expected[i].shape || got1[i].data != expected[i].data) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         name + ": output " + std::to_string(i) +
                                             " differs from the naive result (batch " +
                                             std::to_string(batch) + ", shape " +
                                             qtk::to_string(got1[i].shape) + ")");
            }
            if (got2[i].data != got1[i].data) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         name + ": 2 threads differ from 1 thread");
            }
        }
        // Each sample of a batch equals that sample run alone.
        for (int64_t n = 0; batch > 1 && n < batch; ++n) {
            std::vector<Naive> single;
            for (const Naive& t : inputs) {
                single.push_back(sample(t, n));
            }
            const std::vector<qtk::Tensor> alone = session_run(one_thread, single);
            for (size_t i = 0; i < got1.size(); ++i) {
                const Naive part = sample(Naive{got1[i].shape, got1[i].data}, n);
                if (part.data != alone[i].data) {
                    qtk_test::report_failure(__FILE__, __LINE__,
                                             name + ": batch sample " + std::to_string(n) +
                                                 " differs from the batch-1 run");
                }
            }
        }
    }
}

std::vector<AttrSpec> conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> pad,
                                 std::vector<int64_t> dil, int64_t groups,
                                 std::vector<AttrSpec> requant) {
    requant.insert(requant.begin(),
                   {AttrSpec("stride", std::move(stride)), AttrSpec("padding", std::move(pad)),
                    AttrSpec("dilation", std::move(dil)), AttrSpec("groups", {groups})});
    return requant;
}

ModelBuilder conv_model(Shape x_dims, Shape w_dims, Shape y_dims, std::vector<AttrSpec> attrs) {
    ModelBuilder b;
    Rng rng(11);
    const uint32_t x = b.activation("x", x_dims, 0.05f, -3);
    const uint32_t w =
        b.weight("conv.weight", w_dims,
                 qtk_test::random_weights(rng, static_cast<size_t>(count_of(w_dims))));
    const uint32_t bias = b.bias("conv.bias", {w_dims[0]},
                                 qtk_test::random_bias(rng, static_cast<size_t>(w_dims[0])));
    const uint32_t y = b.activation("y", y_dims, 0.08f, 4);
    b.node("conv2d", "conv", {x, w, bias}, {y}, std::move(attrs));
    b.inputs = {x};
    b.outputs = {y};
    return b;
}

ModelBuilder single_op_model(const std::string& op, Shape x_dims, Shape y_dims,
                             std::vector<AttrSpec> attrs, float y_scale = 0.05f,
                             int32_t y_zero_point = -3) {
    ModelBuilder b;
    const uint32_t x = b.activation("x", x_dims, 0.05f, -3);
    const uint32_t y = b.activation("y", y_dims, y_scale, y_zero_point);
    b.node(op, op, {x}, {y}, std::move(attrs));
    b.inputs = {x};
    b.outputs = {y};
    return b;
}

void test_conv() {
    using qtk_test::requant_attrs;
    check_model("conv 3x3 pad 1, relu",
                conv_model({1, 3, 7, 6}, {4, 3, 3, 3}, {1, 4, 7, 6},
                           conv_attrs({1, 1}, {1, 1}, {1, 1}, 1,
                                      requant_attrs(4, 0.05, 0.02, 0.08, 4, 127))));
    // H: (9 + 4 - 2*2 - 1) / 2 + 1 = 5; W: (8 + 2 - 3*1 - 1) / 1 + 1 = 7.
    check_model(
        "conv grouped, strided, dilated, asymmetric",
        conv_model({1, 4, 9, 8}, {6, 2, 3, 2}, {1, 6, 5, 7},
                   conv_attrs({2, 1}, {2, 1}, {2, 3}, 2, requant_attrs(6, 0.05, 0.02, 0.08))));
    check_model("conv depthwise stride 2 no padding",
                conv_model({1, 3, 5, 5}, {3, 1, 3, 3}, {1, 3, 2, 2},
                           conv_attrs({2, 2}, {0, 0}, {1, 1}, 3,
                                      requant_attrs(3, 0.05, 0.02, 0.08, -20, 30))));
    check_model("conv 1x1", conv_model({1, 5, 3, 4}, {2, 5, 1, 1}, {1, 2, 3, 4},
                                       conv_attrs({1, 1}, {0, 0}, {1, 1}, 1,
                                                  requant_attrs(2, 0.05, 0.02, 0.08))));
}

void test_linear_and_flatten() {
    ModelBuilder b;
    Rng rng(5);
    const uint32_t x = b.activation("x", {1, 2, 2, 3}, 0.1f, 10);
    const uint32_t flat = b.activation("flat", {1, 12}, 0.1f, 10);
    b.node("flatten", "flatten", {x}, {flat});
    const uint32_t w = b.weight("fc.weight", {5, 12}, qtk_test::random_weights(rng, 60));
    const uint32_t bias = b.bias("fc.bias", {5}, qtk_test::random_bias(rng, 5));
    const uint32_t y = b.activation("y", {1, 5}, 0.2f, -7);
    b.node("linear", "fc", {flat, w, bias}, {y},
           qtk_test::requant_attrs(5, 0.1, 0.02, 0.2, -20, 100));
    b.inputs = {x};
    b.outputs = {y, flat};
    check_model("flatten + linear with clamp", b);
}

void test_elementwise() {
    ModelBuilder b = qtk_test::add_model(0, 127);
    const uint32_t sum = b.outputs[0];
    const uint32_t z = b.activation("z", {1, 3, 4, 4}, 0.25f, 0);
    b.node("clamp", "relu6", {sum}, {z}, {AttrSpec("clamp", {0, 24})});
    b.outputs = {z, sum};
    check_model("add (two graph inputs, different scales) + clamp", b);
}

void test_concat() {
    ModelBuilder b;
    const uint32_t a = b.activation("a", {1, 2, 3, 2}, 0.1f, 5);
    const uint32_t c = b.activation("b", {1, 3, 3, 2}, 0.2f, -4);
    const uint32_t d = b.activation("c", {1, 1, 3, 2}, 0.05f, 0);
    const uint32_t y = b.activation("y", {1, 6, 3, 2}, 0.1f, 5);
    const qtk_test::Requant from_b = qtk_test::quantize_multiplier(2.0);
    const qtk_test::Requant from_c = qtk_test::quantize_multiplier(0.5);
    b.node("concat", "cat1", {a, c, d}, {y},
           {AttrSpec("axis", {1}),
            AttrSpec("multiplier", {1 << 30, from_b.multiplier, from_c.multiplier}),
            AttrSpec("shift", {30, from_b.shift, from_c.shift})});
    const uint32_t e = b.activation("e", {1, 6, 3, 4}, 0.3f, -1);
    const qtk_test::Requant third = qtk_test::quantize_multiplier(1.0 / 3.0);
    b.node("concat", "cat3", {y, y}, {e},
           {AttrSpec("axis", {3}), AttrSpec("multiplier", {third.multiplier, third.multiplier}),
            AttrSpec("shift", {third.shift, third.shift})});
    b.inputs = {a, c, d};
    b.outputs = {e};
    check_model("concat along channels (3 scales) and along width", b);
}

void test_pooling() {
    // H: (7 + 2 - 1*(3-1) - 1) / 2 + 1 = 4; W: (7 + 2 - 2*(2-1) - 1) / 1 + 1 = 7.
    check_model("max_pool2d 3x2 stride 2x1 pad 1 dilation 1x2",
                single_op_model("max_pool2d", {1, 2, 7, 7}, {1, 2, 4, 7},
                                {AttrSpec("kernel", {3, 2}), AttrSpec("stride", {2, 1}),
                                 AttrSpec("padding", {1, 1}), AttrSpec("dilation", {1, 2})}));
    for (int64_t include_pad : {0, 1}) {
        check_model(
            "avg_pool2d 3x3 stride 2 pad 1 count_include_pad " + std::to_string(include_pad),
            single_op_model(
                "avg_pool2d", {1, 3, 6, 5}, {1, 3, 3, 3},
                {AttrSpec("kernel", {3, 3}), AttrSpec("stride", {2, 2}),
                 AttrSpec("padding", {1, 1}), AttrSpec("count_include_pad", {include_pad})}));
    }
    check_model("avg_pool2d 2x2 stride 2",
                single_op_model("avg_pool2d", {1, 2, 4, 4}, {1, 2, 2, 2},
                                {AttrSpec("kernel", {2, 2}), AttrSpec("stride", {2, 2}),
                                 AttrSpec("padding", {0, 0}), AttrSpec("count_include_pad", {1})}));
    check_model("global_avg_pool2d",
                single_op_model("global_avg_pool2d", {1, 4, 3, 5}, {1, 4, 1, 1}, {}));
}

// Hand-checked values, so the naive interpreter is itself pinned down once.
void test_hand_worked() {
    ModelBuilder b =
        single_op_model("avg_pool2d", {1, 1, 2, 2}, {1, 1, 1, 1},
                        {AttrSpec("kernel", {2, 2}), AttrSpec("stride", {1, 1}),
                         AttrSpec("padding", {0, 0}), AttrSpec("count_include_pad", {1})});
    const std::vector<uint8_t> bytes = b.build();
    qtk::Session s(qtk::Model::from_bytes(bytes.data(), bytes.size()));
    // z = -3: (q - z) = 4, 5, 5, 6 -> 20 / 4 = 5 -> -3 + 5 = 2.
    const int8_t x[4] = {1, 2, 2, 3};
    CHECK_EQ(s.run({x}, {{1, 1, 2, 2}})[0].data[0], 2);
    // (q - z) = -125 -125 -125 -124: -499 / 4 = -124.75 -> -125 -> -128.
    const int8_t lows[4] = {-128, -128, -128, -127};
    CHECK_EQ(s.run({lows}, {{1, 1, 2, 2}})[0].data[0], -128);
    // (q - z) = 1, 1, 1, 2 = 5 / 4 = 1.25 -> 1 -> -2; (2, 2, 2, 2): 1.5 -> 2 (away from zero) ->
    // -1.
    const int8_t small[4] = {-2, -2, -2, -1};
    CHECK_EQ(s.run({small}, {{1, 1, 2, 2}})[0].data[0], -2);
    const int8_t ties[4] = {-2, -2, -1, -1};
    CHECK_EQ(s.run({ties}, {{1, 1, 2, 2}})[0].data[0], -1);
}

void test_session_errors() {
    const std::vector<uint8_t> bytes = qtk_test::sample_model().build();
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    qtk::Session s(model);
    const std::vector<int8_t> x(2 * 6 * 6 * 4, 0);
    CHECK_THROWS_WITH(s.run({}, {}), "the model has 1 inputs");
    CHECK_THROWS_WITH(s.run({x.data()}, {{1, 2, 6}}),
                      "input 0 ('x'): expected int8 tensor of shape [N, 2, 6, 6] (any N >= 1), got "
                      "shape [1, 2, 6]");
    CHECK_THROWS_WITH(s.run({x.data()}, {{0, 2, 6, 6}}), "(any N >= 1)");
    CHECK_THROWS_WITH(s.run({x.data()}, {{1, 3, 6, 6}}), "got shape [1, 3, 6, 6]");
    CHECK_THROWS_WITH(s.run({nullptr}, {{1, 2, 6, 6}}), "data pointer is null");
    CHECK_THROWS_WITH(s.run({x.data()}, {{int64_t{1} << 40, 2, 6, 6}}), "is too large");
    CHECK_THROWS_WITH(qtk::Session(model, {0}), "threads");
    // The session still works after refused runs, with its old plan.
    CHECK_EQ(s.batch(), 1);
    CHECK_EQ(s.run({x.data()}, {{4, 2, 6, 6}})[0].shape[0], 4);
    CHECK_EQ(s.batch(), 4);
    std::vector<int8_t> q(3);
    const float xs[3] = {0.05f, -1e9f, 0.1f};
    s.quantize_input(0, xs, 3, q.data());
    CHECK_EQ(q[0], 4);  // 0.05 / 0.05 = 1 (+3)
    CHECK_EQ(q[1], -128);
    CHECK_THROWS_WITH(s.quantize_input(1, xs, 3, q.data()), "input index 1 is out of range");
    float f[1];
    const int8_t one = 2;
    s.dequantize_output(0, &one, 1, f);
    CHECK(f[0] == 0.3f * 3);
    CHECK_THROWS_WITH(s.dequantize_output(2, &one, 1, f), "output index 2 is out of range");

    const std::vector<uint8_t> add_bytes = qtk_test::add_model().build();
    qtk::Session two_inputs(qtk::Model::from_bytes(add_bytes.data(), add_bytes.size()));
    const std::vector<int8_t> y(3 * 4 * 4 * 2, 0);
    CHECK_THROWS_WITH(two_inputs.run({y.data(), y.data()}, {{2, 3, 4, 4}, {1, 3, 4, 4}}),
                      "input 1 ('y'): batch 1 differs from input 0's batch 2");
}

// Every index is visited exactly once, for any split; an exception in a task reaches the caller.
void test_thread_pool() {
    for (int threads : {1, 2, 3, 8}) {
        qtk::detail::ThreadPool pool(threads);
        for (int64_t n : {0, 1, 2, 7, 1000}) {
            for (int round = 0; round < 20; ++round) {
                std::vector<int> visits(static_cast<size_t>(n), 0);
                pool.parallel_for(n, [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) {
                        ++visits[static_cast<size_t>(i)];
                    }
                });
                CHECK(std::all_of(visits.begin(), visits.end(), [](int v) { return v == 1; }));
            }
        }
        CHECK_THROWS_WITH(pool.parallel_for(10,
                                            [](int64_t begin, int64_t) {
                                                if (begin == 0) {
                                                    throw qtk::Error("task failed");
                                                }
                                            }),
                          "task failed");
    }
}

}  // namespace

int main() {
    test_thread_pool();
    test_conv();
    test_linear_and_flatten();
    test_elementwise();
    test_concat();
    test_pooling();
    test_hand_worked();
    check_model("sample model (every op)", qtk_test::sample_model());
    test_session_errors();
    return qtk_test::check_report();
}
