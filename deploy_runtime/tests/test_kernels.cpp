// Each reference kernel, run through Model and Session on small builder models, against a naive
// interpreter of the same records written here (explicitly padded inputs, multi-index loops).
// The interpreter holds every tensor as doubles: int8 values exactly (compared exactly), float32
// values computed in double (compared within 1e-5 * (1 + |expected|)). Also: 1 vs 2 threads give
// identical bytes, batch 3 equals three batch-1 runs, and hand-worked values pin the naive code.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "check.h"
#include "model_builder.h"
#include "qtk/arithmetic.h"
#include "qtk/runtime.h"
#include "thread_pool.h"

using qtk::DType;
using qtk::Shape;
using qtk_test::AttrSpec;
using qtk_test::float_attr;
using qtk_test::ModelBuilder;
using qtk_test::NodeSpec;
using qtk_test::Rng;
using qtk_test::ValueSpec;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Naive {
    Shape shape;
    DType dtype = DType::kInt8;
    std::vector<double> v;  // row-major
};

int64_t count_of(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) {
        n *= d;
    }
    return n;
}

std::vector<int64_t> unflatten(int64_t flat, const Shape& s) {
    std::vector<int64_t> idx(s.size());
    for (size_t d = s.size(); d-- > 0;) {
        idx[d] = flat % s[d];
        flat /= s[d];
    }
    return idx;
}

int64_t flatten_index(const std::vector<int64_t>& idx, const Shape& s) {
    int64_t flat = 0;
    for (size_t d = 0; d < s.size(); ++d) {
        flat = flat * s[d] + idx[d];
    }
    return flat;
}

bool has_attr(const NodeSpec& node, const std::string& key) {
    for (const AttrSpec& a : node.attrs) {
        if (a.key == key) {
            return true;
        }
    }
    return false;
}

const AttrSpec& attr_spec(const NodeSpec& node, const std::string& key) {
    for (const AttrSpec& a : node.attrs) {
        if (a.key == key) {
            return a;
        }
    }
    static const AttrSpec kMissing("", {});
    qtk_test::report_failure(__FILE__, __LINE__, "test model lacks attribute " + key);
    return kMissing;
}

const std::vector<int64_t>& attr(const NodeSpec& node, const std::string& key) {
    return attr_spec(node, key).ints;
}

// A float kernel's optional bounds; unbounded without the attribute.
std::pair<double, double> bounds_of(const NodeSpec& node) {
    if (!has_attr(node, "bounds")) {
        return {-kInf, kInf};
    }
    const std::vector<float>& b = attr_spec(node, "bounds").floats;
    return {b[0], b[1]};
}

double bounded(const NodeSpec& node, double v) {
    const auto b = bounds_of(node);
    return std::min(std::max(v, b.first), b.second);
}

// A constant's values, decoded by dtype from its little-endian bytes.
std::vector<double> constant_values(const ValueSpec& v) {
    std::vector<double> out;
    if (v.dtype == 1) {
        for (uint8_t byte : v.data) {
            out.push_back(static_cast<int8_t>(byte));
        }
        return out;
    }
    for (size_t i = 0; i + 4 <= v.data.size(); i += 4) {
        uint32_t u = 0;
        for (int b = 0; b < 4; ++b) {
            u |= uint32_t{v.data[i + b]} << (8 * b);
        }
        if (v.dtype == 2) {
            out.push_back(static_cast<int32_t>(u));
        } else {
            float f;
            std::memcpy(&f, &u, 4);
            out.push_back(f);
        }
    }
    return out;
}

int32_t i32(int64_t v) { return static_cast<int32_t>(v); }
int8_t q8(double v) { return static_cast<int8_t>(v); }

// [N, C, H, W] -> [N, C, H + 2 ph, W + 2 pw] with `fill` around.
std::vector<double> pad_planes(const Naive& x, int64_t ph, int64_t pw, double fill) {
    const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
    const int64_t hp = h + 2 * ph, wp = w + 2 * pw;
    std::vector<double> out(n * c * hp * wp, fill);
    for (int64_t p = 0; p < n * c; ++p) {
        for (int64_t y = 0; y < h; ++y) {
            for (int64_t xx = 0; xx < w; ++xx) {
                out[(p * hp + y + ph) * wp + xx + pw] = x.v[(p * h + y) * w + xx];
            }
        }
    }
    return out;
}

// Conv and linear: int8 requantizes the exact sum per channel (spec 4); float32 applies bounds.
double finish_accumulator(const NodeSpec& node, const ValueSpec& y, double acc, int64_t channel) {
    if (y.dtype == 3) {
        return static_cast<float>(bounded(node, acc));
    }
    const auto& clamp = attr(node, "clamp");
    return qtk::arith::requantize(static_cast<int32_t>(acc), i32(attr(node, "multiplier")[channel]),
                                  i32(attr(node, "shift")[channel]), y.zero_point, i32(clamp[0]),
                                  i32(clamp[1]));
}

Naive naive_conv(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const ValueSpec& xv = b.values[node.inputs[0]];
    const ValueSpec& wv = b.values[node.inputs[1]];
    const ValueSpec& yv = b.values[node.outputs[0]];
    const std::vector<double> weight = constant_values(wv);
    const std::vector<double> bias = constant_values(b.values[node.inputs[2]]);
    const auto& stride = attr(node, "stride");
    const auto& pad = attr(node, "padding");
    const auto& dil = attr(node, "dilation");
    const int64_t groups = attr(node, "groups")[0];
    const int64_t n = x.shape[0], h = x.shape[2], w = x.shape[3];
    const int64_t o = wv.dims[0], cg = wv.dims[1], kh = wv.dims[2], kw = wv.dims[3];
    const int64_t hp = h + 2 * pad[0], wp = w + 2 * pad[1];
    const int64_t ho = (hp - dil[0] * (kh - 1) - 1) / stride[0] + 1;
    const int64_t wo = (wp - dil[1] * (kw - 1) - 1) / stride[1] + 1;
    // Padding holds the real value 0: z_x for int8, 0 for float32 (whose zero point is 0).
    const std::vector<double> padded = pad_planes(x, pad[0], pad[1], xv.zero_point);
    Naive y{{n, o, ho, wo}, x.dtype, std::vector<double>(n * o * ho * wo)};
    for (int64_t s = 0; s < n; ++s) {
        for (int64_t oc = 0; oc < o; ++oc) {
            for (int64_t oy = 0; oy < ho; ++oy) {
                for (int64_t ox = 0; ox < wo; ++ox) {
                    const int64_t g = oc / (o / groups);
                    double acc = bias[oc];
                    for (int64_t ic = 0; ic < cg; ++ic) {
                        for (int64_t ky = 0; ky < kh; ++ky) {
                            for (int64_t kx = 0; kx < kw; ++kx) {
                                const int64_t c = g * cg + ic;
                                const double xq = padded[((s * x.shape[1] + c) * hp +
                                                          oy * stride[0] + ky * dil[0]) *
                                                             wp +
                                                         ox * stride[1] + kx * dil[1]];
                                acc += (xq - xv.zero_point) *
                                       weight[((oc * cg + ic) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    y.v[((s * o + oc) * ho + oy) * wo + ox] = finish_accumulator(node, yv, acc, oc);
                }
            }
        }
    }
    return y;
}

// Scatters each input value's taps (the definition), where the kernel gathers per output: spec 20.
Naive naive_conv_transpose(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const ValueSpec& xv = b.values[node.inputs[0]];
    const ValueSpec& wv = b.values[node.inputs[1]];
    const ValueSpec& yv = b.values[node.outputs[0]];
    const std::vector<double> weight = constant_values(wv);
    const std::vector<double> bias = constant_values(b.values[node.inputs[2]]);
    const auto& stride = attr(node, "stride");
    const auto& pad = attr(node, "padding");
    const auto& out_pad = attr(node, "output_padding");
    const auto& dil = attr(node, "dilation");
    const int64_t groups = attr(node, "groups")[0];
    const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
    const int64_t o = wv.dims[0], cg = wv.dims[1], kh = wv.dims[2], kw = wv.dims[3];
    const int64_t ho = (h - 1) * stride[0] - 2 * pad[0] + dil[0] * (kh - 1) + out_pad[0] + 1;
    const int64_t wo = (w - 1) * stride[1] - 2 * pad[1] + dil[1] * (kw - 1) + out_pad[1] + 1;
    std::vector<double> acc(n * o * ho * wo);
    for (int64_t s = 0; s < n; ++s) {
        for (int64_t ic = 0; ic < c; ++ic) {
            const int64_t g = ic / cg;
            for (int64_t iy = 0; iy < h; ++iy) {
                for (int64_t ix = 0; ix < w; ++ix) {
                    const double xq = x.v[((s * c + ic) * h + iy) * w + ix] - xv.zero_point;
                    for (int64_t oo = 0; oo < o / groups; ++oo) {
                        const int64_t oc = g * (o / groups) + oo;
                        for (int64_t ky = 0; ky < kh; ++ky) {
                            for (int64_t kx = 0; kx < kw; ++kx) {
                                const int64_t oy = iy * stride[0] - pad[0] + ky * dil[0];
                                const int64_t ox = ix * stride[1] - pad[1] + kx * dil[1];
                                if (oy < 0 || oy >= ho || ox < 0 || ox >= wo) {
                                    continue;  // cropped by the padding
                                }
                                acc[((s * o + oc) * ho + oy) * wo + ox] +=
                                    xq * weight[((oc * cg + ic - g * cg) * kh + ky) * kw + kx];
                            }
                        }
                    }
                }
            }
        }
    }
    Naive y{{n, o, ho, wo}, x.dtype, std::vector<double>(acc.size())};
    for (size_t i = 0; i < acc.size(); ++i) {
        const int64_t oc = static_cast<int64_t>(i) / (ho * wo) % o;
        y.v[i] = finish_accumulator(node, yv, bias[oc] + acc[i], oc);
    }
    return y;
}

Naive naive_linear(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const ValueSpec& wv = b.values[node.inputs[1]];
    const std::vector<double> weight = constant_values(wv);
    const std::vector<double> bias = constant_values(b.values[node.inputs[2]]);
    const int32_t zx = b.values[node.inputs[0]].zero_point;
    // x [..., K]: every leading dimension is rows.
    const int64_t k = x.shape.back(), n = count_of(x.shape) / k, o = wv.dims[0];
    Shape out = x.shape;
    out.back() = o;
    Naive y{out, x.dtype, std::vector<double>(n * o)};
    for (int64_t s = 0; s < n; ++s) {
        for (int64_t j = 0; j < o; ++j) {
            double acc = bias[j];
            for (int64_t i = 0; i < k; ++i) {
                acc += (x.v[s * k + i] - zx) * weight[j * k + i];
            }
            y.v[s * o + j] = finish_accumulator(node, b.values[node.outputs[0]], acc, j);
        }
    }
    return y;
}

// Torch's broadcasting for equal ranks: calls fn(i, ia, ib) for every output element.
Naive naive_broadcast(const Naive& a, const Naive& c,
                      const std::function<double(int64_t, int64_t)>& fn) {
    Shape out(a.shape.size());
    for (size_t d = 0; d < out.size(); ++d) {
        out[d] = std::max(a.shape[d], c.shape[d]);
    }
    Naive y{out, a.dtype, std::vector<double>(count_of(out))};
    for (int64_t i = 0; i < count_of(out); ++i) {
        const std::vector<int64_t> idx = unflatten(i, out);
        std::vector<int64_t> ia = idx, ib = idx;
        for (size_t d = 0; d < out.size(); ++d) {
            ia[d] = a.shape[d] == 1 ? 0 : idx[d];
            ib[d] = c.shape[d] == 1 ? 0 : idx[d];
        }
        y.v[i] = fn(flatten_index(ia, a.shape), flatten_index(ib, c.shape));
    }
    return y;
}

// add, sub, mul and div in float32: the exact result rounded to float, then the bounds.
Naive naive_float_binary(const NodeSpec& node, const Naive& a, const Naive& c) {
    const std::map<std::string, std::function<double(double, double)>> ops = {
        {"add", [](double p, double q) { return p + q; }},
        {"sub", [](double p, double q) { return p - q; }},
        {"mul", [](double p, double q) { return p * q; }},
        {"div", [](double p, double q) { return p / q; }},
    };
    const auto& f = ops.at(node.op);
    return naive_broadcast(a, c, [&](int64_t ia, int64_t ib) {
        return static_cast<float>(bounded(node, f(a.v[ia], c.v[ib])));
    });
}

Naive naive_add(const ModelBuilder& b, const NodeSpec& node, const Naive& a, const Naive& c) {
    const auto& mult = attr(node, "multiplier");
    const auto& clamp = attr(node, "clamp");
    const int32_t za = b.values[node.inputs[0]].zero_point,
                  zb = b.values[node.inputs[1]].zero_point;
    Naive y{a.shape, a.dtype, std::vector<double>(a.v.size())};
    for (size_t i = 0; i < a.v.size(); ++i) {
        const int64_t sum = static_cast<int64_t>(a.v[i] - za) * mult[0] +
                            static_cast<int64_t>(c.v[i] - zb) * mult[1];
        y.v[i] = qtk::arith::finish_rescaled_sum(sum, i32(attr(node, "shift")[0]),
                                                 b.values[node.outputs[0]].zero_point,
                                                 i32(clamp[0]), i32(clamp[1]));
    }
    return y;
}

Naive naive_mul(const ModelBuilder& b, const NodeSpec& node, const Naive& a, const Naive& c) {
    const int32_t za = b.values[node.inputs[0]].zero_point,
                  zb = b.values[node.inputs[1]].zero_point;
    const auto& clamp = attr(node, "clamp");
    return naive_broadcast(a, c, [&](int64_t ia, int64_t ib) {
        const double product = (a.v[ia] - za) * (c.v[ib] - zb);
        return qtk::arith::requantize(static_cast<int32_t>(product),
                                      i32(attr(node, "multiplier")[0]), i32(attr(node, "shift")[0]),
                                      b.values[node.outputs[0]].zero_point, i32(clamp[0]),
                                      i32(clamp[1]));
    });
}

// Spec 21 from its definition: requantize(+-(q - z) 2^k + B_e) or requantize((q - z) M_e), each
// rounding written out in int64 (M_e signed).
int64_t naive_requantize(int64_t acc, int64_t multiplier, int64_t shift, int64_t zero_point,
                         int64_t lo, int64_t hi) {
    const int64_t scaled = (acc * multiplier + (int64_t{1} << (shift - 1))) >> shift;
    return std::min(std::max(scaled + zero_point, lo), hi);
}

Naive naive_constant_arithmetic(const ModelBuilder& b, const NodeSpec& node,
                                const std::vector<Naive>& in) {
    const int64_t zx = b.values[node.inputs[0]].zero_point;
    const int64_t zy = b.values[node.outputs[0]].zero_point;
    const auto& clamp = attr(node, "clamp");
    const Naive& x = in[0];
    if (node.op == "mul_constant") {
        return naive_broadcast(x, in[1], [&](int64_t ix, int64_t ic) {
            return static_cast<double>(naive_requantize(
                static_cast<int64_t>(x.v[ix]) - zx, static_cast<int64_t>(in[1].v[ic]),
                static_cast<int64_t>(in[2].v[ic]), zy, clamp[0], clamp[1]));
        });
    }
    const int64_t k = attr(node, "input_shift")[0];
    const bool negate = attr(node, "negate")[0] == 1;
    return naive_broadcast(x, in[1], [&](int64_t ix, int64_t ic) {
        const int64_t d = static_cast<int64_t>(x.v[ix]) - zx;
        const int64_t acc = (negate ? -d : d) * (int64_t{1} << k) + static_cast<int64_t>(in[1].v[ic]);
        return static_cast<double>(naive_requantize(acc, attr(node, "multiplier")[0],
                                                    attr(node, "shift")[0], zy, clamp[0],
                                                    clamp[1]));
    });
}

// Elementwise y = f(x) with the output's dtype.
Naive naive_map(const Naive& x, DType dtype, const std::function<double(double)>& f) {
    Naive y{x.shape, dtype, {}};
    for (double v : x.v) {
        y.v.push_back(f(v));
    }
    return y;
}

Naive naive_unary(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const ValueSpec& xv = b.values[node.inputs[0]];
    const ValueSpec& yv = b.values[node.outputs[0]];
    const std::string& op = node.op;
    if (op == "clamp" && x.dtype == DType::kInt8) {
        const auto& clamp = attr(node, "clamp");
        return naive_map(x, x.dtype, [&](double v) {
            return std::min<double>(std::max<double>(v, clamp[0]), clamp[1]);
        });
    }
    if (op == "lut") {
        const std::vector<double> table = constant_values(b.values[node.inputs[1]]);
        return naive_map(x, x.dtype, [&](double v) { return table[static_cast<size_t>(v + 128)]; });
    }
    if (op == "quantize") {
        const float inv_scale = qtk::arith::inverse_scale(yv.scale);
        return naive_map(x, DType::kInt8, [&](double v) {
            return qtk::arith::quantize(static_cast<float>(v), inv_scale, yv.zero_point);
        });
    }
    if (op == "dequantize") {
        return naive_map(x, DType::kFloat32, [&](double v) {
            return (v - xv.zero_point) * static_cast<double>(xv.scale);
        });
    }
    // torch's float definitions
    const std::map<std::string, std::function<double(double)>> functions = {
        {"clamp", [&](double v) { return bounded(node, v); }},
        {"hardswish", [](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; }},
        {"hardsigmoid", [](double v) { return std::min(std::max(v + 3, 0.0), 6.0) / 6; }},
        {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
        {"leaky_relu",
         [&](double v) { return v > 0 ? v : v * attr_spec(node, "alpha").floats[0]; }},
        {"elu",
         [&](double v) { return v > 0 ? v : std::expm1(v) * attr_spec(node, "alpha").floats[0]; }},
        {"softplus",
         [&](double v) {
             const double beta = attr_spec(node, "beta").floats[0];
             return v * beta > attr_spec(node, "threshold").floats[0]
                        ? v
                        : std::log1p(std::exp(v * beta)) / beta;
         }},
    };
    const auto& f = functions.at(op);
    return naive_map(x, x.dtype, [&](double v) { return static_cast<float>(f(v)); });
}

// Walks every input element by multi-index and drops it at its place in the output.
Naive naive_concat(const ModelBuilder& b, const NodeSpec& node, const std::vector<Naive>& in) {
    const size_t axis = static_cast<size_t>(attr(node, "axis")[0]);
    Naive y{in[0].shape, in[0].dtype, {}};
    y.shape[axis] = 0;
    for (const Naive& t : in) {
        y.shape[axis] += t.shape[axis];
    }
    y.v.resize(count_of(y.shape));
    int64_t axis_offset = 0;
    for (size_t k = 0; k < in.size(); ++k) {
        const Shape& s = in[k].shape;
        for (int64_t flat = 0; flat < count_of(s); ++flat) {
            std::vector<int64_t> idx = unflatten(flat, s);
            idx[axis] += axis_offset;
            const double v = in[k].v[flat];
            y.v[flatten_index(idx, y.shape)] =
                y.dtype == DType::kFloat32
                    ? v
                    : qtk::arith::rescale(q8(v), b.values[node.inputs[k]].zero_point,
                                          i32(attr(node, "multiplier")[k]),
                                          i32(attr(node, "shift")[k]),
                                          b.values[node.outputs[0]].zero_point);
        }
        axis_offset += s[axis];
    }
    return y;
}

// Max and average pooling over an explicitly padded input; a sentinel marks padding. Ceil mode:
// torch's output size, and window elements past the padded input are skipped (an average with
// count_include_pad divides by the elements left: the window clipped to the padded input).
Naive naive_pool(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const bool is_max = node.op == "max_pool2d";
    const bool global = node.op == "global_avg_pool2d";
    const bool is_float = x.dtype == DType::kFloat32;
    const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
    const std::vector<int64_t> kernel = global ? std::vector<int64_t>{h, w} : attr(node, "kernel");
    const std::vector<int64_t> stride = global ? std::vector<int64_t>{1, 1} : attr(node, "stride");
    const std::vector<int64_t> pad = global ? std::vector<int64_t>{0, 0} : attr(node, "padding");
    const std::vector<int64_t> dil = is_max ? attr(node, "dilation") : std::vector<int64_t>{1, 1};
    const bool include_pad = node.op == "avg_pool2d" && attr(node, "count_include_pad")[0] == 1;
    const int32_t z = b.values[node.inputs[0]].zero_point;
    constexpr double kPad = 1000;  // no test value comes near it
    const std::vector<double> padded = pad_planes(x, pad[0], pad[1], kPad);
    const int64_t hp = h + 2 * pad[0], wp = w + 2 * pad[1];
    const bool ceil = !global && has_attr(node, "ceil_mode") && attr(node, "ceil_mode")[0] == 1;
    const int64_t divisor_override =
        has_attr(node, "divisor_override") ? attr(node, "divisor_override")[0] : 0;
    const auto out_size = [&](int64_t padded, int d) {
        const int64_t span = padded - dil[d] * (kernel[d] - 1) - 1 + (ceil ? stride[d] - 1 : 0);
        int64_t out = span / stride[d] + 1;  // span >= 0 in every test
        if (ceil && (out - 1) * stride[d] >= padded - pad[d]) {
            --out;
        }
        return out;
    };
    const int64_t ho = out_size(hp, 0), wo = out_size(wp, 1);
    Naive y{{n, c, ho, wo}, x.dtype, std::vector<double>(n * c * ho * wo)};
    for (int64_t p = 0; p < n * c; ++p) {
        for (int64_t oy = 0; oy < ho; ++oy) {
            for (int64_t ox = 0; ox < wo; ++ox) {
                double best = is_float ? -kInf : -128;
                double sum = 0;  // of (q - z) for int8: exact
                int64_t count = 0, in_padded = 0;  // in-bounds, and within the padded input
                for (int64_t ky = 0; ky < kernel[0]; ++ky) {
                    for (int64_t kx = 0; kx < kernel[1]; ++kx) {
                        const int64_t py = oy * stride[0] + ky * dil[0];
                        const int64_t px = ox * stride[1] + kx * dil[1];
                        if (py >= hp || px >= wp) {  // past the padding (ceil mode)
                            continue;
                        }
                        ++in_padded;
                        const double v = padded[(p * hp + py) * wp + px];
                        if (v == kPad) {
                            continue;
                        }
                        best = std::max(best, v);
                        sum += v - z;
                        ++count;
                    }
                }
                const int64_t divisor = divisor_override != 0 ? divisor_override
                                        : include_pad          ? in_padded
                                                               : count;
                const double average =
                    is_float ? static_cast<float>(sum / static_cast<double>(divisor))
                             : qtk::arith::average(static_cast<int64_t>(sum), divisor, z);
                y.v[(p * ho + oy) * wo + ox] = is_max ? best : average;
            }
        }
    }
    if (global && has_attr(node, "keepdim") && attr(node, "keepdim")[0] == 0) {
        y.shape = {n, c};
    }
    return y;
}

// prelu (spec 22): in double, d M 2^-n rounded half up (exact: |d M| < 2^39), the multiplier of
// the input's side and channel; float32: x > 0 ? x : a_c x with the slopes operand.
Naive naive_prelu(const ModelBuilder& b, const NodeSpec& node, const std::vector<Naive>& in) {
    const Naive& x = in[0];
    Naive y{x.shape, x.dtype, std::vector<double>(x.v.size())};
    for (size_t i = 0; i < x.v.size(); ++i) {
        const std::vector<int64_t> idx = unflatten(static_cast<int64_t>(i), x.shape);
        if (x.dtype == DType::kFloat32) {
            const std::vector<double>& slopes = in[1].v;
            const double a = slopes.size() == 1 ? slopes[0] : slopes[idx[1]];
            y.v[i] = x.v[i] > 0 ? x.v[i] : static_cast<float>(static_cast<float>(a) * x.v[i]);
            continue;
        }
        const double d = x.v[i] - b.values[node.inputs[0]].zero_point;
        const std::vector<int64_t>& ms = attr(node, "multiplier");
        const size_t c = ms.size() == 1 ? 0 : static_cast<size_t>(idx[1]);
        const double m = d >= 0 ? double(attr(node, "positive_multiplier")[0]) : double(ms[c]);
        const double n = d >= 0 ? double(attr(node, "positive_shift")[0])
                                : double(attr(node, "shift")[c]);
        const double v = std::floor(d * m / std::pow(2.0, n) + 0.5) +
                         b.values[node.outputs[0]].zero_point;
        const std::vector<int64_t>& clamp = attr(node, "clamp");
        y.v[i] = std::min<double>(std::max<double>(v, clamp[0]), clamp[1]);
    }
    return y;
}

// Output element i takes x.v[source[i]], or `fill` where source[i] < 0.
Naive gather(const Naive& x, const Shape& shape, const std::vector<int64_t>& source,
             double fill = 0) {
    Naive y{shape, x.dtype, {}};
    for (int64_t s : source) {
        y.v.push_back(s < 0 ? fill : x.v[s]);
    }
    return y;
}

Naive naive_reshape(const NodeSpec& node, const Naive& x) {
    Shape shape = {x.shape[0]};
    if (node.op == "flatten") {
        shape.push_back(count_of(x.shape) / x.shape[0]);
    } else {
        const auto& dims = attr(node, "shape");
        int64_t known = 1;
        for (int64_t d : dims) {
            known *= d == -1 ? 1 : d;
        }
        for (int64_t d : dims) {
            shape.push_back(d == -1 ? count_of(x.shape) / x.shape[0] / known : d);
        }
    }
    return Naive{shape, x.dtype, x.v};
}

Naive naive_permute(const NodeSpec& node, const Naive& x) {
    const auto& perm = attr(node, "perm");
    Shape shape;
    for (int64_t p : perm) {
        shape.push_back(x.shape[p]);
    }
    std::vector<int64_t> source;
    for (int64_t i = 0; i < count_of(shape); ++i) {
        const std::vector<int64_t> out = unflatten(i, shape);
        std::vector<int64_t> in(out.size());
        for (size_t k = 0; k < perm.size(); ++k) {
            in[perm[k]] = out[k];
        }
        source.push_back(flatten_index(in, x.shape));
    }
    return gather(x, shape, source);
}

std::vector<Naive> naive_split(const NodeSpec& node, const Naive& x) {
    const size_t axis = static_cast<size_t>(attr(node, "axis")[0]);
    std::vector<Naive> out;
    int64_t start = 0;
    for (int64_t size : attr(node, "sizes")) {
        Shape shape = x.shape;
        shape[axis] = size;
        std::vector<int64_t> source;
        for (int64_t i = 0; i < count_of(shape); ++i) {
            std::vector<int64_t> idx = unflatten(i, shape);
            idx[axis] += start;
            source.push_back(flatten_index(idx, x.shape));
        }
        out.push_back(gather(x, shape, source));
        start += size;
    }
    return out;
}

// Where index i of an axis of size n reads in reflect (1) or replicate (2) padding: torch's
// reflection as a walk back from the edge, or the edge.
int64_t naive_pad_source(int64_t i, int64_t n, int64_t mode) {
    if (mode == 2) {
        return std::min(std::max<int64_t>(i, 0), n - 1);
    }
    while (i < 0 || i >= n) {
        i = i < 0 ? -i : 2 * (n - 1) - i;
    }
    return i;
}

Naive naive_pad(const NodeSpec& node, const Naive& x) {
    const auto& pads = attr(node, "pads");  // left, right, top, bottom
    const int64_t mode = has_attr(node, "mode") ? attr(node, "mode")[0] : 0;
    if (mode != 0) {
        const Shape shape = {x.shape[0], x.shape[1], x.shape[2] + pads[2] + pads[3],
                             x.shape[3] + pads[0] + pads[1]};
        std::vector<int64_t> source;
        for (int64_t i = 0; i < count_of(shape); ++i) {
            std::vector<int64_t> idx = unflatten(i, shape);
            idx[2] = naive_pad_source(idx[2] - pads[2], x.shape[2], mode);
            idx[3] = naive_pad_source(idx[3] - pads[0], x.shape[3], mode);
            source.push_back(flatten_index(idx, x.shape));
        }
        return gather(x, shape, source);
    }
    const AttrSpec& value = attr_spec(node, "value");
    const double fill = value.kind == 2 ? value.floats[0] : static_cast<double>(value.ints[0]);
    const Shape shape = {x.shape[0], x.shape[1], x.shape[2] + pads[2] + pads[3],
                         x.shape[3] + pads[0] + pads[1]};
    std::vector<int64_t> source;
    for (int64_t i = 0; i < count_of(shape); ++i) {
        std::vector<int64_t> idx = unflatten(i, shape);
        idx[2] -= pads[2];
        idx[3] -= pads[0];
        const bool inside =
            idx[2] >= 0 && idx[2] < x.shape[2] && idx[3] >= 0 && idx[3] < x.shape[3];
        source.push_back(inside ? flatten_index(idx, x.shape) : -1);
    }
    return gather(x, shape, source, fill);
}

Naive naive_resize_nearest(const NodeSpec& node, const Naive& x) {
    const auto& rows = attr(node, "index_h");
    const auto& cols = attr(node, "index_w");
    const Shape shape = {x.shape[0], x.shape[1], static_cast<int64_t>(rows.size()),
                         static_cast<int64_t>(cols.size())};
    std::vector<int64_t> source;
    for (int64_t i = 0; i < count_of(shape); ++i) {
        std::vector<int64_t> idx = unflatten(i, shape);
        idx[2] = rows[idx[2]];
        idx[3] = cols[idx[3]];
        source.push_back(flatten_index(idx, x.shape));
    }
    return gather(x, shape, source);
}

// float32: the four neighbours weighted by the fractions, in double.
Naive naive_resize_bilinear_float(const NodeSpec& node, const Naive& x) {
    const auto &h0 = attr(node, "h0"), &h1 = attr(node, "h1"), &w0 = attr(node, "w0"),
               &w1 = attr(node, "w1");
    const std::vector<float>&hw = attr_spec(node, "h_weight").floats,
                       &ww = attr_spec(node, "w_weight").floats;
    const Shape shape = {x.shape[0], x.shape[1], static_cast<int64_t>(h0.size()),
                         static_cast<int64_t>(w0.size())};
    Naive y{shape, x.dtype, {}};
    for (int64_t i = 0; i < count_of(shape); ++i) {
        const std::vector<int64_t> idx = unflatten(i, shape);
        const int64_t oy = idx[2], ox = idx[3];
        const int64_t rows[2] = {h0[oy], h1[oy]}, cols[2] = {w0[ox], w1[ox]};
        const double wy[2] = {1.0 - hw[oy], hw[oy]}, wx[2] = {1.0 - ww[ox], ww[ox]};
        double acc = 0;
        for (int a = 0; a < 2; ++a) {
            for (int c = 0; c < 2; ++c) {
                acc += wy[a] * wx[c] * x.v[flatten_index({idx[0], idx[1], rows[a], cols[c]},
                                                         x.shape)];
            }
        }
        y.v.push_back(static_cast<float>(acc));
    }
    return y;
}

// Spec 12: the four Q10-weighted neighbours, summed exactly, requantized once.
Naive naive_resize_bilinear(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    if (x.dtype == DType::kFloat32) {
        return naive_resize_bilinear_float(node, x);
    }
    const auto &h0 = attr(node, "h0"), &h1 = attr(node, "h1"), &hw = attr(node, "h_weight");
    const auto &w0 = attr(node, "w0"), &w1 = attr(node, "w1"), &ww = attr(node, "w_weight");
    const int32_t zx = b.values[node.inputs[0]].zero_point;
    const Shape shape = {x.shape[0], x.shape[1], static_cast<int64_t>(h0.size()),
                         static_cast<int64_t>(w0.size())};
    Naive y{shape, x.dtype, {}};
    for (int64_t i = 0; i < count_of(shape); ++i) {
        const std::vector<int64_t> idx = unflatten(i, shape);
        const int64_t oy = idx[2], ox = idx[3];
        const int64_t rows[2] = {h0[oy], h1[oy]}, cols[2] = {w0[ox], w1[ox]};
        const int64_t wy[2] = {1024 - hw[oy], hw[oy]}, wx[2] = {1024 - ww[ox], ww[ox]};
        int64_t acc = 0;
        for (int a = 0; a < 2; ++a) {
            for (int c = 0; c < 2; ++c) {
                const int64_t q = static_cast<int64_t>(
                    x.v[flatten_index({idx[0], idx[1], rows[a], cols[c]}, x.shape)]);
                acc += wy[a] * wx[c] * (q - zx);
            }
        }
        y.v.push_back(qtk::arith::requantize(
            static_cast<int32_t>(acc), i32(attr(node, "multiplier")[0]),
            i32(attr(node, "shift")[0]), b.values[node.outputs[0]].zero_point, -128, 127));
    }
    return y;
}

// torch.matmul: the batch dims right-aligned, a dim of 1 (or a missing one) repeated; with
// transpose_b, c is read as [..., P, K]. float32 in double; int8 (spec 17) summed in int64, then
// requantized once.
Naive naive_matmul(const ModelBuilder& b, const NodeSpec& node, const Naive& a, const Naive& c) {
    const bool transpose_b = has_attr(node, "transpose_b") && attr(node, "transpose_b")[0] == 1;
    const size_t rank = std::max(a.shape.size(), c.shape.size());
    const size_t c_row = transpose_b ? rank - 1 : rank - 2;
    const size_t c_col = transpose_b ? rank - 2 : rank - 1;
    // Both padded on the left with 1s to `rank` dims.
    Shape as(rank - a.shape.size(), 1), cs(rank - c.shape.size(), 1);
    as.insert(as.end(), a.shape.begin(), a.shape.end());
    cs.insert(cs.end(), c.shape.begin(), c.shape.end());
    const int64_t k = as[rank - 1];
    Shape out(rank);
    for (size_t d = 0; d + 2 < rank; ++d) {
        out[d] = std::max(as[d], cs[d]);
    }
    out[rank - 2] = as[rank - 2];
    out[rank - 1] = cs[c_col];
    const double za = a.dtype == DType::kInt8 ? b.values[node.inputs[0]].zero_point : 0;
    const double zc = a.dtype == DType::kInt8 ? b.values[node.inputs[1]].zero_point : 0;
    Naive y{out, a.dtype, {}};
    for (int64_t i = 0; i < count_of(out); ++i) {
        const std::vector<int64_t> idx = unflatten(i, out);
        std::vector<int64_t> ia(rank), ic(rank);
        for (size_t d = 0; d + 2 < rank; ++d) {
            ia[d] = as[d] == 1 ? 0 : idx[d];
            ic[d] = cs[d] == 1 ? 0 : idx[d];
        }
        double acc = 0;  // int8: integers below 2^31, exact in double
        for (int64_t j = 0; j < k; ++j) {
            ia[rank - 2] = idx[rank - 2];
            ia[rank - 1] = j;
            ic[c_row] = j;
            ic[c_col] = idx[rank - 1];
            acc += (a.v[flatten_index(ia, as)] - za) * (c.v[flatten_index(ic, cs)] - zc);
        }
        if (a.dtype == DType::kFloat32) {
            y.v.push_back(static_cast<float>(acc));
            continue;
        }
        const auto& clamp = attr(node, "clamp");
        y.v.push_back(qtk::arith::requantize(
            static_cast<int32_t>(acc), i32(attr(node, "multiplier")[0]),
            i32(attr(node, "shift")[0]), b.values[node.outputs[0]].zero_point, i32(clamp[0]),
            i32(clamp[1])));
    }
    return y;
}

// torch.nn.functional.layer_norm over the last `axes` dims, in double.
Naive naive_layer_norm(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const std::vector<double> w = constant_values(b.values[node.inputs[1]]);
    const std::vector<double> bias = constant_values(b.values[node.inputs[2]]);
    const double eps = attr_spec(node, "eps").floats[0];
    const int64_t group = static_cast<int64_t>(w.size());
    Naive y{x.shape, x.dtype, x.v};
    for (int64_t start = 0; start < count_of(x.shape); start += group) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < group; ++i) {
            mean += x.v[start + i] / group;
        }
        for (int64_t i = 0; i < group; ++i) {
            var += (x.v[start + i] - mean) * (x.v[start + i] - mean) / group;
        }
        for (int64_t i = 0; i < group; ++i) {
            y.v[start + i] = static_cast<float>((x.v[start + i] - mean) / std::sqrt(var + eps) *
                                                    w[i] + bias[i]);
        }
    }
    return y;
}

// softmax along `axis` by multi-index, in double.
Naive naive_softmax(const NodeSpec& node, const Naive& x) {
    const size_t axis = static_cast<size_t>(attr(node, "axis")[0]);
    Naive y{x.shape, x.dtype, x.v};
    for (int64_t i = 0; i < count_of(x.shape); ++i) {
        std::vector<int64_t> idx = unflatten(i, x.shape);
        const int64_t own = idx[axis];
        double sum = 0;
        for (idx[axis] = 0; idx[axis] < x.shape[axis]; ++idx[axis]) {
            sum += std::exp(x.v[flatten_index(idx, x.shape)]);
        }
        idx[axis] = own;
        y.v[i] = static_cast<float>(std::exp(x.v[i]) / sum);
    }
    return y;
}

// Spec 18 by multi-index: each value against its lane along `axis` (T from the node's table).
Naive naive_softmax_int8(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const size_t axis = static_cast<size_t>(attr(node, "axis")[0]);
    const std::vector<double> table = constant_values(b.values[node.inputs[1]]);
    const int64_t a = attr(node, "multiplier")[0];
    const auto& clamp = attr(node, "clamp");
    const int64_t z = b.values[node.outputs[0]].zero_point;
    Naive y{x.shape, x.dtype, x.v};
    for (int64_t i = 0; i < count_of(x.shape); ++i) {
        std::vector<int64_t> idx = unflatten(i, x.shape);
        double max = -128;
        for (idx[axis] = 0; idx[axis] < x.shape[axis]; ++idx[axis]) {
            max = std::max(max, x.v[flatten_index(idx, x.shape)]);
        }
        int64_t sum = 0;
        for (idx[axis] = 0; idx[axis] < x.shape[axis]; ++idx[axis]) {
            sum += static_cast<int64_t>(table[static_cast<size_t>(
                max - x.v[flatten_index(idx, x.shape)])]);
        }
        const int64_t term = static_cast<int64_t>(table[static_cast<size_t>(max - x.v[i])]);
        const int64_t q = (2 * term * a + sum * 65536) / (sum * 131072);
        y.v[i] = static_cast<double>(std::min(std::max(z + q, clamp[0]), clamp[1]));
    }
    return y;
}

// floor(sqrt(v)) for 0 <= v < 2^62: a float guess, corrected.
int64_t naive_isqrt(int64_t v) {
    int64_t r = static_cast<int64_t>(std::sqrt(static_cast<long double>(v)));
    while (r * r > v) {
        --r;
    }
    while ((r + 1) * (r + 1) <= v) {
        ++r;
    }
    return r;
}

// Spec 19 by multi-index: each value's row (layer_norm: its sample's last `axes` dims; group_norm:
// its sample and group) and channel (its place in the row; its dim 1), the statistics summed per
// row, then t, the affine part and spec 2's requantize.
Naive naive_norm_int8(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const bool grouped = node.op == "group_norm";
    const std::vector<double> weight = constant_values(b.values[node.inputs[1]]);
    const std::vector<double> bias = constant_values(b.values[node.inputs[2]]);
    const int64_t zx = b.values[node.inputs[0]].zero_point;
    const int64_t zy = b.values[node.outputs[0]].zero_point;
    const int64_t eps_term = attr(node, "eps_term")[0];
    const auto& clamp = attr(node, "clamp");
    const int64_t total = count_of(x.shape);
    std::vector<int64_t> row(static_cast<size_t>(total)), channel(row.size());
    for (int64_t i = 0; i < total; ++i) {
        const std::vector<int64_t> idx = unflatten(i, x.shape);
        if (grouped) {
            const int64_t per_group = x.shape[1] / attr(node, "groups")[0];
            row[i] = idx[0] * x.shape[1] + idx[1] / per_group;
            channel[i] = idx[1];
        } else {
            const int64_t axes = attr(node, "axes")[0];
            int64_t count = 1;
            for (size_t d = x.shape.size() - static_cast<size_t>(axes); d < x.shape.size(); ++d) {
                count *= x.shape[d];
            }
            row[i] = i / count;
            channel[i] = i % count;
        }
    }
    std::map<int64_t, std::array<int64_t, 3>> stats;  // row -> count, sum, sum of squares
    for (int64_t i = 0; i < total; ++i) {
        const int64_t v = static_cast<int64_t>(x.v[i]) - zx;
        std::array<int64_t, 3>& s = stats[row[i]];
        s[0] += 1;
        s[1] += v;
        s[2] += v * v;
    }
    Naive y{x.shape, x.dtype, x.v};
    for (int64_t i = 0; i < total; ++i) {
        const std::array<int64_t, 3>& s = stats[row[i]];
        const int64_t variance = s[0] * s[2] - s[1] * s[1] + eps_term;
        int bits = 0;
        while (bits < 63 && (int64_t{1} << bits) <= variance) {
            ++bits;
        }
        const int k = (62 - bits) / 2;
        const int64_t r = naive_isqrt(variance << (2 * k));
        const int64_t n = s[0] * (static_cast<int64_t>(x.v[i]) - zx) - s[1];
        const int64_t t_abs = (2 * std::llabs(n) * (int64_t{1} << (16 + k)) + r) / (2 * r);
        const int64_t t = n < 0 ? -t_abs : t_abs;
        const size_t c = static_cast<size_t>(channel[i]);
        const int64_t acc = t * static_cast<int64_t>(weight[c]) + static_cast<int64_t>(bias[c]);
        y.v[i] = qtk::arith::requantize(static_cast<int32_t>(acc), i32(attr(node, "multiplier")[c]),
                                        i32(attr(node, "shift")[c]), i32(zy), i32(clamp[0]),
                                        i32(clamp[1]));
    }
    return y;
}

// Spec 19.1 by multi-index: each value's row along `axis`, S = sum (q - z)^2 over it, V =
// max(S, E), t = round_half_away(2^16 x / sqrt V) by k and the integer square root, then one
// requantize by (M, n).
Naive naive_l2_normalize_int8(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const size_t axis = static_cast<size_t>(attr(node, "axis")[0]);
    const int64_t zx = b.values[node.inputs[0]].zero_point;
    const int64_t zy = b.values[node.outputs[0]].zero_point;
    const int64_t eps_term = attr(node, "eps_term")[0];
    const auto& clamp = attr(node, "clamp");
    Naive y{x.shape, x.dtype, x.v};
    for (int64_t i = 0; i < count_of(x.shape); ++i) {
        std::vector<int64_t> idx = unflatten(i, x.shape);
        int64_t squares = 0;
        for (idx[axis] = 0; idx[axis] < x.shape[axis]; ++idx[axis]) {
            const int64_t v = static_cast<int64_t>(x.v[flatten_index(idx, x.shape)]) - zx;
            squares += v * v;
        }
        const int64_t variance = std::max(squares, eps_term);
        int bits = 0;
        while (bits < 63 && (int64_t{1} << bits) <= variance) {
            ++bits;
        }
        const int k = (62 - bits) / 2;
        const int64_t r = naive_isqrt(variance << (2 * k));
        const int64_t n = static_cast<int64_t>(x.v[i]) - zx;
        const int64_t t_abs = (2 * std::llabs(n) * (int64_t{1} << (16 + k)) + r) / (2 * r);
        CHECK(t_abs <= 65536);
        y.v[i] = qtk::arith::requantize(static_cast<int32_t>(n < 0 ? -t_abs : t_abs),
                                        i32(attr(node, "multiplier")[0]),
                                        i32(attr(node, "shift")[0]), i32(zy), i32(clamp[0]),
                                        i32(clamp[1]));
    }
    return y;
}

// torch's group_norm (float32) over [N, C, ...] by multi-index, in double.
Naive naive_group_norm(const ModelBuilder& b, const NodeSpec& node, const Naive& x) {
    const std::vector<double> w = constant_values(b.values[node.inputs[1]]);
    const std::vector<double> bias = constant_values(b.values[node.inputs[2]]);
    const double eps = attr_spec(node, "eps").floats[0];
    const int64_t per_group = x.shape[1] / attr(node, "groups")[0];
    std::map<int64_t, std::vector<double>> rows;
    const auto row_of = [&](int64_t i) {
        const std::vector<int64_t> idx = unflatten(i, x.shape);
        return idx[0] * x.shape[1] + idx[1] / per_group;
    };
    for (int64_t i = 0; i < count_of(x.shape); ++i) {
        rows[row_of(i)].push_back(x.v[i]);
    }
    Naive y{x.shape, x.dtype, x.v};
    for (int64_t i = 0; i < count_of(x.shape); ++i) {
        const std::vector<double>& r = rows[row_of(i)];
        double mean = 0, var = 0;
        for (double v : r) {
            mean += v / static_cast<double>(r.size());
        }
        for (double v : r) {
            var += (v - mean) * (v - mean) / static_cast<double>(r.size());
        }
        const size_t c = static_cast<size_t>(unflatten(i, x.shape)[1]);
        y.v[i] = static_cast<float>((x.v[i] - mean) / std::sqrt(var + eps) * w[c] + bias[c]);
    }
    return y;
}

// torch.nn.functional.normalize(p=2) along `axis` by multi-index, in double.
Naive naive_l2_normalize(const NodeSpec& node, const Naive& x) {
    const size_t axis = static_cast<size_t>(attr(node, "axis")[0]);
    const double eps = attr_spec(node, "eps").floats[0];
    Naive y{x.shape, x.dtype, x.v};
    for (int64_t i = 0; i < count_of(x.shape); ++i) {
        std::vector<int64_t> idx = unflatten(i, x.shape);
        double squares = 0;
        for (idx[axis] = 0; idx[axis] < x.shape[axis]; ++idx[axis]) {
            squares += x.v[flatten_index(idx, x.shape)] * x.v[flatten_index(idx, x.shape)];
        }
        y.v[i] = static_cast<float>(x.v[i] / std::max(std::sqrt(squares), eps));
    }
    return y;
}

Naive naive_slice(const NodeSpec& node, const Naive& x) {
    const auto &starts = attr(node, "starts"), &ends = attr(node, "ends"),
               &steps = attr(node, "steps");
    Shape shape = {x.shape[0]};
    for (size_t d = 0; d < starts.size(); ++d) {
        int64_t n = 0;
        for (int64_t j = starts[d]; j < ends[d]; j += steps[d]) {
            ++n;
        }
        shape.push_back(n);
    }
    std::vector<int64_t> source;
    for (int64_t i = 0; i < count_of(shape); ++i) {
        std::vector<int64_t> idx = unflatten(i, shape);
        for (size_t d = 1; d < idx.size(); ++d) {
            idx[d] = starts[d - 1] + idx[d] * steps[d - 1];
        }
        source.push_back(flatten_index(idx, x.shape));
    }
    return gather(x, shape, source);
}

// The one sample of `value` once per sample of `like`.
Naive naive_expand_batch(const Naive& value, const Naive& like) {
    Naive y{value.shape, value.dtype, {}};
    y.shape[0] = like.shape[0];
    for (int64_t n = 0; n < like.shape[0]; ++n) {
        y.v.insert(y.v.end(), value.v.begin(), value.v.end());
    }
    return y;
}

std::vector<Naive> naive_node(const ModelBuilder& b, const NodeSpec& node,
                              const std::vector<Naive>& in) {
    const std::string& op = node.op;
    const Naive& x = in[0];
    if (op == "conv2d") {
        return {naive_conv(b, node, x)};
    }
    if (op == "conv_transpose2d") {
        return {naive_conv_transpose(b, node, x)};
    }
    if (op == "linear") {
        return {naive_linear(b, node, x)};
    }
    if ((op == "add" || op == "sub" || op == "mul" || op == "div") &&
        x.dtype == DType::kFloat32) {
        return {naive_float_binary(node, x, in[1])};
    }
    if (op == "add") {
        return {naive_add(b, node, x, in[1])};
    }
    if (op == "mul") {
        return {naive_mul(b, node, x, in[1])};
    }
    if (op == "mul_constant" || op == "add_constant") {
        return {naive_constant_arithmetic(b, node, in)};
    }
    if (op == "concat") {
        return {naive_concat(b, node, in)};
    }
    if (op == "prelu") {
        return {naive_prelu(b, node, in)};
    }
    if (op == "max_pool2d" || op == "avg_pool2d" || op == "global_avg_pool2d") {
        return {naive_pool(b, node, x)};
    }
    if (op == "flatten" || op == "reshape") {
        return {naive_reshape(node, x)};
    }
    if (op == "permute") {
        return {naive_permute(node, x)};
    }
    if (op == "split") {
        return naive_split(node, x);
    }
    if (op == "pad") {
        return {naive_pad(node, x)};
    }
    if (op == "resize_nearest") {
        return {naive_resize_nearest(node, x)};
    }
    if (op == "resize_bilinear") {
        return {naive_resize_bilinear(b, node, x)};
    }
    if (op == "matmul") {
        return {naive_matmul(b, node, x, in[1])};
    }
    if ((op == "layer_norm" || op == "group_norm") && x.dtype == DType::kInt8) {
        return {naive_norm_int8(b, node, x)};
    }
    if (op == "softmax" && x.dtype == DType::kInt8) {
        return {naive_softmax_int8(b, node, x)};
    }
    if (op == "l2_normalize" && x.dtype == DType::kInt8) {
        return {naive_l2_normalize_int8(b, node, x)};
    }
    if (op == "layer_norm") {
        return {naive_layer_norm(b, node, x)};
    }
    if (op == "group_norm") {
        return {naive_group_norm(b, node, x)};
    }
    if (op == "softmax") {
        return {naive_softmax(node, x)};
    }
    if (op == "l2_normalize") {
        return {naive_l2_normalize(node, x)};
    }
    if (op == "slice") {
        return {naive_slice(node, x)};
    }
    if (op == "expand_batch") {
        return {naive_expand_batch(x, in[1])};
    }
    return {naive_unary(b, node, x)};
}

std::vector<Naive> naive_run(const ModelBuilder& b, const std::vector<Naive>& inputs) {
    std::map<uint32_t, Naive> env;
    for (size_t i = 0; i < b.inputs.size(); ++i) {
        env[b.inputs[i]] = inputs[i];
    }
    for (uint32_t id = 0; id < b.values.size(); ++id) {
        const ValueSpec& v = b.values[id];
        if (v.constant) {  // as an operand (float ops); weights are also read from the builder
            env[id] = Naive{v.dims, static_cast<DType>(v.dtype), constant_values(v)};
        }
    }
    for (const NodeSpec& node : b.nodes) {
        std::vector<Naive> in;
        for (uint32_t id : node.inputs) {
            in.push_back(env[id]);
        }
        const std::vector<Naive> out = naive_node(b, node, in);
        for (size_t i = 0; i < out.size(); ++i) {
            env[node.outputs[i]] = out[i];
        }
    }
    std::vector<Naive> out;
    for (uint32_t id : b.outputs) {
        out.push_back(env[id]);
    }
    return out;
}

std::vector<Naive> session_run(qtk::Session& session, const std::vector<Naive>& inputs) {
    std::vector<std::vector<int8_t>> int8s(inputs.size());
    std::vector<std::vector<float>> floats(inputs.size());
    std::vector<const void*> ptrs;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < inputs.size(); ++i) {
        for (double v : inputs[i].v) {
            if (inputs[i].dtype == DType::kFloat32) {
                floats[i].push_back(static_cast<float>(v));
            } else {
                int8s[i].push_back(q8(v));
            }
        }
        ptrs.push_back(inputs[i].dtype == DType::kFloat32
                           ? static_cast<const void*>(floats[i].data())
                           : int8s[i].data());
        shapes.push_back(inputs[i].shape);
    }
    std::vector<Naive> out;
    for (const qtk::Tensor& t : session.run(ptrs, shapes)) {
        Naive n{t.shape, t.dtype, {}};
        n.v.assign(t.data.begin(), t.data.end());
        n.v.insert(n.v.end(), t.float_data.begin(), t.float_data.end());
        out.push_back(n);
    }
    return out;
}

std::vector<Naive> random_inputs(const ModelBuilder& b, int64_t batch, Rng& rng) {
    std::vector<Naive> in;
    for (uint32_t id : b.inputs) {
        Shape s = b.values[id].dims;
        s[0] = batch;
        const size_t n = static_cast<size_t>(count_of(s));
        Naive t{s, static_cast<DType>(b.values[id].dtype), {}};
        if (t.dtype == DType::kFloat32) {
            const std::vector<float> v = rng.floats(n, -4, 4);
            t.v.assign(v.begin(), v.end());
        } else {
            const std::vector<int8_t> v = rng.int8s(n);
            t.v.assign(v.begin(), v.end());
        }
        in.push_back(t);
    }
    return in;
}

// Sample `n` of a batched tensor as a batch-1 tensor.
Naive sample(const Naive& t, int64_t n) {
    const int64_t per = count_of(t.shape) / t.shape[0];
    Shape s = t.shape;
    s[0] = 1;
    return Naive{s, t.dtype,
                 std::vector<double>(t.v.begin() + n * per, t.v.begin() + (n + 1) * per)};
}

// int8 exactly; float32 within 1e-5 * (1 + |expected|). An empty string when they agree.
std::string compare(const Naive& got, const Naive& want) {
    if (got.shape != want.shape || got.dtype != want.dtype) {
        return "shape " + qtk::to_string(got.shape) + " " + qtk::dtype_name(got.dtype) +
               ", expected " + qtk::to_string(want.shape) + " " + qtk::dtype_name(want.dtype);
    }
    for (size_t i = 0; i < got.v.size(); ++i) {
        const double tolerance =
            want.dtype == DType::kFloat32 ? 1e-5 * (1 + std::fabs(want.v[i])) : 0;
        if (!(std::fabs(got.v[i] - want.v[i]) <= tolerance)) {
            return "element " + std::to_string(i) + " is " + std::to_string(got.v[i]) +
                   ", expected " + std::to_string(want.v[i]);
        }
    }
    return "";
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
        const std::vector<Naive> got1 = session_run(one_thread, inputs);
        const std::vector<Naive> got2 = session_run(two_threads, inputs);
        CHECK(one_thread.arena_bytes() >= one_thread.arena_lower_bound());
        CHECK_EQ(got1.size(), expected.size());
        for (size_t i = 0; i < std::min(got1.size(), expected.size()); ++i) {
            const std::string difference = compare(got1[i], expected[i]);
            if (!difference.empty()) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         name + ": output " + std::to_string(i) + " (batch " +
                                             std::to_string(batch) +
                                             ") differs from the naive result: " + difference);
            }
            if (got2[i].v != got1[i].v) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         name + ": 2 threads differ from 1 thread");
            }
        }
        // Each sample of a batch equals that sample run alone, to the bit.
        for (int64_t n = 0; batch > 1 && n < batch; ++n) {
            std::vector<Naive> single;
            for (const Naive& t : inputs) {
                single.push_back(sample(t, n));
            }
            const std::vector<Naive> alone = session_run(one_thread, single);
            for (size_t i = 0; i < got1.size(); ++i) {
                if (sample(got1[i], n).v != alone[i].v) {
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

// Linear on [N, H, W, C] (ConvNeXt's MLPs) and [N, T, C] (the transformers'), int8 and float32.
void test_linear_on_leading_dimensions() {
    Rng rng(8);
    for (const Shape& x_shape : {Shape{1, 3, 5, 7}, Shape{1, 4, 7}}) {
        Shape y_shape = x_shape;
        y_shape.back() = 5;
        ModelBuilder b;
        const uint32_t x = b.activation("x", x_shape, 0.1f, -3);
        const uint32_t w = b.weight("fc.weight", {5, 7}, qtk_test::random_weights(rng, 35));
        const uint32_t bias = b.bias("fc.bias", {5}, qtk_test::random_bias(rng, 5));
        const uint32_t y = b.activation("y", y_shape, 0.2f, 4);
        b.node("linear", "fc", {x, w, bias}, {y}, qtk_test::requant_attrs(5, 0.1, 0.02, 0.2));
        b.inputs = {x};
        b.outputs = {y};
        check_model("linear on " + qtk::to_string(x_shape), b);

        ModelBuilder f;
        const uint32_t fx = f.float_activation("x", x_shape);
        const uint32_t fw = f.float_constant("fc.weight", {5, 7}, rng.floats(35, -1, 1));
        const uint32_t fb = f.float_constant("fc.bias", {5}, rng.floats(5, -1, 1));
        const uint32_t fy = f.float_activation("y", y_shape);
        f.node("linear", "fc", {fx, fw, fb}, {fy});
        f.inputs = {fx};
        f.outputs = {fy};
        check_model("float linear on " + qtk::to_string(x_shape), f);
    }
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

ModelBuilder float_op_model(const std::string& op, Shape x_dims, Shape y_dims,
                            std::vector<AttrSpec> attrs) {
    ModelBuilder b;
    const uint32_t x = b.float_activation("x", x_dims);
    const uint32_t y = b.float_activation("y", y_dims);
    b.node(op, op, {x}, {y}, std::move(attrs));
    b.inputs = {x};
    b.outputs = {y};
    return b;
}

// Two graph inputs a, b into one binary op (int8 with the given requantization, or float32).
ModelBuilder binary_model(const std::string& op, Shape a_dims, Shape b_dims, Shape y_dims,
                          bool float32, std::vector<AttrSpec> attrs) {
    ModelBuilder b;
    const uint32_t a =
        float32 ? b.float_activation("a", a_dims) : b.activation("a", a_dims, 0.1f, 5);
    const uint32_t c =
        float32 ? b.float_activation("b", b_dims) : b.activation("b", b_dims, 0.07f, -9);
    const uint32_t y =
        float32 ? b.float_activation("y", y_dims) : b.activation("y", y_dims, 0.3f, 2);
    b.node(op, op, {a, c}, {y}, std::move(attrs));
    b.inputs = {a, c};
    b.outputs = {y};
    return b;
}

std::vector<AttrSpec> mul_attrs(int64_t lo = -128, int64_t hi = 127) {
    const qtk_test::Requant r = qtk_test::quantize_multiplier(0.1 * 0.07 / 0.3);
    return {AttrSpec("multiplier", {r.multiplier}), AttrSpec("shift", {r.shift}),
            AttrSpec("clamp", {lo, hi})};
}

void test_mul() {
    check_model("mul, same shapes, clamp", binary_model("mul", {1, 2, 3, 3}, {1, 2, 3, 3},
                                                        {1, 2, 3, 3}, false, mul_attrs(-10, 90)));
    check_model("mul squeeze-excitation broadcast [N,C,H,W] * [N,C,1,1]",
                binary_model("mul", {1, 5, 4, 3}, {1, 5, 1, 1}, {1, 5, 4, 3}, false, mul_attrs()));
    check_model("mul broadcasting both ways, odd shape",
                binary_model("mul", {1, 1, 7, 5}, {1, 3, 7, 1}, {1, 3, 7, 5}, false, mul_attrs()));
    check_model("mul rank 2", binary_model("mul", {1, 9}, {1, 1}, {1, 9}, false, mul_attrs()));
}

// Spec 21: every broadcast pattern of the constant against odd shapes (and a constant larger than
// x along a dim), signs and zeros in the constants, zero points at the extremes.
void test_constant_arithmetic() {
    struct Case {
        Shape x, c, y;
    };
    const Case cases[] = {
        {{1, 3, 5, 7}, {1, 1, 1, 1}, {1, 3, 5, 7}}, {{1, 3, 5, 7}, {1, 3, 1, 1}, {1, 3, 5, 7}},
        {{1, 3, 5, 7}, {1, 1, 5, 1}, {1, 3, 5, 7}}, {{1, 3, 5, 7}, {1, 1, 1, 7}, {1, 3, 5, 7}},
        {{1, 3, 5, 7}, {1, 3, 5, 1}, {1, 3, 5, 7}}, {{1, 3, 5, 7}, {1, 1, 5, 7}, {1, 3, 5, 7}},
        {{1, 3, 5, 7}, {1, 3, 1, 7}, {1, 3, 5, 7}}, {{1, 3, 5, 7}, {1, 3, 5, 7}, {1, 3, 5, 7}},
        {{1, 9, 13}, {1, 9, 13}, {1, 9, 13}},      {{1, 1, 13}, {1, 9, 13}, {1, 9, 13}},
        {{1, 11}, {1, 1}, {1, 11}},
    };
    const int32_t zero_points[][2] = {{-128, 127}, {127, -128}, {3, -7}};
    Rng rng(5);
    for (const Case& c : cases) {
        const int64_t count = count_of(c.c);
        for (const auto& z : zero_points) {
            const std::string name = " x " + qtk::to_string(c.x) + " c " + qtk::to_string(c.c) +
                                     " z " + std::to_string(z[0]) + "/" + std::to_string(z[1]);
            std::vector<int32_t> multipliers, shifts, biases;
            for (int64_t e = 0; e < count; ++e) {
                const int32_t m = e % 4 == 3 ? 0 : int32_t{1} << 30 | (rng.int8s(1)[0] & 0xff) << 20;
                multipliers.push_back(e % 3 == 1 ? -m : m);
                shifts.push_back(m == 0 ? 1 : 29 + static_cast<int32_t>(e % 5));
                biases.push_back((e % 2 ? -1 : 1) * static_cast<int32_t>(e * 40961 % (1 << 22)));
            }
            ModelBuilder mul;
            {
                const uint32_t x = mul.activation("x", c.x, 0.05f, z[0]);
                const uint32_t m = mul.bias("mul.multiplier", c.c, multipliers);
                const uint32_t n = mul.bias("mul.shift", c.c, shifts);
                const uint32_t y = mul.activation("y", c.y, 0.08f, z[1]);
                mul.node("mul_constant", "mul", {x, m, n}, {y}, {AttrSpec("clamp", {-120, 126})});
                mul.inputs = {x};
                mul.outputs = {y};
            }
            check_model("mul_constant" + name, mul);
            for (int64_t negate : {0, 1}) {
                for (int64_t k : {0, 9, 16}) {
                    ModelBuilder add;
                    const uint32_t x = add.activation("x", c.x, 0.05f, z[0]);
                    const uint32_t bias = add.bias("add.bias", c.c, biases);
                    const uint32_t y = add.activation("y", c.y, 0.08f, z[1]);
                    const qtk_test::Requant r =
                        qtk_test::quantize_multiplier(0.05 / 0.08 / static_cast<double>(1 << k));
                    add.node("add_constant", "add", {x, bias}, {y},
                             {AttrSpec("multiplier", {r.multiplier}), AttrSpec("shift", {r.shift}),
                              AttrSpec("input_shift", {k}), AttrSpec("negate", {negate}),
                              AttrSpec("clamp", {-128, 127})});
                    add.inputs = {x};
                    add.outputs = {y};
                    check_model("add_constant k " + std::to_string(k) + " negate " +
                                    std::to_string(negate) + name,
                                add);
                }
            }
        }
    }
}

void test_lut() {
    ModelBuilder b;
    Rng rng(3);
    const uint32_t x = b.activation("x", {1, 3, 5, 7}, 0.05f, -3);
    const uint32_t table = b.weight("act.table", {256}, rng.int8s(256));
    const uint32_t y = b.activation("y", {1, 3, 5, 7}, 0.02f, 40);
    b.node("lut", "act", {x, table}, {y});
    b.inputs = {x};
    b.outputs = {y};
    check_model("lut, random table", b);
}

void test_data_movement() {
    for (bool float32 : {false, true}) {
        const std::string dtype = float32 ? " float32" : " int8";
        auto model = [&](const std::string& op, Shape x, Shape y, std::vector<AttrSpec> attrs) {
            return float32 ? float_op_model(op, x, y, std::move(attrs))
                           : single_op_model(op, x, y, std::move(attrs), 0.05f, -3);
        };
        check_model("reshape with -1" + dtype,
                    model("reshape", {1, 6, 2, 5}, {1, 3, 20}, {AttrSpec("shape", {3, -1})}));
        check_model("reshape to rank 5" + dtype, model("reshape", {1, 12, 5}, {1, 2, 3, 2, 5},
                                                       {AttrSpec("shape", {2, 3, 2, 5})}));
        check_model("permute NCHW -> NHWC" + dtype,
                    model("permute", {1, 3, 4, 5}, {1, 4, 5, 3}, {AttrSpec("perm", {0, 2, 3, 1})}));
        check_model("permute rank 5" + dtype, model("permute", {1, 2, 3, 4, 5}, {1, 5, 3, 2, 4},
                                                    {AttrSpec("perm", {0, 4, 2, 1, 3})}));
        check_model("flatten" + dtype, model("flatten", {1, 3, 2, 5}, {1, 30}, {}));
        check_model("pad with a nonzero value" + dtype,
                    model("pad", {1, 2, 3, 4}, {1, 2, 7, 6},
                          {AttrSpec("pads", {2, 0, 1, 3}),
                           float32 ? float_attr("value", {-1.5f}) : AttrSpec("value", {-100})}));
        check_model("pad right and bottom only" + dtype,
                    model("pad", {1, 1, 2, 2}, {1, 1, 3, 5},
                          {AttrSpec("pads", {0, 3, 0, 1}),
                           float32 ? float_attr("value", {0.0f}) : AttrSpec("value", {-3})}));
        check_model(
            "resize_nearest 2x up" + dtype,
            model("resize_nearest", {1, 2, 3, 2}, {1, 2, 6, 4},
                  {AttrSpec("index_h", {0, 0, 1, 1, 2, 2}), AttrSpec("index_w", {0, 0, 1, 1})}));
        check_model("resize_nearest odd down" + dtype,
                    model("resize_nearest", {1, 3, 5, 7}, {1, 3, 2, 3},
                          {AttrSpec("index_h", {1, 4}), AttrSpec("index_w", {0, 3, 6})}));

        ModelBuilder b;
        const auto activation = [&](const std::string& name, Shape dims) {
            return float32 ? b.float_activation(name, dims) : b.activation(name, dims, 0.05f, -3);
        };
        const uint32_t x = activation("x", {1, 7, 3, 5});
        const uint32_t s0 = activation("s0", {1, 2, 3, 5});
        const uint32_t s1 = activation("s1", {1, 4, 3, 5});
        const uint32_t s2 = activation("s2", {1, 1, 3, 5});
        b.node("split", "split_c", {x}, {s0, s1, s2},
               {AttrSpec("axis", {1}), AttrSpec("sizes", {2, 4, 1})});
        const uint32_t w0 = activation("w0", {1, 4, 3, 1});
        const uint32_t w1 = activation("w1", {1, 4, 3, 3});
        const uint32_t w2 = activation("w2", {1, 4, 3, 1});
        b.node("split", "split_w", {s1}, {w0, w1, w2},
               {AttrSpec("axis", {3}), AttrSpec("sizes", {1, 3, 1})});
        b.inputs = {x};
        b.outputs = {s0, w0, w1, w2, s2};
        check_model("split into 3 along channels and along width" + dtype, b);

        // Channel shuffle (ShuffleNet): [N, C, H, W] -> [N, g, C/g, H, W] -> swap -> [N, C, H, W].
        ModelBuilder shuffle;
        const auto shuffle_activation = [&](const std::string& name, Shape dims) {
            return float32 ? shuffle.float_activation(name, dims)
                           : shuffle.activation(name, dims, 0.05f, -3);
        };
        const uint32_t in = shuffle_activation("x", {1, 6, 2, 3});
        const uint32_t grouped = shuffle_activation("grouped", {1, 3, 2, 2, 3});
        shuffle.node("reshape", "view", {in}, {grouped}, {AttrSpec("shape", {3, 2, 2, 3})});
        const uint32_t swapped = shuffle_activation("swapped", {1, 2, 3, 2, 3});
        shuffle.node("permute", "transpose", {grouped}, {swapped},
                     {AttrSpec("perm", {0, 2, 1, 3, 4})});
        const uint32_t out = shuffle_activation("out", {1, 6, 2, 3});
        shuffle.node("reshape", "merge", {swapped}, {out}, {AttrSpec("shape", {-1, 2, 3})});
        shuffle.inputs = {in};
        shuffle.outputs = {out};
        check_model("channel shuffle (reshape, permute of 5-D, reshape)" + dtype, shuffle);
    }
}

void test_resize_bilinear() {
    const qtk_test::Requant same = qtk_test::quantize_multiplier(1.0 / 1048576.0);
    const qtk_test::Requant rescaled = qtk_test::quantize_multiplier(0.05 / (0.03 * 1048576.0));
    // torch, align_corners=False, 3 -> 5 rows and 4 -> 7 columns, plus weights 0 and 1024.
    check_model(
        "resize_bilinear up, weights 0, 1024 and odd",
        single_op_model(
            "resize_bilinear", {1, 2, 3, 4}, {1, 2, 5, 7},
            {AttrSpec("h0", {0, 0, 1, 1, 2}), AttrSpec("h1", {1, 1, 2, 2, 2}),
             AttrSpec("h_weight", {0, 717, 307, 1024, 0}), AttrSpec("w0", {0, 0, 0, 1, 2, 2, 3}),
             AttrSpec("w1", {1, 1, 1, 2, 3, 3, 3}),
             AttrSpec("w_weight", {0, 293, 878, 439, 1, 1023, 0}),
             AttrSpec("multiplier", {rescaled.multiplier}), AttrSpec("shift", {rescaled.shift})},
            0.03f, 7));
    check_model(
        "resize_bilinear down, same scale",
        single_op_model(
            "resize_bilinear", {1, 3, 6, 5}, {1, 3, 2, 2},
            {AttrSpec("h0", {1, 4}), AttrSpec("h1", {2, 5}), AttrSpec("h_weight", {512, 512}),
             AttrSpec("w0", {0, 3}), AttrSpec("w1", {1, 4}), AttrSpec("w_weight", {640, 128}),
             AttrSpec("multiplier", {same.multiplier}), AttrSpec("shift", {same.shift})}));
}

void test_global_avg_pool_keepdim() {
    check_model("global_avg_pool2d keepdim 0", single_op_model("global_avg_pool2d", {1, 5, 3, 2},
                                                               {1, 5}, {AttrSpec("keepdim", {0})}));
    check_model("global_avg_pool2d keepdim 1",
                single_op_model("global_avg_pool2d", {1, 5, 3, 2}, {1, 5, 1, 1},
                                {AttrSpec("keepdim", {1})}));
}

// max_pool2d in ceil mode, int8 and float32: the naive pool's windows skip what lies past the
// padded input.
// avg_pool2d over odd shapes, floor and ceil mode, with and without count_include_pad and
// divisor_override, int8 and float32, against naive_pool.
void test_avg_pool2d_sweep() {
    int ceil_adds_a_window = 0, cases = 0;
    for (int64_t h : {1, 2, 5, 7}) {
        for (int64_t k : {1, 2, 3}) {
            for (int64_t s : {1, 2, 3}) {
                for (int64_t p = 0; p <= k / 2; ++p) {
                    for (int64_t ceil : {0, 1}) {
                        const int64_t span = h + 2 * p - k + (ceil ? s - 1 : 0);
                        if (h + 2 * p < k) {
                            continue;
                        }
                        int64_t out = span / s + 1;
                        if (ceil && (out - 1) * s >= h + p) {
                            --out;
                        }
                        ceil_adds_a_window += out > (h + 2 * p - k) / s + 1;
                        const int64_t w = h + 2, kw = k == 3 ? 2 : k + 1, pw = kw / 2;
                        int64_t out_w = (w + 2 * pw - kw + (ceil ? 1 : 0)) / 2 + 1;
                        if (ceil && (out_w - 1) * 2 >= w + pw) {
                            --out_w;
                        }
                        for (int64_t include_pad : {0, 1}) {
                            for (int64_t divisor : {0, 1, 5}) {
                                std::vector<AttrSpec> attrs = {
                                    AttrSpec("kernel", {k, kw}), AttrSpec("stride", {s, 2}),
                                    AttrSpec("padding", {p, pw}),
                                    AttrSpec("count_include_pad", {include_pad})};
                                if (ceil) {
                                    attrs.push_back(AttrSpec("ceil_mode", {1}));
                                }
                                if (divisor != 0) {
                                    attrs.push_back(AttrSpec("divisor_override", {divisor}));
                                }
                                const Shape x = {1, 3, h, w}, y = {1, 3, out, out_w};
                                const std::string name =
                                    "avg_pool2d " + std::to_string(k) + "x" + std::to_string(kw) +
                                    " stride " + std::to_string(s) + "x2 pad " +
                                    std::to_string(p) + "x" + std::to_string(pw) + " on " +
                                    qtk::to_string(x) + " ceil " + std::to_string(ceil) +
                                    " count_include_pad " + std::to_string(include_pad) +
                                    " divisor_override " + std::to_string(divisor);
                                check_model(name, single_op_model("avg_pool2d", x, y, attrs));
                                check_model("float " + name,
                                            float_op_model("avg_pool2d", x, y, attrs));
                                ++cases;
                            }
                        }
                    }
                }
            }
        }
    }
    CHECK(ceil_adds_a_window > 0);
    CHECK(cases > 100);
}

// prelu over odd shapes, one slope or one per channel (positive, zero, negative, above one),
// int8 against naive_prelu's exact rounding and float32 against torch's definition.
void test_prelu() {
    Rng rng(5);
    const Shape shapes[] = {{1, 1}, {1, 3}, {1, 5, 7}, {1, 3, 4, 5}, {1, 17, 3, 1}, {1, 2, 1, 9}};
    for (const Shape& x : shapes) {
        for (const bool per_channel : {false, true}) {
            const int64_t c = per_channel ? x[1] : 1;
            std::vector<int64_t> multipliers, shifts;
            std::vector<float> slopes;
            for (int64_t i = 0; i < c; ++i) {
                const int64_t kind = (i + (per_channel ? 0 : 1)) % 4;  // +, -, 0, above one
                const int64_t m = kind == 2 ? 0 : rng.uniform(1 << 30, (int64_t{1} << 31) - 1);
                multipliers.push_back(kind == 1 ? -m : m);
                shifts.push_back(kind == 2 ? 1 : kind == 3 ? 30 : rng.uniform(31, 34));
                slopes.push_back(kind == 2 ? 0.0f : kind == 1 ? -0.4f : kind == 3 ? 1.5f : 0.2f);
            }
            const std::string name = "prelu " + qtk::to_string(x) +
                                     (per_channel ? " per channel" : " one slope");
            check_model(name, single_op_model(
                                  "prelu", x, x,
                                  {AttrSpec("positive_multiplier", {rng.uniform(1 << 30, 2000000000)}),
                                   AttrSpec("positive_shift", {31}), AttrSpec("multiplier", multipliers),
                                   AttrSpec("shift", shifts), AttrSpec("clamp", {-128, 127})},
                                  0.07f, 4));
            ModelBuilder b;
            const uint32_t xi = b.float_activation("x", x);
            const uint32_t w = b.float_constant("prelu.weight", {c}, slopes);
            const uint32_t y = b.float_activation("y", x);
            b.node("prelu", "prelu", {xi, w}, {y}, {});
            b.inputs = {xi};
            b.outputs = {y};
            check_model("float " + name, b);
        }
    }
}

void test_max_pool2d_ceil_mode() {
    // 3x3 stride 2x3 pad 1x0 on 10x7: H ceil((10 + 2 - 2 - 1) / 2) + 1 = 6, the last window
    // reading input row 9, the padding and a row past it; W ceil((7 - 2 - 1) / 3) + 1 = 3, the last
    // window columns 6 to 8. GoogLeNet's 3x3 stride 2 on 14 gives 7 (floor: 6). On 5 with 3x3
    // stride 3 pad 1 the third window would start in the bottom padding: torch drops it, 2.
    // Dilated 2x3 stride 2 on 8: 4 (floor: 3).
    struct CeilCase {
        const char* name;
        Shape x, y;
        std::vector<int64_t> kernel, stride, padding, dilation;
    };
    const CeilCase ceil_cases[] = {
        {"3x3 stride 2x3 pad 1x0", {1, 2, 10, 7}, {1, 2, 6, 3}, {3, 3}, {2, 3}, {1, 0}, {1, 1}},
        {"3x3 stride 2", {1, 3, 14, 14}, {1, 3, 7, 7}, {3, 3}, {2, 2}, {0, 0}, {1, 1}},
        {"3x3 stride 3 pad 1", {1, 1, 5, 5}, {1, 1, 2, 2}, {3, 3}, {3, 3}, {1, 1}, {1, 1}},
        {"2x3 stride 2 dilation 2x1", {1, 2, 8, 8}, {1, 2, 4, 4}, {2, 3}, {2, 2}, {0, 0}, {2, 1}},
    };
    for (const CeilCase& t : ceil_cases) {
        const std::vector<AttrSpec> attrs = {
            AttrSpec("kernel", t.kernel), AttrSpec("stride", t.stride),
            AttrSpec("padding", t.padding), AttrSpec("dilation", t.dilation),
            AttrSpec("ceil_mode", {1})};
        const std::string name = std::string("max_pool2d ") + t.name + " ceil mode on " +
                                 qtk::to_string(t.x);
        check_model(name, single_op_model("max_pool2d", t.x, t.y, attrs));
        check_model("float " + name, float_op_model("max_pool2d", t.x, t.y, attrs));
    }
}

void test_float_kernels() {
    Rng rng(21);
    const auto float_conv = [&](Shape x, Shape w, Shape y, std::vector<AttrSpec> attrs) {
        ModelBuilder b;
        const uint32_t xi = b.float_activation("x", x);
        const uint32_t wi = b.float_constant("conv.weight", w, rng.floats(count_of(w), -1, 1));
        const uint32_t bi = b.float_constant("conv.bias", {w[0]}, rng.floats(w[0], -1, 1));
        const uint32_t yi = b.float_activation("y", y);
        b.node("conv2d", "conv", {xi, wi, bi}, {yi}, std::move(attrs));
        b.inputs = {xi};
        b.outputs = {yi};
        return b;
    };
    check_model("float conv 3x3 pad 1",
                float_conv({1, 3, 5, 4}, {4, 3, 3, 3}, {1, 4, 5, 4},
                           {AttrSpec("stride", {1, 1}), AttrSpec("padding", {1, 1}),
                            AttrSpec("dilation", {1, 1}), AttrSpec("groups", {1})}));
    check_model("float conv grouped, strided, dilated, ReLU6 bounds",
                float_conv({1, 4, 9, 8}, {6, 2, 3, 2}, {1, 6, 5, 7},
                           {AttrSpec("stride", {2, 1}), AttrSpec("padding", {2, 1}),
                            AttrSpec("dilation", {2, 3}), AttrSpec("groups", {2}),
                            float_attr("bounds", {0.0f, 6.0f})}));
    check_model("float conv depthwise",
                float_conv({1, 3, 5, 5}, {3, 1, 3, 3}, {1, 3, 2, 2},
                           {AttrSpec("stride", {2, 2}), AttrSpec("padding", {0, 0}),
                            AttrSpec("dilation", {1, 1}), AttrSpec("groups", {3}),
                            float_attr("bounds", {-0.5f, 0.5f})}));

    for (bool bounded : {false, true}) {
        ModelBuilder b;
        const uint32_t x = b.float_activation("x", {1, 13});
        const uint32_t w = b.float_constant("fc.weight", {4, 13}, rng.floats(52, -1, 1));
        const uint32_t bias = b.float_constant("fc.bias", {4}, rng.floats(4, -1, 1));
        const uint32_t y = b.float_activation("y", {1, 4});
        std::vector<AttrSpec> attrs;
        if (bounded) {
            attrs.push_back(float_attr("bounds", {0.0f, 1e30f}));
        }
        b.node("linear", "fc", {x, w, bias}, {y}, attrs);
        b.inputs = {x};
        b.outputs = {y};
        check_model(std::string("float linear") + (bounded ? " with ReLU bounds" : ""), b);
    }

    for (const char* op : {"add", "mul"}) {
        const std::string name = std::string("float ") + op;
        check_model(name + " same shapes",
                    binary_model(op, {1, 2, 3, 3}, {1, 2, 3, 3}, {1, 2, 3, 3}, true, {}));
        check_model(name + " broadcast both ways, bounds",
                    binary_model(op, {1, 1, 4, 5}, {1, 3, 4, 1}, {1, 3, 4, 5}, true,
                                 {float_attr("bounds", {-2.0f, 3.0f})}));
    }

    ModelBuilder cat;
    const uint32_t a = cat.float_activation("a", {1, 2, 3, 2});
    const uint32_t c = cat.float_activation("b", {1, 3, 3, 2});
    const uint32_t y = cat.float_activation("y", {1, 5, 3, 2});
    cat.node("concat", "cat", {a, c}, {y}, {AttrSpec("axis", {1})});
    const uint32_t z = cat.float_activation("z", {1, 5, 3, 4});
    cat.node("concat", "cat_w", {y, y}, {z}, {AttrSpec("axis", {3})});
    cat.inputs = {a, c};
    cat.outputs = {z};
    check_model("float concat along channels and width", cat);

    check_model("float clamp", float_op_model("clamp", {1, 3, 4, 5}, {1, 3, 4, 5},
                                              {float_attr("bounds", {-1.0f, 2.5f})}));
    for (const char* op : {"hardswish", "hardsigmoid", "sigmoid"}) {
        check_model(std::string("float ") + op, float_op_model(op, {1, 3, 4, 5}, {1, 3, 4, 5}, {}));
    }
    check_model("float max_pool2d 3x2 stride 2x1 pad 1 dilation 1x2",
                float_op_model("max_pool2d", {1, 2, 7, 7}, {1, 2, 4, 7},
                               {AttrSpec("kernel", {3, 2}), AttrSpec("stride", {2, 1}),
                                AttrSpec("padding", {1, 1}), AttrSpec("dilation", {1, 2})}));
    for (int64_t include_pad : {0, 1}) {
        check_model(
            "float avg_pool2d 3x3 stride 2 pad 1 count_include_pad " + std::to_string(include_pad),
            float_op_model(
                "avg_pool2d", {1, 3, 6, 5}, {1, 3, 3, 3},
                {AttrSpec("kernel", {3, 3}), AttrSpec("stride", {2, 2}),
                 AttrSpec("padding", {1, 1}), AttrSpec("count_include_pad", {include_pad})}));
    }
    check_model("float global_avg_pool2d",
                float_op_model("global_avg_pool2d", {1, 4, 3, 5}, {1, 4, 1, 1}, {}));
    check_model(
        "float global_avg_pool2d keepdim 0",
        float_op_model("global_avg_pool2d", {1, 4, 3, 5}, {1, 4}, {AttrSpec("keepdim", {0})}));
}

void test_quantize_dequantize() {
    ModelBuilder b;
    const uint32_t x = b.float_activation("x", {1, 2, 3, 4});
    const uint32_t q = b.activation("q", {1, 2, 3, 4}, 0.03f, -17);
    b.node("quantize", "quant", {x}, {q});
    const uint32_t f = b.float_activation("f", {1, 2, 3, 4});
    b.node("dequantize", "dequant", {q}, {f});
    b.inputs = {x};
    b.outputs = {q, f};
    check_model("quantize then dequantize", b);
}

// One batch-1 run of a builder model on the given inputs.
std::vector<Naive> run_once(const ModelBuilder& b, const std::vector<Naive>& inputs) {
    const std::vector<uint8_t> bytes = b.build();
    qtk::Session s(qtk::Model::from_bytes(bytes.data(), bytes.size()));
    return session_run(s, inputs);
}

Naive int8_tensor(Shape shape, std::vector<double> v) { return Naive{shape, DType::kInt8, v}; }
Naive float_tensor(Shape shape, std::vector<double> v) { return Naive{shape, DType::kFloat32, v}; }

// Hand-worked values of the new ops, so the naive interpreter is itself pinned down.
void test_hand_worked_new_ops() {
    // mul: m = 0.5 * 0.25 / 0.125 = 1 (M = 2^30, n = 30); (2 - 0) * (5 - 1) = 8,
    // (-3) * 4 = -12, (100) * 4 = 400 -> clamp 127.
    {
        ModelBuilder b;
        const uint32_t a = b.activation("a", {1, 3}, 0.5f, 0);
        const uint32_t c = b.activation("b", {1, 1}, 0.25f, 1);
        const uint32_t y = b.activation("y", {1, 3}, 0.125f, 0);
        b.node("mul", "mul", {a, c}, {y},
               {AttrSpec("multiplier", {1 << 30}), AttrSpec("shift", {30}),
                AttrSpec("clamp", {-128, 127})});
        b.inputs = {a, c};
        b.outputs = {y};
        const auto out = run_once(b, {int8_tensor({1, 3}, {2, -3, 100}), int8_tensor({1, 1}, {5})});
        CHECK(out[0].v == (std::vector<double>{8, -12, 127}));
    }
    // bilinear: q = [[0, 10], [20, 30]], z = 0, at (y 0.5, x 0.25): rows 2.5 and 22.5, mean
    // 12.5 -> acc = 12.5 * 2^20, m = 2^-20 rounds half up to 13. Weights 1024 / 0 pick one
    // neighbour exactly: (row 1, col 0) = 20.
    {
        ModelBuilder b = single_op_model(
            "resize_bilinear", {1, 1, 2, 2}, {1, 1, 1, 2},
            {AttrSpec("h0", {0}), AttrSpec("h1", {1}), AttrSpec("h_weight", {512}),
             AttrSpec("w0", {0, 0}), AttrSpec("w1", {1, 1}), AttrSpec("w_weight", {256, 0}),
             AttrSpec("multiplier", {1 << 30}), AttrSpec("shift", {50})},
            0.05f, 0);
        b.values[0].zero_point = 0;
        CHECK(run_once(b, {int8_tensor({1, 1, 2, 2}, {0, 10, 20, 30})})[0].v ==
              (std::vector<double>{13, 10}));
        b.nodes[0].attrs[2] = AttrSpec("h_weight", {1024});
        CHECK(run_once(b, {int8_tensor({1, 1, 2, 2}, {0, 10, 20, 30})})[0].v ==
              (std::vector<double>{23, 20}));  // row 1: 20 * 0.75 + 30 * 0.25 = 22.5 -> 23
    }
    // pad [5] by left 1, bottom 1 with -7.
    CHECK(run_once(single_op_model("pad", {1, 1, 1, 1}, {1, 1, 2, 2},
                                   {AttrSpec("pads", {1, 0, 0, 1}), AttrSpec("value", {-7})}),
                   {int8_tensor({1, 1, 1, 1}, {5})})[0]
              .v == (std::vector<double>{-7, 5, -7, -7}));
    // permute [1, 2, 3] -> [1, 3, 2]: transposes the 2x3 matrix 0..5.
    CHECK(run_once(float_op_model("permute", {1, 2, 3}, {1, 3, 2}, {AttrSpec("perm", {0, 2, 1})}),
                   {float_tensor({1, 2, 3}, {0, 1, 2, 3, 4, 5})})[0]
              .v == (std::vector<double>{0, 3, 1, 4, 2, 5}));
    // lut: table[q + 128] = q / 2 (rounded toward zero).
    {
        ModelBuilder b;
        const uint32_t x = b.activation("x", {1, 3}, 0.1f, 0);
        std::vector<int8_t> halves(256);
        for (int q = -128; q < 128; ++q) {
            halves[q + 128] = static_cast<int8_t>(q / 2);
        }
        const uint32_t t = b.weight("t", {256}, halves);
        const uint32_t y = b.activation("y", {1, 3}, 0.2f, 0);
        b.node("lut", "half", {x, t}, {y});
        b.inputs = {x};
        b.outputs = {y};
        CHECK(run_once(b, {int8_tensor({1, 3}, {-128, 0, 127})})[0].v ==
              (std::vector<double>{-64, 0, 63}));
    }
    // quantize with s = 0.5, z = 3: x / s = 0.5 -> 0, 1.5 -> 2, -0.5 -> 0, 2.5 -> 2 (ties to even),
    // plus z; huge -> 127; NaN -> z. dequantize: (q - 3) * 0.5.
    {
        ModelBuilder b;
        const uint32_t x = b.float_activation("x", {1, 6});
        const uint32_t q = b.activation("q", {1, 6}, 0.5f, 3);
        b.node("quantize", "quant", {x}, {q});
        const uint32_t f = b.float_activation("f", {1, 6});
        b.node("dequantize", "dequant", {q}, {f});
        b.inputs = {x};
        b.outputs = {q, f};
        const auto out =
            run_once(b, {float_tensor({1, 6}, {0.25, 0.75, -0.25, 1.25, 1e9, std::nan("")})});
        CHECK(out[0].v == (std::vector<double>{3, 5, 3, 5, 127, 3}));
        CHECK(out[1].v == (std::vector<double>{0, 1, 0, 1, 62, 0}));
    }
    // float max pooling propagates NaN like torch, wherever it lies in the window.
    {
        const ModelBuilder pool =
            float_op_model("max_pool2d", {1, 2, 2, 2}, {1, 2, 1, 1},
                           {AttrSpec("kernel", {2, 2}), AttrSpec("stride", {1, 1}),
                            AttrSpec("padding", {0, 0}), AttrSpec("dilation", {1, 1})});
        const double nan = std::nan("");
        const Naive out =
            run_once(pool, {float_tensor({1, 2, 2, 2}, {1, nan, 3, 2, nan, 5, 4, 0})})[0];
        CHECK(std::isnan(out.v[0]) && std::isnan(out.v[1]));
    }
    // torch's hardswish, hardsigmoid and sigmoid at a few points.
    const Naive points = float_tensor({1, 5}, {-4, -1, 0, 1, 4});
    const std::map<std::string, std::vector<double>> expected = {
        {"hardswish", {0, -1.0 / 3, 0, 2.0 / 3, 4}},
        {"hardsigmoid", {0, 1.0 / 3, 0.5, 2.0 / 3, 1}},
        {"sigmoid", {0.01798620996, 0.2689414214, 0.5, 0.7310585786, 0.98201379}},
    };
    for (const auto& e : expected) {
        const Naive got = run_once(float_op_model(e.first, {1, 5}, {1, 5}, {}), {points})[0];
        const std::string difference = compare(got, float_tensor({1, 5}, e.second));
        if (!difference.empty()) {
            qtk_test::report_failure(__FILE__, __LINE__, e.first + ": " + difference);
        }
    }
}

// The float fallback ops (add/sub/mul/div with constants, matmul, layer_norm, softmax), and slice,
// expand_batch and float32 resize_bilinear, on odd shapes; check_model's batch 3 runs prove the
// shape inference for any N.
void test_float_fallback_ops() {
    Rng rng(31);
    // x op c for a constant c of the given shape (or c op x with `constant_first`).
    const auto with_constant = [&](const std::string& op, Shape x_dims, Shape c_dims, Shape y_dims,
                                   bool constant_first, std::vector<AttrSpec> attrs) {
        ModelBuilder b;
        const uint32_t x = b.float_activation("x", x_dims);
        // Away from 0, so that div stays well conditioned.
        std::vector<float> values = rng.floats(static_cast<size_t>(count_of(c_dims)), 0.5, 2);
        for (size_t i = 0; i < values.size(); i += 2) {
            values[i] = -values[i];
        }
        const uint32_t c = b.float_constant("c", c_dims, values);
        const uint32_t y = b.float_activation("y", y_dims);
        b.node(op, op, constant_first ? std::vector<uint32_t>{c, x} : std::vector<uint32_t>{x, c},
               {y}, std::move(attrs));
        b.inputs = {x};
        b.outputs = {y};
        return b;
    };
    for (const char* op : {"add", "sub", "mul", "div"}) {
        const std::string name = std::string("float ") + op;
        check_model(name + " same shapes",
                    binary_model(op, {1, 2, 3, 5}, {1, 2, 3, 5}, {1, 2, 3, 5}, true, {}));
        check_model(name + " broadcast both ways, bounds",
                    binary_model(op, {1, 1, 4, 5}, {1, 3, 4, 1}, {1, 3, 4, 5}, true,
                                 {float_attr("bounds", {-2.0f, 3.0f})}));
        check_model(name + " by a [1, 1, 1] constant",
                    with_constant(op, {1, 7, 3}, {1, 1, 1}, {1, 7, 3}, false, {}));
        check_model(name + " of the sample's shape (a position embedding)",
                    with_constant(op, {1, 5, 3}, {1, 5, 3}, {1, 5, 3}, false, {}));
        check_model(name + " constant first, broadcast, bounds",
                    with_constant(op, {1, 3, 4, 5}, {1, 3, 1, 5}, {1, 3, 4, 5}, true,
                                  {float_attr("bounds", {-1.5f, 1.0f})}));
    }

    const auto matmul = [&](Shape a_dims, Shape b_dims, Shape y_dims, bool b_constant) {
        ModelBuilder b;
        const uint32_t a = b.float_activation("a", a_dims);
        const uint32_t c =
            b_constant ? b.float_constant("b", b_dims, rng.floats(count_of(b_dims), -1, 1))
                       : b.float_activation("b", b_dims);
        const uint32_t y = b.float_activation("y", y_dims);
        b.node("matmul", "matmul", {a, c}, {y});
        b.inputs = b_constant ? std::vector<uint32_t>{a} : std::vector<uint32_t>{a, c};
        b.outputs = {y};
        return b;
    };
    check_model("matmul attention scores [N,2,5,3] @ [N,2,3,7]",
                matmul({1, 2, 5, 3}, {1, 2, 3, 7}, {1, 2, 5, 7}, false));
    check_model("matmul broadcasting b's head dim [N,3,5,4] @ [N,1,4,6]",
                matmul({1, 3, 5, 4}, {1, 1, 4, 6}, {1, 3, 5, 6}, false));
    check_model("matmul broadcasting a's head dim [N,1,2,3] @ [N,4,3,5]",
                matmul({1, 1, 2, 3}, {1, 4, 3, 5}, {1, 4, 2, 5}, false));
    check_model("matmul rank 2 by a constant [N,6] @ [6,5]",
                matmul({1, 6}, {6, 5}, {1, 5}, true));
    check_model("matmul tokens by a constant [N,4,7] @ [7,3]",
                matmul({1, 4, 7}, {7, 3}, {1, 4, 3}, true));
    check_model("matmul by a constant with leading 1 [N,2,4,7] @ [1,2,7,3]",
                matmul({1, 2, 4, 7}, {1, 2, 7, 3}, {1, 2, 4, 3}, true));
    check_model("matmul rank 5 by a broadcasting constant [N,2,3,4,5] @ [2,1,5,2]",
                matmul({1, 2, 3, 4, 5}, {2, 1, 5, 2}, {1, 2, 3, 4, 2}, true));

    const auto layer_norm = [&](Shape x_dims, int64_t axes, float eps) {
        const Shape normalized(x_dims.end() - axes, x_dims.end());
        const size_t n = static_cast<size_t>(count_of(normalized));
        ModelBuilder b;
        const uint32_t x = b.float_activation("x", x_dims);
        const uint32_t w = b.float_constant("ln.weight", normalized, rng.floats(n, -2, 2));
        const uint32_t bias = b.float_constant("ln.bias", normalized, rng.floats(n, -1, 1));
        const uint32_t y = b.float_activation("y", x_dims);
        b.node("layer_norm", "ln", {x, w, bias}, {y},
               {AttrSpec("axes", {axes}), float_attr("eps", {eps})});
        b.inputs = {x};
        b.outputs = {y};
        return b;
    };
    check_model("layer_norm over the last dim [N,5,7]", layer_norm({1, 5, 7}, 1, 1e-5f));
    check_model("layer_norm over the last 2 dims [N,3,4,5]", layer_norm({1, 3, 4, 5}, 2, 1e-3f));
    check_model("layer_norm over every dim after the batch [N,3,1,2]",
                layer_norm({1, 3, 1, 2}, 3, 1e-6f));
    check_model("layer_norm of one element per group [N,4,1]", layer_norm({1, 4, 1}, 1, 1e-5f));

    for (int64_t axis : {1, 2, 3}) {
        check_model("softmax axis " + std::to_string(axis) + " of [N,3,4,5]",
                    float_op_model("softmax", {1, 3, 4, 5}, {1, 3, 4, 5},
                                   {AttrSpec("axis", {axis})}));
    }
    check_model("softmax of a length-1 axis",
                float_op_model("softmax", {1, 6, 1}, {1, 6, 1}, {AttrSpec("axis", {2})}));

    for (bool float32 : {false, true}) {
        const std::string dtype = float32 ? " float32" : " int8";
        auto model = [&](Shape x, Shape y, std::vector<AttrSpec> attrs) {
            return float32 ? float_op_model("slice", x, y, std::move(attrs))
                           : single_op_model("slice", x, y, std::move(attrs), 0.05f, -3);
        };
        // ceil(5 / 2) = 3, ceil(9 / 3) = 3, ceil(4 / 1) = 4.
        check_model("slice with steps" + dtype,
                    model({1, 7, 9, 6}, {1, 3, 3, 4},
                          {AttrSpec("starts", {1, 0, 2}), AttrSpec("ends", {6, 9, 6}),
                           AttrSpec("steps", {2, 3, 1})}));
        check_model("slice the class token" + dtype,
                    model({1, 5, 8}, {1, 1, 8},
                          {AttrSpec("starts", {0, 0}), AttrSpec("ends", {1, 8}),
                           AttrSpec("steps", {1, 1})}));
        check_model("slice a step past the end" + dtype,
                    model({1, 10}, {1, 2},
                          {AttrSpec("starts", {3}), AttrSpec("ends", {10}),
                           AttrSpec("steps", {5})}));
    }

    for (bool constant : {true, false}) {
        ModelBuilder b;
        const uint32_t x = b.float_activation("x", {1, 4, 6});
        const uint32_t value =
            constant ? b.float_constant("token", {1, 2, 6}, rng.floats(12, -1, 1))
                     : b.float_activation("token", {1, 2, 6});
        const uint32_t y = b.float_activation("y", {1, 2, 6});
        b.node("expand_batch", "expand", {value, x}, {y});
        b.inputs = constant ? std::vector<uint32_t>{x} : std::vector<uint32_t>{x, value};
        b.outputs = {y};
        if (constant) {
            check_model("expand_batch of a float32 constant", b);
        } else {  // an activation follows the batch: it runs at batch 1 only
            const auto out = run_once(b, {float_tensor({1, 4, 6}, std::vector<double>(24, 0)),
                                          float_tensor({1, 2, 6}, std::vector<double>(12, 0.5))});
            CHECK(out[0].shape == (Shape{1, 2, 6}) && out[0].v == std::vector<double>(12, 0.5));
        }
    }

    check_model("float resize_bilinear up, fractions 0, 1 and odd",
                float_op_model("resize_bilinear", {1, 2, 3, 4}, {1, 2, 5, 7},
                               {AttrSpec("h0", {0, 0, 1, 1, 2}), AttrSpec("h1", {1, 1, 2, 2, 2}),
                                float_attr("h_weight", {0.0f, 0.7f, 0.3f, 1.0f, 0.0f}),
                                AttrSpec("w0", {0, 0, 0, 1, 2, 2, 3}),
                                AttrSpec("w1", {1, 1, 1, 2, 3, 3, 3}),
                                float_attr("w_weight", {0.0f, 0.29f, 0.86f, 0.43f, 0.001f, 0.999f,
                                                        0.0f})}));
    check_model("transformer model (every float fallback op)", qtk_test::transformer_model());
}

// Hand-worked values of the float fallback ops, so their naive code is pinned down too.
void test_hand_worked_float_fallback_ops() {
    // [[1, 2, 3], [4, 5, 6]] @ [[1, 0], [0, 1], [1, 1]] = [[4, 5], [10, 11]].
    {
        ModelBuilder b;
        const uint32_t a = b.float_activation("a", {1, 2, 3});
        const uint32_t c = b.float_constant("b", {3, 2}, {1, 0, 0, 1, 1, 1});
        const uint32_t y = b.float_activation("y", {1, 2, 2});
        b.node("matmul", "mm", {a, c}, {y});
        b.inputs = {a};
        b.outputs = {y};
        CHECK(run_once(b, {float_tensor({1, 2, 3}, {1, 2, 3, 4, 5, 6})})[0].v ==
              (std::vector<double>{4, 5, 10, 11}));
    }
    // layer_norm of [1, 2, 3, 4]: mean 2.5, var 1.25; weight 2, bias 1, eps 0.25 -> std sqrt(1.5).
    {
        ModelBuilder b;
        const uint32_t x = b.float_activation("x", {1, 4});
        const uint32_t w = b.float_constant("w", {4}, {2, 2, 2, 2});
        const uint32_t bias = b.float_constant("b", {4}, {1, 1, 1, 1});
        const uint32_t y = b.float_activation("y", {1, 4});
        b.node("layer_norm", "ln", {x, w, bias}, {y},
               {AttrSpec("axes", {1}), float_attr("eps", {0.25f})});
        b.inputs = {x};
        b.outputs = {y};
        const double r = 1 / std::sqrt(1.5);
        const std::string difference =
            compare(run_once(b, {float_tensor({1, 4}, {1, 2, 3, 4})})[0],
                    float_tensor({1, 4}, {1 - 3 * r, 1 - r, 1 + r, 1 + 3 * r}));
        CHECK(difference.empty());
    }
    // softmax of [0, ln 3, 1000] along its axis: the max is subtracted first (no overflow); a NaN
    // makes the whole lane NaN, as in torch.
    {
        const ModelBuilder b =
            float_op_model("softmax", {1, 3}, {1, 3}, {AttrSpec("axis", {1})});
        const Naive big =
            run_once(b, {float_tensor({1, 3}, {1000, 1000 + std::log(3.0), 1000})})[0];
        CHECK(compare(big, float_tensor({1, 3}, {0.2, 0.6, 0.2})).empty());
        const Naive nan = run_once(b, {float_tensor({1, 3}, {1, std::nan(""), 2})})[0];
        CHECK(std::isnan(nan.v[0]) && std::isnan(nan.v[1]) && std::isnan(nan.v[2]));
    }
    // slice [0..9] by 2:9:3 -> 2, 5, 8.
    CHECK(run_once(float_op_model("slice", {1, 10}, {1, 3},
                                  {AttrSpec("starts", {2}), AttrSpec("ends", {9}),
                                   AttrSpec("steps", {3})}),
                   {float_tensor({1, 10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})})[0]
              .v == (std::vector<double>{2, 5, 8}));
    // float bilinear in float32, in the documented order: rows 0 and 1 of [[0, 10], [20, 30]] at
    // wh 0.5 and ww 0.25: 0.5 * (0.75 * 0 + 0.25 * 10) + 0.5 * (0.75 * 20 + 0.25 * 30) = 12.5.
    {
        const ModelBuilder b = float_op_model(
            "resize_bilinear", {1, 1, 2, 2}, {1, 1, 1, 1},
            {AttrSpec("h0", {0}), AttrSpec("h1", {1}), float_attr("h_weight", {0.5f}),
             AttrSpec("w0", {0}), AttrSpec("w1", {1}), float_attr("w_weight", {0.25f})});
        CHECK(run_once(b, {float_tensor({1, 1, 2, 2}, {0, 10, 20, 30})})[0].v ==
              (std::vector<double>{12.5}));
        const float wh = 0.3f, ww = 0.7f, x00 = 0.1f, x01 = -2.3f, x10 = 7.9f, x11 = 1e-3f;
        const float expected =
            (1 - wh) * ((1 - ww) * x00 + ww * x01) + wh * ((1 - ww) * x10 + ww * x11);
        ModelBuilder odd = b;
        odd.nodes[0].attrs[2] = float_attr("h_weight", {wh});
        odd.nodes[0].attrs[5] = float_attr("w_weight", {ww});
        CHECK(run_once(odd, {float_tensor({1, 1, 2, 2}, {x00, x01, x10, x11})})[0].v ==
              (std::vector<double>{expected}));
    }
    // int8 slice keeps the bytes; int8 expand_batch of a batch-1 activation repeats them.
    CHECK(run_once(single_op_model("slice", {1, 4}, {1, 2},
                                   {AttrSpec("starts", {1}), AttrSpec("ends", {4}),
                                    AttrSpec("steps", {2})}),
                   {int8_tensor({1, 4}, {-128, 5, 127, -7})})[0]
              .v == (std::vector<double>{5, -7}));
    {
        ModelBuilder b;
        const uint32_t value = b.activation("token", {1, 3}, 0.1f, 2);
        const uint32_t like = b.activation("x", {1, 2}, 0.2f, 0);
        const uint32_t y = b.activation("y", {1, 3}, 0.1f, 2);
        b.node("expand_batch", "expand", {value, like}, {y});
        b.inputs = {value, like};
        b.outputs = {y};
        CHECK(run_once(b, {int8_tensor({1, 3}, {-128, 0, 127}), int8_tensor({1, 2}, {1, 1})})[0]
                  .v == (std::vector<double>{-128, 0, 127}));
    }
}

void test_float_session_edges() {
    const std::vector<uint8_t> bytes = qtk_test::mixed_model().build();
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    CHECK(model->inputs()[0].dtype == DType::kFloat32);
    CHECK(model->outputs()[0].dtype == DType::kFloat32);
    CHECK(model->outputs()[2].dtype == DType::kInt8);
    qtk::Session s(model);
    const std::vector<float> x(2 * 3 * 6 * 6, 0.5f), y(2 * 4 * 3 * 3, -0.5f);
    CHECK_THROWS_WITH(s.run({x.data(), y.data()}, {{1, 3, 6, 6}, {1, 4, 3, 4}}),
                      "input 1 ('y'): expected float32 tensor of shape [N, 4, 3, 3]");
    const std::vector<qtk::Tensor> out = s.run({x.data(), y.data()}, {{2, 3, 6, 6}, {2, 4, 3, 3}});
    CHECK(out[0].shape == (Shape{2, 5}) && out[0].float_data.size() == 10 && out[0].data.empty());
    CHECK(out[2].shape == (Shape{2, 4, 3, 3}) && out[2].data.size() == 72 &&
          out[2].float_data.empty());
    int8_t q[1];
    float f[1];
    CHECK_THROWS_WITH(s.quantize_input(1, x.data(), 1, q),
                      "input 1 is float32; pass float data directly");
    CHECK_THROWS_WITH(s.dequantize_output(0, q, 1, f),
                      "output 0 is float32; it needs no dequantization");
    q[0] = -1;
    s.dequantize_output(2, q, 1, f);  // the int8 output: (q - z) * s = (-1 + 3) * 0.1
    CHECK(f[0] == 0.1f * 2);
}

// A model of one matmul: int8 (spec 17) with these zero points and clamp, and a multiplier that
// keeps typical sums of random int8 inputs within about +-60 steps (so outputs are not all
// clamped), or float32 when `clamp` is empty.
ModelBuilder matmul_model(Shape a_dims, Shape b_dims, bool transpose_b, int32_t za, int32_t zb,
                          int32_t zy, std::vector<int64_t> clamp) {
    const size_t rank = a_dims.size();
    Shape y_dims(rank);
    for (size_t d = 0; d + 2 < rank; ++d) {
        y_dims[d] = std::max(a_dims[d], b_dims[d]);
    }
    y_dims[rank - 2] = a_dims[rank - 2];
    y_dims[rank - 1] = b_dims[transpose_b ? rank - 2 : rank - 1];
    std::vector<AttrSpec> attrs;
    ModelBuilder b;
    uint32_t a, c, y;
    if (clamp.empty()) {
        a = b.float_activation("a", a_dims);
        c = b.float_activation("b", b_dims);
        y = b.float_activation("y", y_dims);
    } else {
        a = b.activation("a", a_dims, 0.1f, za);
        c = b.activation("b", b_dims, 0.1f, zb);
        y = b.activation("y", y_dims, 0.1f, zy);
        // Random q - z has mean -0.5 - z and spread 74 around it.
        const double k = static_cast<double>(a_dims.back()), mean_a = -0.5 - za,
                     mean_b = -0.5 - zb;
        const double typical = std::sqrt(k) * std::hypot(74.0, mean_a) * std::hypot(74.0, mean_b) +
                               k * std::fabs(mean_a * mean_b);
        const qtk_test::Requant r = qtk_test::quantize_multiplier(60.0 / typical);
        attrs = {AttrSpec("multiplier", {r.multiplier}), AttrSpec("shift", {r.shift}),
                 AttrSpec("clamp", std::move(clamp))};
    }
    if (transpose_b) {
        attrs.push_back(AttrSpec("transpose_b", {1}));
    }
    b.node("matmul", "attn.matmul", {a, c}, {y}, std::move(attrs));
    b.inputs = {a, c};
    b.outputs = {y};
    return b;
}

// The model at its file's batch only, 1 and 2 threads, against the naive run (rank 2: both
// inputs' dim 0 is the batch, so their other dims fix it).
void check_model_at_file_batch(const std::string& name, const ModelBuilder& b) {
    std::printf("%s\n", name.c_str());
    const std::vector<uint8_t> bytes = b.build();
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    Rng rng(11);
    const std::vector<Naive> inputs = random_inputs(b, b.values[b.inputs[0]].dims[0], rng);
    const std::vector<Naive> expected = naive_run(b, inputs);
    for (int threads : {1, 2}) {
        qtk::Session session(model, {threads});
        const std::string difference = compare(session_run(session, inputs)[0], expected[0]);
        if (!difference.empty()) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     name + " (" + std::to_string(threads) + " threads): " +
                                         difference);
        }
    }
}

// int8 matmul (spec 17) against the naive sum over odd M, K and P (K around 32 and 64), ranks 3
// to 5 with dims of 1 broadcast on either side, transpose_b, zero points at -128 and 127, clamps;
// check_model runs batches 1 and 3 with 1 and 2 threads. Then rank 2, float32 transpose_b, the
// K bound at its edge, and hand-worked values.
void test_matmul_int8() {
    struct Shapes {
        Shape a, b;  // b as [..., K, P]; transposed below for transpose_b
    };
    const Shapes shapes[] = {
        {{1, 5, 7}, {1, 7, 3}},                // rank 3
        {{1, 1, 1}, {1, 1, 1}},                // M = K = P = 1
        {{1, 2, 9, 33}, {1, 2, 33, 5}},        // attention scores, K 33
        {{1, 3, 5, 7}, {1, 1, 7, 9}},          // b broadcast over the heads
        {{1, 1, 3, 65}, {1, 3, 65, 1}},        // a broadcast, K 65
        {{1, 2, 1, 3, 5}, {1, 1, 3, 5, 7}},    // rank 5, broadcast both ways
        {{1, 3, 1, 2, 17, 3}, {1, 1, 2, 1, 3, 15}},  // rank 6
        {{1, 1, 1, 1, 31}, {1, 1, 1, 31, 17}},       // rank 5 of ones
    };
    struct ZeroPoints {
        int32_t a, b, y;
        std::vector<int64_t> clamp;
    };
    const ZeroPoints zero_points[] = {
        {-128, 127, -128, {-128, 127}},
        {127, -128, 127, {-128, 127}},
        {0, 0, 0, {-50, 90}},
        {-7, 11, 3, {-128, 127}},
    };
    for (const Shapes& shape : shapes) {
        for (bool transpose_b : {false, true}) {
            Shape b_dims = shape.b;
            if (transpose_b) {
                std::swap(b_dims[b_dims.size() - 1], b_dims[b_dims.size() - 2]);
            }
            for (const ZeroPoints& z : zero_points) {
                check_model("int8 matmul " + qtk::to_string(shape.a) + " @ " +
                                qtk::to_string(b_dims) + (transpose_b ? " transpose_b" : "") +
                                " zero points " + std::to_string(z.a) + ", " +
                                std::to_string(z.b) + ", " + std::to_string(z.y),
                            matmul_model(shape.a, b_dims, transpose_b, z.a, z.b, z.y, z.clamp));
            }
        }
    }
    check_model_at_file_batch("int8 matmul rank 2 [5, 5] @ [5, 7]",
                              matmul_model({5, 5}, {5, 7}, false, -128, 127, 0, {-128, 127}));
    check_model_at_file_batch("int8 matmul rank 2 [5, 9] @ [5, 9]^T",
                              matmul_model({5, 9}, {5, 9}, true, 127, -3, 5, {-128, 127}));
    check_model("int8 attention model", qtk_test::int8_attention_model());

    check_model("float matmul transpose_b [N,2,5,3] @ [N,2,7,3]^T",
                matmul_model({1, 2, 5, 3}, {1, 2, 7, 3}, true, 0, 0, 0, {}));
    check_model("float matmul transpose_b broadcasting [N,1,5,3,4] @ [N,2,1,7,4]^T",
                matmul_model({1, 1, 5, 3, 4}, {1, 2, 1, 7, 4}, true, 0, 0, 0, {}));
    {
        Rng rng(5);
        ModelBuilder b;
        const uint32_t a = b.float_activation("a", {1, 5, 7});
        const uint32_t c = b.float_constant("b", {4, 7}, rng.floats(28, -1, 1));
        const uint32_t y = b.float_activation("y", {1, 5, 4});
        b.node("matmul", "mm", {a, c}, {y}, {AttrSpec("transpose_b", {1})});
        b.inputs = {a};
        b.outputs = {y};
        check_model("float matmul transpose_b by a constant [N,5,7] @ [4,7]^T", b);
    }

    // The K bound: K = 33025 products of 255 * (+-255) are +-2147450625, within int32: with
    // m = 2^-25 they requantize to +-64 (-63.9990... and 63.9990... round to -64 and 64).
    // K = 33026 is refused at load.
    const auto deep = [](int64_t k, int32_t zb) {
        ModelBuilder b;
        const uint32_t a = b.activation("a", {1, 1, k}, 0.1f, -128);
        const uint32_t c = b.activation("b", {1, 1, k}, 0.1f, zb);
        const uint32_t y = b.activation("y", {1, 1, 1}, 0.1f, 0);
        b.node("matmul", "deep", {a, c}, {y},
               {AttrSpec("multiplier", {1 << 30}), AttrSpec("shift", {55}),
                AttrSpec("clamp", {-128, 127}), AttrSpec("transpose_b", {1})});
        b.inputs = {a, c};
        b.outputs = {y};
        return b;
    };
    for (int32_t zb : {127, -128}) {
        const Naive a = int8_tensor({1, 1, 33025}, std::vector<double>(33025, 127));
        const Naive c =
            int8_tensor({1, 1, 33025}, std::vector<double>(33025, zb == 127 ? -128 : 127));
        CHECK(run_once(deep(33025, zb), {a, c})[0].v ==
              (std::vector<double>{zb == 127 ? -64.0 : 64.0}));
    }
    {
        const std::vector<uint8_t> bytes = deep(33026, 0).build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(bytes.data(), bytes.size()),
                          "node 'deep' (matmul): K = 33026 products of up to 255 * 255 could "
                          "overflow the int32 accumulator (K <= 33025");
    }

    // Hand-worked: a = [[1, 2], [3, 4]] (z 0), b - z_b = [[4, 5], [6, 7]] (z_b 1), m = 1:
    // [[16, 19], [36, 43]]; the same b stored transposed gives the same bytes; clamp at 40.
    for (bool transpose_b : {false, true}) {
        ModelBuilder b;
        const uint32_t a = b.activation("a", {1, 2, 2}, 0.5f, 0);
        const uint32_t c = b.activation("b", {1, 2, 2}, 0.25f, 1);
        const uint32_t y = b.activation("y", {1, 2, 2}, 0.125f, 0);
        std::vector<AttrSpec> attrs = {AttrSpec("multiplier", {1 << 30}), AttrSpec("shift", {30}),
                                       AttrSpec("clamp", {-128, 40})};
        if (transpose_b) {
            attrs.push_back(AttrSpec("transpose_b", {1}));
        }
        b.node("matmul", "mm", {a, c}, {y}, std::move(attrs));
        b.inputs = {a, c};
        b.outputs = {y};
        const std::vector<double> b_values =
            transpose_b ? std::vector<double>{5, 7, 6, 8} : std::vector<double>{5, 6, 7, 8};
        const Naive a_values = int8_tensor({1, 2, 2}, {1, 2, 3, 4});
        CHECK(run_once(b, {a_values, int8_tensor({1, 2, 2}, b_values)})[0].v ==
              (std::vector<double>{16, 19, 36, 40}));
    }
}

// One int8 softmax, layer_norm or group_norm node of x (x_scale, x_zero_point) into y.
ModelBuilder int8_norm_op_model(const std::string& op, Shape x_dims, int64_t axis_or_groups,
                                float x_scale, int32_t zx, int32_t zy, int64_t eps_term,
                                std::vector<int64_t> clamp) {
    ModelBuilder b;
    Rng rng(static_cast<uint64_t>(count_of(x_dims) * 131 + axis_or_groups));
    const uint32_t x = b.activation("x", x_dims, x_scale, zx);
    const uint32_t y =
        op == "softmax"
            ? qtk_test::add_int8_softmax(b, "y", x, axis_or_groups, 1.0f / 256, zy, clamp)
            : qtk_test::add_int8_norm(b, op, "y", x, axis_or_groups, eps_term, 0.05f, zy, rng,
                                      clamp);
    b.inputs = {x};
    b.outputs = {y};
    return b;
}

std::string norm_case_name(const std::string& op, const Shape& dims, int64_t axis_or_groups,
                           int32_t zx, int32_t zy) {
    return "int8 " + op + " " + qtk::to_string(dims) +
           (op == "softmax" ? " axis " : op == "layer_norm" ? " axes " : " groups ") +
           std::to_string(axis_or_groups) + " zero points " + std::to_string(zx) + ", " +
           std::to_string(zy);
}

// int8 softmax (spec 18), layer_norm and group_norm (spec 19) against the naive integer
// computation: odd row lengths, every axis, groups of one channel to all, zero points at -128
// and 127, scales whose tables hold many zeros, E from 1 (a constant row: V = E) to 2^61, clamps,
// zero weights (every fourth channel); check_model runs batches 1 and 3 with 1 and 2 threads.
// Then the row bounds at their edges and hand-worked values.
void test_norms_int8() {
    struct ZeroPoints {
        int32_t x, y;
        std::vector<int64_t> clamp;
    };
    const ZeroPoints zero_points[] = {
        {-128, 127, {-128, 127}}, {127, -128, {-128, 127}}, {3, -7, {-20, 90}}};
    struct Case {
        Shape dims;
        std::vector<int64_t> axes;  // softmax and layer_norm
        std::vector<int64_t> groups;
    };
    const Case cases[] = {
        {{1, 7}, {1}, {1, 7}},
        {{1, 1}, {1}, {1}},
        {{1, 5, 7}, {1, 2}, {1, 5}},
        {{1, 6, 3, 5}, {1, 2, 3}, {1, 2, 3, 6}},
        {{1, 4, 2, 3, 3}, {2, 4}, {2, 4}},
        {{1, 3, 67}, {2}, {3}},
    };
    for (const Case& c : cases) {
        for (const ZeroPoints& z : zero_points) {
            for (int64_t axis : c.axes) {
                for (float scale : {0.02f, 0.3f}) {
                    check_model(norm_case_name("softmax", c.dims, axis, z.x, z.y) + " scale " +
                                    std::to_string(scale),
                                int8_norm_op_model("softmax", c.dims, axis, scale, z.x, z.y, 0,
                                                   z.clamp));
                }
                for (int64_t eps_term : {int64_t{1}, int64_t{5000}, int64_t{1} << 61}) {
                    check_model(norm_case_name("layer_norm", c.dims, axis, z.x, z.y) + " E " +
                                    std::to_string(eps_term),
                                int8_norm_op_model("layer_norm", c.dims, axis, 0.1f, z.x, z.y,
                                                   eps_term, z.clamp));
                }
            }
            for (int64_t groups : c.groups) {
                for (int64_t eps_term : {int64_t{1}, int64_t{1} << 40}) {
                    check_model(norm_case_name("group_norm", c.dims, groups, z.x, z.y) + " E " +
                                    std::to_string(eps_term),
                                int8_norm_op_model("group_norm", c.dims, groups, 0.1f, z.x, z.y,
                                                   eps_term, z.clamp));
                }
            }
        }
    }
    check_model("int8 norms model (group_norm, layer_norm, softmax)", qtk_test::int8_norms_model());

    // Constant rows: V = E, n = 0, so t = 0 and each output is its channel's bias requantized.
    {
        const ModelBuilder b =
            int8_norm_op_model("layer_norm", {1, 9}, 1, 0.1f, 5, 0, 1, {-128, 127});
        const std::vector<Naive> got = run_once(b, {int8_tensor({1, 9}, std::vector<double>(9, 77))});
        CHECK(got[0].v == naive_run(b, {int8_tensor({1, 9}, std::vector<double>(9, 77))})[0].v);
    }

    // The row bounds: C = 2^14 loads (a row of -128 and 127 halves, the largest t), 2^14 + 1
    // does not; softmax rows of 2^20 values load, 2^20 + 1 do not.
    {
        const ModelBuilder b =
            int8_norm_op_model("layer_norm", {1, 16384}, 1, 0.1f, 0, 0, 1, {-128, 127});
        std::vector<double> v(16384, 127);
        std::fill(v.begin(), v.begin() + 8192, -128);
        v[0] = 127;  // one value far from the mean: |t| near 2^16 sqrt(C - 1)
        CHECK(run_once(b, {int8_tensor({1, 16384}, v)})[0].v ==
              naive_run(b, {int8_tensor({1, 16384}, v)})[0].v);
        const std::vector<uint8_t> too_long =
            int8_norm_op_model("layer_norm", {1, 2, 16385}, 1, 0.1f, 0, 0, 1, {-128, 127}).build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(too_long.data(), too_long.size()),
                          "node 'y' (layer_norm): rows of 16385 values are longer than 2^14");
        const std::vector<uint8_t> groups_too_long =
            int8_norm_op_model("group_norm", {1, 2, 8193}, 1, 0.1f, 0, 0, 1, {-128, 127}).build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(groups_too_long.data(), groups_too_long.size()),
                          "node 'y' (group_norm): rows of 16386 values are longer than 2^14");
        const std::vector<uint8_t> longest =
            int8_norm_op_model("softmax", {1, 1 << 20}, 1, 0.1f, 0, 0, 0, {-128, 127}).build();
        CHECK(qtk::Model::from_bytes(longest.data(), longest.size()) != nullptr);
        const std::vector<uint8_t> softmax_too_long =
            int8_norm_op_model("softmax", {1, 1, (1 << 20) + 1}, 2, 0.1f, 0, 0, 0, {-128, 127})
                .build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(softmax_too_long.data(), softmax_too_long.size()),
                          "node 'y' (softmax): rows of 1048577 values along axis 2 are longer "
                          "than 2^20");
    }

    // Hand-worked softmax: two equal values are 1/2 each, 128 steps of 1/256 above z = -128.
    {
        ModelBuilder b;
        const uint32_t x = b.activation("x", {1, 2}, 0.1f, 9);
        const uint32_t y = qtk_test::add_int8_softmax(b, "y", x, 1, 1.0f / 256, -128);
        b.inputs = {x};
        b.outputs = {y};
        CHECK(run_once(b, {int8_tensor({1, 2}, {-5, -5})})[0].v == (std::vector<double>{0, 0}));
    }
    // Hand-worked layer_norm: x = [1, -1], E = 1: V = 2 * 2 - 0 + 1 = 5, k = 29,
    // t = round(2^16 * 2 / sqrt 5) = +-58617; weight 1, bias 0, m = 2^-10: +-57.24 -> +-57.
    {
        ModelBuilder b;
        const uint32_t x = b.activation("x", {1, 2}, 0.1f, 0);
        const uint32_t w = b.weight("ln.weight", {2}, {1, 1});
        const uint32_t bias = b.bias("ln.bias", {2}, {0, 0});
        const uint32_t y = b.activation("y", {1, 2}, 0.1f, 0);
        b.node("layer_norm", "ln", {x, w, bias}, {y},
               {AttrSpec("axes", {1}), AttrSpec("eps_term", {1}),
                AttrSpec("multiplier", {1 << 30, 1 << 30}), AttrSpec("shift", {40, 40}),
                AttrSpec("clamp", {-128, 127})});
        b.inputs = {x};
        b.outputs = {y};
        CHECK(run_once(b, {int8_tensor({1, 2}, {1, -1})})[0].v == (std::vector<double>{57, -57}));
    }
}

// One int8 l2_normalize node (spec 19.1) of x (x_scale, zx) into y (y_scale, zy): (M, n) of
// 2^-16 / y_scale.
ModelBuilder int8_l2_normalize_model(Shape x_dims, int64_t axis, float x_scale, int32_t zx,
                                     float y_scale, int32_t zy, int64_t eps_term,
                                     std::vector<int64_t> clamp) {
    ModelBuilder b;
    const uint32_t x = b.activation("x", x_dims, x_scale, zx);
    const uint32_t y = b.activation("y", x_dims, y_scale, zy);
    const qtk_test::Requant m = qtk_test::quantize_multiplier(1.0 / (65536.0 * y_scale));
    b.node("l2_normalize", "y", {x}, {y},
           {AttrSpec("axis", {axis}), AttrSpec("eps_term", {eps_term}),
            AttrSpec("multiplier", {m.multiplier}), AttrSpec("shift", {m.shift}),
            AttrSpec("clamp", std::move(clamp))});
    b.inputs = {x};
    b.outputs = {y};
    return b;
}

// int8 l2_normalize (spec 19.1) against the naive integer computation: odd row lengths, every
// axis, zero points at -128 and 127 (output ones saturating half the values), E from 1 to 2^61
// (every row below eps), clamps; check_model runs batches 1 and 3 with 1 and 2 threads. Then
// inputs made of all-equal rows, all-zero rows and rows below eps, the loader's refusals and a
// hand-worked value.
void test_l2_normalize_int8() {
    struct ZeroPoints {
        int32_t x, y;
        std::vector<int64_t> clamp;
    };
    const ZeroPoints zero_points[] = {
        {-128, 127, {-128, 127}}, {127, -128, {-128, 127}}, {3, -7, {-20, 90}}, {0, 0, {-128, 127}}};
    struct Case {
        Shape dims;
        std::vector<int64_t> axes;
    };
    const Case cases[] = {
        {{1, 7}, {1}}, {{1, 1}, {1}}, {{1, 5, 7}, {1, 2}}, {{1, 6, 3, 5}, {1, 2, 3}},
        {{1, 4, 2, 3, 3}, {1, 2, 3, 4}}, {{1, 3, 67}, {1, 2}}, {{1, 301, 2}, {1}},
    };
    for (const Case& c : cases) {
        for (const ZeroPoints& z : zero_points) {
            for (int64_t axis : c.axes) {
                for (int64_t eps_term : {int64_t{1}, int64_t{5000}, int64_t{1} << 61}) {
                    check_model("int8 l2_normalize " + qtk::to_string(c.dims) + " axis " +
                                    std::to_string(axis) + " zero points " +
                                    std::to_string(z.x) + ", " + std::to_string(z.y) + " E " +
                                    std::to_string(eps_term),
                                int8_l2_normalize_model(c.dims, axis, 0.1f, z.x, 1.0f / 127, z.y,
                                                        eps_term, z.clamp));
                }
            }
        }
    }

    // Rows of all-equal values (t = +-2^16 / sqrt(L) each), all-zero rows (t = 0, y = z_y) and
    // rows below eps (S < E = 40: V = E), along each axis of [1, 5, 6, 7].
    for (const ZeroPoints& z : zero_points) {
        const Shape dims{1, 5, 6, 7};
        std::vector<double> v(static_cast<size_t>(count_of(dims)));
        Rng rng(static_cast<uint64_t>(z.x + 1000));
        for (size_t i = 0; i < v.size(); ++i) {
            const int64_t plane = static_cast<int64_t>(i) / 42, col = static_cast<int64_t>(i) % 7;
            const double value = plane == 0   ? z.x                                   // zero
                                 : plane == 1 ? (z.x > 0 ? -128.0 : 127.0)            // equal
                                 : col == 2   ? z.x + (static_cast<int64_t>(i) % 3) - 1  // small
                                              : rng.uniform(-128, 127);
            v[i] = std::min(127.0, std::max(-128.0, value));
        }
        for (int64_t axis : {1, 2, 3}) {
            for (int64_t eps_term : {int64_t{1}, int64_t{40}}) {
                const ModelBuilder b = int8_l2_normalize_model(dims, axis, 0.1f, z.x, 1.0f / 100,
                                                               z.y, eps_term, z.clamp);
                CHECK(run_once(b, {int8_tensor(dims, v)})[0].v ==
                      naive_run(b, {int8_tensor(dims, v)})[0].v);
            }
        }
    }

    // The loader's refusals: E outside [1, 2^61], a multiplier list of two, the batch axis.
    const auto refused = [](ModelBuilder b, const std::string& message) {
        const std::vector<uint8_t> bytes = b.build();
        CHECK_THROWS_WITH(qtk::Model::from_bytes(bytes.data(), bytes.size()), message);
    };
    for (int64_t eps_term : {int64_t{0}, (int64_t{1} << 61) + 1}) {
        refused(int8_l2_normalize_model({1, 4}, 1, 0.1f, 0, 1.0f / 127, 0, eps_term, {-128, 127}),
                "node 'y' (l2_normalize): attribute 'eps_term'");
    }
    refused(int8_l2_normalize_model({1, 4}, 0, 0.1f, 0, 1.0f / 127, 0, 1, {-128, 127}),
            "node 'y' (l2_normalize): attribute 'axis'");
    {
        ModelBuilder b = int8_l2_normalize_model({1, 4}, 1, 0.1f, 0, 1.0f / 127, 0, 1, {-128, 127});
        b.nodes[0].attrs[2] = AttrSpec("multiplier", {1 << 30, 1 << 30});
        refused(b, "node 'y' (l2_normalize): attribute 'multiplier'");
    }

    // Hand-worked: x = [3, -4], E = 1: S = V = 25, t = 2^16 * [3, -4] / 5 = [39321.6, -52428.8]
    // -> [39322, -52429]; y scale 1/100: [60.0, -80.0] -> [60, -80].
    {
        const ModelBuilder b =
            int8_l2_normalize_model({1, 2}, 1, 0.1f, 0, 1.0f / 100, 0, 1, {-128, 127});
        CHECK(run_once(b, {int8_tensor({1, 2}, {3, -4})})[0].v == (std::vector<double>{60, -80}));
    }
}

// float32 group_norm (torch's F.group_norm) and l2_normalize (F.normalize, p = 2) against the
// naive double computation.
void test_group_norm_and_l2_normalize_float() {
    Rng rng(19);
    const auto group_norm = [&](Shape x_dims, int64_t groups, float eps) {
        ModelBuilder b;
        const uint32_t x = b.float_activation("x", x_dims);
        const uint32_t w = b.float_constant("gn.weight", {x_dims[1]},
                                            rng.floats(static_cast<size_t>(x_dims[1]), -2, 2));
        const uint32_t bias = b.float_constant("gn.bias", {x_dims[1]},
                                               rng.floats(static_cast<size_t>(x_dims[1]), -1, 1));
        const uint32_t y = b.float_activation("y", x_dims);
        b.node("group_norm", "gn", {x, w, bias}, {y},
               {AttrSpec("groups", {groups}), float_attr("eps", {eps})});
        b.inputs = {x};
        b.outputs = {y};
        return b;
    };
    check_model("float group_norm [N,6,3,5] groups 3", group_norm({1, 6, 3, 5}, 3, 1e-5f));
    check_model("float group_norm [N,6,3,5] groups 1", group_norm({1, 6, 3, 5}, 1, 1e-5f));
    check_model("float group_norm [N,5,7] groups 5", group_norm({1, 5, 7}, 5, 1e-3f));
    check_model("float group_norm [N,4] groups 2", group_norm({1, 4}, 2, 1e-5f));
    check_model("float group_norm rank 5 [N,4,2,3,3] groups 2",
                group_norm({1, 4, 2, 3, 3}, 2, 1e-5f));
    for (int64_t axis : {1, 2, 3}) {
        check_model("float l2_normalize [N,3,4,5] axis " + std::to_string(axis),
                    float_op_model("l2_normalize", {1, 3, 4, 5}, {1, 3, 4, 5},
                                   {AttrSpec("axis", {axis}), float_attr("eps", {1e-12f})}));
    }
    check_model("float norms model (group_norm, l2_normalize)", qtk_test::float_norms_model());
    check_model("float l2_normalize [N,7] axis 1 eps 0.5",
                float_op_model("l2_normalize", {1, 7}, {1, 7},
                               {AttrSpec("axis", {1}), float_attr("eps", {0.5f})}));
    // Hand-worked: [3, 4] / 5; a zero lane is 0 / eps = 0.
    const ModelBuilder l2 = float_op_model("l2_normalize", {1, 2, 2}, {1, 2, 2},
                                           {AttrSpec("axis", {1}), float_attr("eps", {1e-12f})});
    CHECK(run_once(l2, {float_tensor({1, 2, 2}, {3, 0, 4, 0})})[0].v ==
          (std::vector<double>{0.6f, 0, 0.8f, 0}));
}

// Every index is visited exactly once, for any split; an exception in a task reaches the caller.
// Transposed convolution over strides, paddings, output paddings, dilations, groups, kernel and
// plane sizes around 1, both zero-point extremes and both dtypes, against the scatter above.
void test_conv_transpose2d() {
    Rng rng(41);
    int models = 0;
    for (int trial = 0; trial < 48; ++trial) {
        const int64_t groups = rng.uniform(1, 3);
        const int64_t cg = rng.uniform(1, 3), og = rng.uniform(1, 3);
        const int64_t kh = rng.uniform(1, 4), kw = rng.uniform(1, 4);
        const int64_t sh = rng.uniform(1, 3), sw = rng.uniform(1, 3);
        const int64_t dh = rng.uniform(1, 2), dw = rng.uniform(1, 2);
        const int64_t ph = rng.uniform(0, 2), pw = rng.uniform(0, 2);
        const int64_t oph = rng.uniform(0, std::max(sh, dh) - 1);
        const int64_t opw = rng.uniform(0, std::max(sw, dw) - 1);
        const int64_t h = rng.uniform(1, 6), w = rng.uniform(1, 7);
        const int64_t ho = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1;
        const int64_t wo = (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1;
        if (ho < 1 || wo < 1) {
            continue;
        }
        const bool float32 = trial % 3 == 2;
        const int32_t zero_point = trial % 3 == 0 ? -128 : 127;
        const Shape x_dims = {1, cg * groups, h, w}, w_dims = {og * groups, cg, kh, kw};
        const Shape y_dims = {1, og * groups, ho, wo};
        std::vector<AttrSpec> attrs = {
            AttrSpec("stride", {sh, sw}), AttrSpec("padding", {ph, pw}),
            AttrSpec("output_padding", {oph, opw}), AttrSpec("dilation", {dh, dw}),
            AttrSpec("groups", {groups})};
        ModelBuilder b;
        uint32_t x, wi, bi, y;
        const size_t o = static_cast<size_t>(w_dims[0]);
        if (float32) {
            x = b.float_activation("x", x_dims);
            wi = b.float_constant("up.weight", w_dims, rng.floats(count_of(w_dims), -1, 1));
            bi = b.float_constant("up.bias", {w_dims[0]}, rng.floats(o, -1, 1));
            y = b.float_activation("y", y_dims);
            if (trial % 2 == 0) {
                attrs.push_back(float_attr("bounds", {-0.5f, 1.0f}));
            }
        } else {
            x = b.activation("x", x_dims, 0.05f, zero_point);
            // Every other model's weights all zero in channel 0 (spec 4's zero channel).
            std::vector<int8_t> weights = qtk_test::random_weights(rng, count_of(w_dims));
            if (trial % 2 == 0) {
                std::fill(weights.begin(), weights.begin() + cg * kh * kw, int8_t{0});
            }
            wi = b.weight("up.weight", w_dims, weights);
            bi = b.bias("up.bias", {w_dims[0]}, qtk_test::random_bias(rng, o));
            y = b.activation("y", y_dims, 0.3f, -zero_point / 2);
            for (AttrSpec& a : qtk_test::requant_attrs(o, 0.05, 0.02, 0.3, -100, 120)) {
                attrs.push_back(a);
            }
        }
        b.node("conv_transpose2d", "up", {x, wi, bi}, {y}, attrs);
        b.inputs = {x};
        b.outputs = {y};
        check_model("conv_transpose2d " + std::string(float32 ? "float32" : "int8") + " x " +
                        qtk::to_string(x_dims) + " w " + qtk::to_string(w_dims) + " stride " +
                        std::to_string(sh) + "x" + std::to_string(sw) + " pad " +
                        std::to_string(ph) + "x" + std::to_string(pw) + " out_pad " +
                        std::to_string(oph) + "x" + std::to_string(opw) + " dilation " +
                        std::to_string(dh) + "x" + std::to_string(dw) + " groups " +
                        std::to_string(groups),
                    b);
        ++models;
    }
    CHECK(models >= 30);
}

// Reflect and replicate padding of odd planes, pads from 0 to the widest reflect allows, int8
// and float32; a file without `mode` is constant padding (test_data_movement).
void test_pad_modes() {
    for (int64_t mode : {1, 2}) {
        for (const Shape& plane : {Shape{1, 1}, Shape{2, 3}, Shape{5, 4}, Shape{3, 7}}) {
            const int64_t h = plane[0], w = plane[1];
            const int64_t most_h = mode == 1 ? h - 1 : h + 2, most_w = mode == 1 ? w - 1 : w + 2;
            const std::vector<int64_t> pads = {most_w, std::min<int64_t>(1, most_w), 0, most_h};
            const Shape x_dims = {1, 3, h, w};
            const Shape y_dims = {1, 3, h + pads[2] + pads[3], w + pads[0] + pads[1]};
            const std::vector<AttrSpec> attrs = {AttrSpec("pads", pads), AttrSpec("mode", {mode})};
            const std::string name = std::string(mode == 1 ? "reflect" : "replicate") +
                                     " pad of " + qtk::to_string(x_dims) + " by " +
                                     qtk::to_string(pads);
            check_model("int8 " + name, single_op_model("pad", x_dims, y_dims, attrs, 0.05f, -3));
            check_model("float " + name, float_op_model("pad", x_dims, y_dims, attrs));
        }
    }
}

// The table functions' float32 forms whose ops carry attributes.
void test_float_functions_with_attributes() {
    check_model("float leaky_relu", float_op_model("leaky_relu", {1, 3, 4, 5}, {1, 3, 4, 5},
                                                   {float_attr("alpha", {0.2f})}));
    check_model("float elu", float_op_model("elu", {1, 3, 4, 5}, {1, 3, 4, 5},
                                            {float_attr("alpha", {0.7f})}));
    check_model("float softplus", float_op_model("softplus", {1, 3, 4, 5}, {1, 3, 4, 5},
                                                 {float_attr("beta", {2.0f}),
                                                  float_attr("threshold", {1.5f})}));
}

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
    test_conv_transpose2d();
    test_pad_modes();
    test_float_functions_with_attributes();
    test_linear_and_flatten();
    test_linear_on_leading_dimensions();
    test_elementwise();
    test_concat();
    test_pooling();
    test_max_pool2d_ceil_mode();
    test_avg_pool2d_sweep();
    test_prelu();
    test_hand_worked();
    check_model("sample model (the first ops)", qtk_test::sample_model());
    test_mul();
    test_constant_arithmetic();
    test_lut();
    test_data_movement();
    test_resize_bilinear();
    test_global_avg_pool_keepdim();
    test_float_kernels();
    test_quantize_dequantize();
    test_hand_worked_new_ops();
    test_float_fallback_ops();
    test_hand_worked_float_fallback_ops();
    test_matmul_int8();
    test_norms_int8();
    test_l2_normalize_int8();
    test_group_norm_and_l2_normalize_float();
    check_model("int8 ops model (the newer int8 ops)", qtk_test::int8_ops_model());
    check_model("mixed-precision model (every float32 kernel)", qtk_test::mixed_model());
    test_session_errors();
    test_float_session_edges();
    return qtk_test::check_report();
}
