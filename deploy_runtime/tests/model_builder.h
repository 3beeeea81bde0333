// Test-only .qmodel writer, following docs/qmodel_format.md field by field. The records are plain
// structs so tests can break any of them before building (and patch header bytes after).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "crc32.h"

namespace qtk_test {

// Header field offsets.
constexpr size_t kVersionField = 8;
constexpr size_t kHeaderSizeField = 12;
constexpr size_t kFileSizeField = 16;
constexpr size_t kGraphOffsetField = 24;
constexpr size_t kGraphSizeField = 32;
constexpr size_t kBlobOffsetField = 40;
constexpr size_t kBlobSizeField = 48;
constexpr size_t kCrcField = 56;
constexpr size_t kReservedField = 60;

inline void put_u32(std::vector<uint8_t>& bytes, size_t offset, uint32_t v) {
    for (int i = 0; i < 4; ++i) {
        bytes[offset + i] = static_cast<uint8_t>(v >> (8 * i));
    }
}

inline void put_u64(std::vector<uint8_t>& bytes, size_t offset, uint64_t v) {
    for (int i = 0; i < 8; ++i) {
        bytes[offset + i] = static_cast<uint8_t>(v >> (8 * i));
    }
}

inline uint64_t get_u64(const std::vector<uint8_t>& bytes, size_t offset) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
        v |= uint64_t{bytes[offset + i]} << (8 * i);
    }
    return v;
}

// Makes file_size and graph_crc32 agree with the bytes again (after a test edited them), where the
// header is readable and the graph section lies inside the file.
inline void refresh_header(std::vector<uint8_t>& bytes) {
    if (bytes.size() < 64) {
        return;
    }
    put_u64(bytes, kFileSizeField, bytes.size());
    const uint64_t offset = get_u64(bytes, kGraphOffsetField);
    const uint64_t size = get_u64(bytes, kGraphSizeField);
    if (offset <= bytes.size() && size <= bytes.size() - offset) {
        put_u32(bytes, kCrcField,
                qtk::detail::crc32(bytes.data() + offset, static_cast<size_t>(size)));
    }
}

// splitmix64: the same numbers on every platform, unlike <random>'s distributions.
class Rng {
 public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
        return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
    }
    std::vector<int8_t> int8s(size_t n, int lo = -128, int hi = 127) {
        std::vector<int8_t> v(n);
        for (int8_t& x : v) {
            x = static_cast<int8_t>(uniform(lo, hi));
        }
        return v;
    }
    std::vector<float> floats(size_t n, double lo, double hi) {
        std::vector<float> v(n);
        for (float& x : v) {
            x = static_cast<float>(lo +
                                   (hi - lo) * std::ldexp(static_cast<double>(next() >> 11), -53));
        }
        return v;
    }

 private:
    uint64_t state_;
};

struct Requant {
    int32_t multiplier;
    int32_t shift;
};

// docs/quantization_spec.md section 2: (M, n) for a real multiplier m.
inline Requant quantize_multiplier(double m) {
    int e = 0;
    const double f = std::frexp(m, &e);
    int64_t mult = static_cast<int64_t>(std::nearbyint(f * 2147483648.0));
    if (mult == (int64_t{1} << 31)) {
        mult = int64_t{1} << 30;
        ++e;
    }
    const int shift = 31 - e;
    if (shift > 62) {
        return {0, 1};
    }
    return {static_cast<int32_t>(mult), shift};
}

// Section 3: multipliers for a rescaled sum of inputs with scales `in` into scale `out`.
inline std::pair<std::vector<int64_t>, int32_t> rescale_multipliers(const std::vector<double>& in,
                                                                    double out) {
    double largest = 0;
    for (double s : in) {
        largest = std::max(largest, s / out);
    }
    const int32_t shift = quantize_multiplier(largest).shift;
    std::vector<int64_t> mults;
    for (double s : in) {
        mults.push_back(static_cast<int64_t>(std::nearbyint(s / out * std::ldexp(1.0, shift))));
    }
    return {mults, shift};
}

struct ValueSpec {
    std::string name;
    uint8_t dtype = 1;  // 1 int8, 2 int32, 3 float32
    std::vector<int64_t> dims;
    float scale = 1.0f;
    int32_t zero_point = 0;
    bool constant = false;
    std::vector<uint8_t> data;  // constants: little-endian bytes
    // Malformed files: write these instead of the computed data_offset / data_size.
    bool override_data_offset = false;
    uint64_t data_offset = 0;
    bool override_data_size = false;
    uint64_t data_size = 0;
};

struct AttrSpec {
    AttrSpec(std::string k, std::vector<int64_t> values)
        : key(std::move(k)), ints(std::move(values)) {}
    std::string key;
    uint8_t kind = 1;  // 1 i64 list, 2 f32 list
    std::vector<int64_t> ints;
    std::vector<float> floats;
};

// An f32-list attribute (a constructor overload would make {1, 2} ambiguous).
inline AttrSpec float_attr(std::string key, std::vector<float> values) {
    AttrSpec a(std::move(key), {});
    a.kind = 2;
    a.floats = std::move(values);
    return a;
}

struct NodeSpec {
    std::string op;
    std::string name;
    std::vector<uint32_t> inputs;
    std::vector<uint32_t> outputs;
    std::vector<AttrSpec> attrs;
};

class ModelBuilder {
 public:
    std::string producer = "qtk-test 0.1";
    std::vector<ValueSpec> values;
    std::vector<uint32_t> inputs;
    std::vector<uint32_t> outputs;
    std::vector<NodeSpec> nodes;
    std::vector<uint8_t> graph_trailer;  // appended after the last node (malformed files)

    uint32_t activation(std::string name, std::vector<int64_t> dims, float scale,
                        int32_t zero_point) {
        ValueSpec v;
        v.name = std::move(name);
        v.dims = std::move(dims);
        v.scale = scale;
        v.zero_point = zero_point;
        return add(std::move(v));
    }

    // A float32 activation: not quantized, so scale and zero point are 0.
    uint32_t float_activation(std::string name, std::vector<int64_t> dims) {
        ValueSpec v;
        v.name = std::move(name);
        v.dtype = 3;
        v.dims = std::move(dims);
        v.scale = 0.0f;
        return add(std::move(v));
    }

    uint32_t float_constant(std::string name, std::vector<int64_t> dims,
                            const std::vector<float>& data) {
        ValueSpec v;
        v.name = std::move(name);
        v.dtype = 3;
        v.dims = std::move(dims);
        v.scale = 0.0f;
        v.constant = true;
        for (float x : data) {
            uint32_t bits;
            std::memcpy(&bits, &x, 4);
            for (int i = 0; i < 4; ++i) {
                v.data.push_back(static_cast<uint8_t>(bits >> (8 * i)));
            }
        }
        return add(std::move(v));
    }

    uint32_t weight(std::string name, std::vector<int64_t> dims, const std::vector<int8_t>& data) {
        ValueSpec v;
        v.name = std::move(name);
        v.dims = std::move(dims);
        v.constant = true;
        v.data.assign(data.begin(), data.end());
        return add(std::move(v));
    }

    uint32_t bias(std::string name, std::vector<int64_t> dims, const std::vector<int32_t>& data) {
        ValueSpec v;
        v.name = std::move(name);
        v.dtype = 2;
        v.dims = std::move(dims);
        v.constant = true;
        for (int32_t x : data) {
            for (int i = 0; i < 4; ++i) {
                v.data.push_back(static_cast<uint8_t>(static_cast<uint32_t>(x) >> (8 * i)));
            }
        }
        return add(std::move(v));
    }

    void node(std::string op, std::string name, std::vector<uint32_t> in, std::vector<uint32_t> out,
              std::vector<AttrSpec> attrs = {}) {
        nodes.push_back(NodeSpec{std::move(op), std::move(name), std::move(in), std::move(out),
                                 std::move(attrs)});
    }

    std::vector<uint8_t> build() const {
        // Blob layout first: each constant at the next 64-byte boundary.
        std::vector<uint64_t> offsets(values.size(), 0);
        uint64_t blob_size = 0;
        for (size_t i = 0; i < values.size(); ++i) {
            if (!values[i].constant) {
                continue;
            }
            offsets[i] = align64(blob_size);
            blob_size = offsets[i] + values[i].data.size();
        }

        std::vector<uint8_t> g;
        str(g, producer);
        u32(g, static_cast<uint32_t>(values.size()));
        for (size_t i = 0; i < values.size(); ++i) {
            const ValueSpec& v = values[i];
            str(g, v.name);
            g.push_back(v.dtype);
            g.push_back(static_cast<uint8_t>(v.dims.size()));
            for (int64_t d : v.dims) {
                u64(g, static_cast<uint64_t>(d));
            }
            uint32_t scale_bits;
            std::memcpy(&scale_bits, &v.scale, 4);
            u32(g, scale_bits);
            u32(g, static_cast<uint32_t>(v.zero_point));
            g.push_back(v.constant ? 1 : 0);
            if (v.constant) {
                u64(g, v.override_data_offset ? v.data_offset : offsets[i]);
                u64(g, v.override_data_size ? v.data_size : v.data.size());
            }
        }
        ids(g, inputs);
        ids(g, outputs);
        u32(g, static_cast<uint32_t>(nodes.size()));
        for (const NodeSpec& n : nodes) {
            str(g, n.op);
            str(g, n.name);
            ids(g, n.inputs);
            ids(g, n.outputs);
            u32(g, static_cast<uint32_t>(n.attrs.size()));
            for (const AttrSpec& a : n.attrs) {
                str(g, a.key);
                g.push_back(a.kind);
                if (a.kind == 2) {
                    u32(g, static_cast<uint32_t>(a.floats.size()));
                    for (float f : a.floats) {
                        uint32_t bits;
                        std::memcpy(&bits, &f, 4);
                        u32(g, bits);
                    }
                } else {
                    u32(g, static_cast<uint32_t>(a.ints.size()));
                    for (int64_t x : a.ints) {
                        u64(g, static_cast<uint64_t>(x));
                    }
                }
            }
        }
        g.insert(g.end(), graph_trailer.begin(), graph_trailer.end());

        const uint64_t blob_offset = align64(64 + g.size());
        std::vector<uint8_t> file(blob_offset + blob_size, 0);
        std::memcpy(file.data(), "QTKMODL\0", 8);
        put_u32(file, kVersionField, 1);
        put_u32(file, kHeaderSizeField, 64);
        put_u64(file, kGraphOffsetField, 64);
        put_u64(file, kGraphSizeField, g.size());
        put_u64(file, kBlobOffsetField, blob_offset);
        put_u64(file, kBlobSizeField, blob_size);
        std::memcpy(file.data() + 64, g.data(), g.size());
        for (size_t i = 0; i < values.size(); ++i) {
            if (values[i].constant && !values[i].data.empty()) {
                std::memcpy(file.data() + blob_offset + offsets[i], values[i].data.data(),
                            values[i].data.size());
            }
        }
        refresh_header(file);
        return file;
    }

 private:
    uint32_t add(ValueSpec v) {
        values.push_back(std::move(v));
        return static_cast<uint32_t>(values.size() - 1);
    }
    static uint64_t align64(uint64_t v) { return (v + 63) / 64 * 64; }
    static void u32(std::vector<uint8_t>& out, uint32_t v) {
        for (int i = 0; i < 4; ++i) {
            out.push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
    }
    static void u64(std::vector<uint8_t>& out, uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            out.push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
    }
    static void str(std::vector<uint8_t>& out, const std::string& s) {
        u32(out, static_cast<uint32_t>(s.size()));
        out.insert(out.end(), s.begin(), s.end());
    }
    static void ids(std::vector<uint8_t>& out, const std::vector<uint32_t>& v) {
        u32(out, static_cast<uint32_t>(v.size()));
        for (uint32_t id : v) {
            u32(out, id);
        }
    }
};

// Per-channel requantization attributes for a conv or linear with input scale `sx`, weight scale
// `sw` (every channel) and output scale `sy`.
inline std::vector<AttrSpec> requant_attrs(size_t channels, double sx, double sw, double sy,
                                           int64_t lo = -128, int64_t hi = 127) {
    std::vector<int64_t> mults, shifts;
    for (size_t c = 0; c < channels; ++c) {
        // Vary the scale per channel a little so per-channel indexing is exercised.
        const Requant r =
            quantize_multiplier(sx * sw * (1.0 + 0.125 * static_cast<double>(c % 3)) / sy);
        mults.push_back(r.multiplier);
        shifts.push_back(r.shift);
    }
    return {AttrSpec("multiplier", mults), AttrSpec("shift", shifts), AttrSpec("clamp", {lo, hi})};
}

// Narrow-range random weights.
inline std::vector<int8_t> random_weights(Rng& rng, size_t n) { return rng.int8s(n, -127, 127); }

inline std::vector<int32_t> random_bias(Rng& rng, size_t n) {
    std::vector<int32_t> b(n);
    for (int32_t& x : b) {
        x = static_cast<int32_t>(rng.uniform(-2000, 2000));
    }
    return b;
}

// Two graph inputs added with different scales (and a fused clamp): the smallest multi-input model.
inline ModelBuilder add_model(int64_t lo = -128, int64_t hi = 127) {
    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, 3, 4, 4}, 0.1f, 5);
    const uint32_t y = b.activation("y", {1, 3, 4, 4}, 0.3f, -20);
    const uint32_t sum = b.activation("sum", {1, 3, 4, 4}, 0.25f, 0);
    const auto m = rescale_multipliers({0.1, 0.3}, 0.25);
    b.node("add", "add", {x, y}, {sum},
           {AttrSpec("multiplier", m.first), AttrSpec("shift", {m.second}),
            AttrSpec("clamp", {lo, hi})});
    b.inputs = {x, y};
    b.outputs = {sum};
    return b;
}

// A uint8 image [N, 6, 8, 3] -> image_to_int8 (bilinear to 5x7, the 3x4 crop at (1, 2), BGR to
// RGB) -> x [N, 3, 3, 4] -> clamp: the image input for the fuzz driver and qtk_run.
inline ModelBuilder image_model() {
    ModelBuilder b;
    const uint32_t image = b.activation("image", {1, 6, 8, 3}, 0.0f, 0);
    b.values[image].dtype = 6;  // uint8
    std::vector<int8_t> table;
    for (int c = 0; c < 3; ++c) {
        for (int p = 0; p < 256; ++p) {
            table.push_back(static_cast<int8_t>((p >> 1) - 64 + 10 * c));
        }
    }
    const uint32_t t = b.weight("image.table", {3, 256}, table);
    const uint32_t x = b.activation("x", {1, 3, 3, 4}, 0.02f, -3);
    const uint32_t y = b.activation("y", {1, 3, 3, 4}, 0.02f, -3);
    b.node("image_to_int8", "image", {image, t}, {x},
           {AttrSpec("size", {5, 7}), AttrSpec("interpolation", {1}),
            AttrSpec("crop", {1, 2, 3, 4}), AttrSpec("channels", {2, 1, 0})});
    b.node("clamp", "relu", {x}, {y}, {AttrSpec("clamp", {-3, 127})});
    b.inputs = {image};
    b.outputs = {y};
    return b;
}

// A small model that uses every op, for the loader, fuzz and memory-plan tests:
// x -> conv(relu) -> a -> clamp -> b; add(a, b) -> c; concat(c, a) -> d; max_pool(d) -> e;
// avg_pool(d) -> f; add(e, f) -> g; grouped strided conv(g) -> h; global_avg_pool -> i;
// flatten -> j; linear -> out. Outputs: out and e.
inline ModelBuilder sample_model() {
    ModelBuilder b;
    Rng rng(42);
    const uint32_t x = b.activation("x", {1, 2, 6, 6}, 0.05f, 3);
    const uint32_t w1 = b.weight("conv1.weight", {4, 2, 3, 3}, random_weights(rng, 72));
    const uint32_t b1 = b.bias("conv1.bias", {4}, random_bias(rng, 4));
    const uint32_t a = b.activation("a", {1, 4, 6, 6}, 0.1f, -5);
    std::vector<AttrSpec> conv1 = requant_attrs(4, 0.05, 0.01, 0.1, -5, 127);
    conv1.insert(conv1.begin(), {AttrSpec("stride", {1, 1}), AttrSpec("padding", {1, 1}),
                                 AttrSpec("dilation", {1, 1}), AttrSpec("groups", {1})});
    b.node("conv2d", "conv1", {x, w1, b1}, {a}, conv1);

    const uint32_t c_b = b.activation("b", {1, 4, 6, 6}, 0.1f, -5);
    b.node("clamp", "relu6", {a}, {c_b}, {AttrSpec("clamp", {-5, 55})});

    const uint32_t c = b.activation("c", {1, 4, 6, 6}, 0.15f, 0);
    auto add1 = rescale_multipliers({0.1, 0.1}, 0.15);
    b.node("add", "add1", {a, c_b}, {c},
           {AttrSpec("multiplier", add1.first), AttrSpec("shift", {add1.second}),
            AttrSpec("clamp", {-128, 127})});

    const uint32_t d = b.activation("d", {1, 8, 6, 6}, 0.15f, 0);
    const Requant same = {1 << 30, 30};
    const Requant from_a = quantize_multiplier(0.1 / 0.15);
    b.node("concat", "cat", {c, a}, {d},
           {AttrSpec("axis", {1}), AttrSpec("multiplier", {same.multiplier, from_a.multiplier}),
            AttrSpec("shift", {same.shift, from_a.shift})});

    const uint32_t e = b.activation("e", {1, 8, 3, 3}, 0.15f, 0);
    b.node("max_pool2d", "maxpool", {d}, {e},
           {AttrSpec("kernel", {2, 2}), AttrSpec("stride", {2, 2}), AttrSpec("padding", {0, 0}),
            AttrSpec("dilation", {1, 1})});
    const uint32_t f = b.activation("f", {1, 8, 3, 3}, 0.15f, 0);
    b.node("avg_pool2d", "avgpool", {d}, {f},
           {AttrSpec("kernel", {3, 3}), AttrSpec("stride", {2, 2}), AttrSpec("padding", {1, 1}),
            AttrSpec("count_include_pad", {0})});

    const uint32_t g = b.activation("g", {1, 8, 3, 3}, 0.2f, 1);
    auto add2 = rescale_multipliers({0.15, 0.15}, 0.2);
    b.node("add", "add2", {e, f}, {g},
           {AttrSpec("multiplier", add2.first), AttrSpec("shift", {add2.second}),
            AttrSpec("clamp", {-128, 127})});

    const uint32_t w2 = b.weight("conv2.weight", {8, 2, 2, 2}, random_weights(rng, 64));
    const uint32_t b2 = b.bias("conv2.bias", {8}, random_bias(rng, 8));
    const uint32_t h = b.activation("h", {1, 8, 2, 2}, 0.1f, 2);
    std::vector<AttrSpec> conv2 = requant_attrs(8, 0.2, 0.01, 0.1);
    conv2.insert(conv2.begin(), {AttrSpec("stride", {2, 2}), AttrSpec("padding", {1, 1}),
                                 AttrSpec("dilation", {1, 1}), AttrSpec("groups", {4})});
    b.node("conv2d", "conv2", {g, w2, b2}, {h}, conv2);

    const uint32_t i = b.activation("i", {1, 8, 1, 1}, 0.1f, 2);
    b.node("global_avg_pool2d", "gap", {h}, {i});
    const uint32_t j = b.activation("j", {1, 8}, 0.1f, 2);
    b.node("flatten", "flatten", {i}, {j});

    const uint32_t w3 = b.weight("fc.weight", {3, 8}, random_weights(rng, 24));
    const uint32_t b3 = b.bias("fc.bias", {3}, random_bias(rng, 3));
    const uint32_t out = b.activation("out", {1, 3}, 0.3f, -1);
    b.node("linear", "fc", {j, w3, b3}, {out}, requant_attrs(3, 0.1, 0.02, 0.3));

    b.inputs = {x};
    b.outputs = {out, e};
    return b;
}

// The int8 ops beyond sample_model, for the loader, fuzz and kernel tests:
// x -> reshape [N,2,2,6,5] -> permute [0,2,1,3,4] -> reshape [N,4,6,5]: shuffled (channel
// shuffle); global_avg_pool2d -> pooled; lut -> gate; mul(shuffled, gate) -> m (broadcast);
// pad(m, value 7) -> padded; split(padded, axis 1, [1, 2, 1]) -> s0, s1, s2;
// resize_nearest(s1) -> near; resize_bilinear(s0) -> bilinear; global_avg_pool2d(s2, keepdim 0)
// -> g. Outputs: near, bilinear, g.
inline ModelBuilder int8_ops_model() {
    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, 4, 6, 5}, 0.1f, 3);
    const uint32_t grouped = b.activation("grouped", {1, 2, 2, 6, 5}, 0.1f, 3);
    b.node("reshape", "shuffle.view", {x}, {grouped}, {AttrSpec("shape", {2, 2, 6, 5})});
    const uint32_t swapped = b.activation("swapped", {1, 2, 2, 6, 5}, 0.1f, 3);
    b.node("permute", "shuffle.transpose", {grouped}, {swapped},
           {AttrSpec("perm", {0, 2, 1, 3, 4})});
    const uint32_t shuffled = b.activation("shuffled", {1, 4, 6, 5}, 0.1f, 3);
    b.node("reshape", "shuffle.merge", {swapped}, {shuffled}, {AttrSpec("shape", {-1, 6, 5})});

    const uint32_t pooled = b.activation("pooled", {1, 4, 1, 1}, 0.1f, 3);
    b.node("global_avg_pool2d", "se.pool", {shuffled}, {pooled}, {AttrSpec("keepdim", {1})});
    // A sigmoid table (spec 10) into (1/256, -128).
    std::vector<int8_t> table(256);
    for (int q = -128; q <= 127; ++q) {
        const double real = 1.0 / (1.0 + std::exp(-0.1 * (q - 3)));
        table[q + 128] = static_cast<int8_t>(
            std::min(127.0, std::max(-128.0, std::nearbyint(real * 256.0) - 128.0)));
    }
    const uint32_t lut = b.weight("se.gate.table", {256}, table);
    const uint32_t gate = b.activation("gate", {1, 4, 1, 1}, 1.0f / 256.0f, -128);
    b.node("lut", "se.gate", {pooled, lut}, {gate});
    const uint32_t m = b.activation("m", {1, 4, 6, 5}, 0.05f, -2);
    const Requant mul = quantize_multiplier(0.1 * (1.0 / 256.0) / 0.05);
    b.node("mul", "se.mul", {shuffled, gate}, {m},
           {AttrSpec("multiplier", {mul.multiplier}), AttrSpec("shift", {mul.shift}),
            AttrSpec("clamp", {-128, 127})});

    const uint32_t padded = b.activation("padded", {1, 4, 9, 6}, 0.05f, -2);
    b.node("pad", "pad", {m}, {padded}, {AttrSpec("pads", {1, 0, 2, 1}), AttrSpec("value", {7})});
    const uint32_t s0 = b.activation("s0", {1, 1, 9, 6}, 0.05f, -2);
    const uint32_t s1 = b.activation("s1", {1, 2, 9, 6}, 0.05f, -2);
    const uint32_t s2 = b.activation("s2", {1, 1, 9, 6}, 0.05f, -2);
    b.node("split", "split", {padded}, {s0, s1, s2},
           {AttrSpec("axis", {1}), AttrSpec("sizes", {1, 2, 1})});

    const uint32_t near = b.activation("near", {1, 2, 4, 3}, 0.05f, -2);
    b.node("resize_nearest", "up.nearest", {s1}, {near},
           {AttrSpec("index_h", {0, 0, 4, 8}), AttrSpec("index_w", {5, 3, 0})});
    const uint32_t bilinear = b.activation("bilinear", {1, 1, 3, 4}, 0.04f, 1);
    const Requant bl = quantize_multiplier(0.05 / (0.04 * 1048576.0));
    b.node("resize_bilinear", "up.bilinear", {s0}, {bilinear},
           {AttrSpec("h0", {0, 3, 7}), AttrSpec("h1", {1, 4, 8}),
            AttrSpec("h_weight", {0, 512, 1024}), AttrSpec("w0", {0, 1, 3, 5}),
            AttrSpec("w1", {1, 2, 4, 5}), AttrSpec("w_weight", {0, 1024, 333, 700}),
            AttrSpec("multiplier", {bl.multiplier}), AttrSpec("shift", {bl.shift})});
    const uint32_t g = b.activation("g", {1, 1}, 0.05f, -2);
    b.node("global_avg_pool2d", "head.pool", {s2}, {g}, {AttrSpec("keepdim", {0})});

    b.inputs = {x};
    b.outputs = {near, bilinear, g};
    return b;
}

// A mixed-precision model using every float32 kernel, quantize and dequantize:
// x (float) -> quantize -> q -> int8 conv -> c -> dequantize -> f1;
// y (float) -> grouped float conv (bounds) -> hardswish -> f3; add(f1, f3) -> f4;
// sigmoid(global_avg_pool2d(f4)) -> gate; mul(f4, gate) -> f5; concat(f5, f1) -> f6;
// hardsigmoid(clamp(f6)) -> f8; max_pool2d(f8) -> f9; avg_pool2d(f6) -> f10;
// add(f9, f10, bounds) -> f11; reshape/permute/reshape (channel shuffle) -> f14; pad -> f15;
// resize_nearest -> f16; split(axis 2) -> f17, f18; global_avg_pool2d(f18, keepdim 0) -> pooled;
// flatten(f17) -> flat; linear (bounds) -> out. Outputs: out, pooled (float32), c (int8).
// Quantize reads a graph input only, so the int8 part is exact against a naive interpreter.
inline ModelBuilder mixed_model() {
    ModelBuilder b;
    Rng rng(99);
    const uint32_t x = b.float_activation("x", {1, 3, 6, 6});
    const uint32_t y = b.float_activation("y", {1, 4, 3, 3});
    const uint32_t q = b.activation("q", {1, 3, 6, 6}, 0.05f, 10);
    b.node("quantize", "quant", {x}, {q});
    const uint32_t w1 = b.weight("conv.weight", {4, 3, 3, 3}, random_weights(rng, 108));
    const uint32_t b1 = b.bias("conv.bias", {4}, random_bias(rng, 4));
    const uint32_t c = b.activation("c", {1, 4, 3, 3}, 0.1f, -3);
    std::vector<AttrSpec> conv = requant_attrs(4, 0.05, 0.01, 0.1);
    conv.insert(conv.begin(), {AttrSpec("stride", {2, 2}), AttrSpec("padding", {1, 1}),
                               AttrSpec("dilation", {1, 1}), AttrSpec("groups", {1})});
    b.node("conv2d", "conv", {q, w1, b1}, {c}, conv);
    const uint32_t f1 = b.float_activation("f1", {1, 4, 3, 3});
    b.node("dequantize", "dequant", {c}, {f1});

    const uint32_t w2 = b.float_constant("fconv.weight", {4, 2, 3, 1}, rng.floats(24, -1, 1));
    const uint32_t b2 = b.float_constant("fconv.bias", {4}, rng.floats(4, -0.5, 0.5));
    const uint32_t f2 = b.float_activation("f2", {1, 4, 3, 3});
    b.node("conv2d", "fconv", {y, w2, b2}, {f2},
           {AttrSpec("stride", {1, 1}), AttrSpec("padding", {1, 0}), AttrSpec("dilation", {1, 1}),
            AttrSpec("groups", {2}), float_attr("bounds", {0.0f, 6.0f})});
    const uint32_t f3 = b.float_activation("f3", {1, 4, 3, 3});
    b.node("hardswish", "fconv.act", {f2}, {f3});
    const uint32_t f4 = b.float_activation("f4", {1, 4, 3, 3});
    b.node("add", "residual", {f1, f3}, {f4});

    const uint32_t pooled4 = b.float_activation("pooled4", {1, 4, 1, 1});
    b.node("global_avg_pool2d", "se.pool", {f4}, {pooled4});
    const uint32_t gate = b.float_activation("gate", {1, 4, 1, 1});
    b.node("sigmoid", "se.gate", {pooled4}, {gate});
    const uint32_t f5 = b.float_activation("f5", {1, 4, 3, 3});
    b.node("mul", "se.mul", {f4, gate}, {f5});
    const uint32_t f6 = b.float_activation("f6", {1, 8, 3, 3});
    b.node("concat", "cat", {f5, f1}, {f6}, {AttrSpec("axis", {1})});
    const uint32_t f7 = b.float_activation("f7", {1, 8, 3, 3});
    b.node("clamp", "hardtanh", {f6}, {f7}, {float_attr("bounds", {-1.0f, 3.0f})});
    const uint32_t f8 = b.float_activation("f8", {1, 8, 3, 3});
    b.node("hardsigmoid", "hsig", {f7}, {f8});
    const uint32_t f9 = b.float_activation("f9", {1, 8, 2, 2});
    b.node("max_pool2d", "maxpool", {f8}, {f9},
           {AttrSpec("kernel", {2, 2}), AttrSpec("stride", {1, 1}), AttrSpec("padding", {0, 0}),
            AttrSpec("dilation", {1, 1})});
    const uint32_t f10 = b.float_activation("f10", {1, 8, 2, 2});
    b.node("avg_pool2d", "avgpool", {f6}, {f10},
           {AttrSpec("kernel", {3, 3}), AttrSpec("stride", {2, 2}), AttrSpec("padding", {1, 1}),
            AttrSpec("count_include_pad", {1})});
    const uint32_t f11 = b.float_activation("f11", {1, 8, 2, 2});
    b.node("add", "add2", {f9, f10}, {f11}, {float_attr("bounds", {-0.5f, 2.0f})});

    const uint32_t f12 = b.float_activation("f12", {1, 2, 4, 2, 2});
    b.node("reshape", "shuffle.view", {f11}, {f12}, {AttrSpec("shape", {2, -1, 2, 2})});
    const uint32_t f13 = b.float_activation("f13", {1, 4, 2, 2, 2});
    b.node("permute", "shuffle.transpose", {f12}, {f13}, {AttrSpec("perm", {0, 2, 1, 3, 4})});
    const uint32_t f14 = b.float_activation("f14", {1, 8, 2, 2});
    b.node("reshape", "shuffle.merge", {f13}, {f14}, {AttrSpec("shape", {8, 2, 2})});
    const uint32_t f15 = b.float_activation("f15", {1, 8, 4, 4});
    b.node("pad", "pad", {f14}, {f15},
           {AttrSpec("pads", {1, 1, 0, 2}), float_attr("value", {-0.5f})});
    const uint32_t f16 = b.float_activation("f16", {1, 8, 5, 3});
    b.node("resize_nearest", "up", {f15}, {f16},
           {AttrSpec("index_h", {0, 1, 1, 3, 3}), AttrSpec("index_w", {0, 2, 3})});
    const uint32_t f17 = b.float_activation("f17", {1, 8, 2, 3});
    const uint32_t f18 = b.float_activation("f18", {1, 8, 3, 3});
    b.node("split", "split", {f16}, {f17, f18}, {AttrSpec("axis", {2}), AttrSpec("sizes", {2, 3})});
    const uint32_t pooled = b.float_activation("pooled", {1, 8});
    b.node("global_avg_pool2d", "head.pool", {f18}, {pooled}, {AttrSpec("keepdim", {0})});
    const uint32_t flat = b.float_activation("flat", {1, 48});
    b.node("flatten", "flatten", {f17}, {flat});
    const uint32_t w3 = b.float_constant("fc.weight", {5, 48}, rng.floats(240, -0.3, 0.3));
    const uint32_t b3 = b.float_constant("fc.bias", {5}, rng.floats(5, -0.1, 0.1));
    const uint32_t out = b.float_activation("out", {1, 5});
    b.node("linear", "fc", {flat, w3, b3}, {out}, {float_attr("bounds", {-1.0f, 1.0f})});

    b.inputs = {x, y};
    b.outputs = {out, pooled, c};
    return b;
}

// The float fallback ops of a transformer (a ViT's front, one attention head pair and its class
// token), plus float32 resize_bilinear and int8 slice, for the kernel, loader and fuzz tests:
// x [N, 4, 6] (float tokens); quantize(x) -> q8; expand_batch(cls token [1, 1, 6], x) -> cls;
// concat(cls, x) -> seq; add(seq, position embedding [1, 5, 6]) -> h; layer_norm(h) -> ln;
// matmul(ln, wq / wk / wv [6, 6]) -> q, k, v; reshape/permute into heads qh [N, 2, 5, 3],
// kt [N, 2, 3, 5], vh; matmul(qh, kt) -> s; mul(s, scale [1, 1, 1, 1]) -> ss;
// softmax(ss, axis 3) -> p; matmul(p, vh) -> o; permute/reshape -> merged [N, 5, 6];
// sub(h, merged) -> r; div(r, [1, 1, 6]) -> d; slice(d, token 0) -> cls_out [N, 1, 6].
// img [N, 2, 3, 4] (float) -> resize_bilinear -> up [N, 2, 5, 7]. slice(q8) -> q8s [N, 2, 3]
// (int8).
// Outputs: cls_out, up, q8s.
inline ModelBuilder transformer_model() {
    ModelBuilder b;
    Rng rng(77);
    const uint32_t x = b.float_activation("x", {1, 4, 6});
    const uint32_t q8 = b.activation("q8", {1, 4, 6}, 0.05f, 3);
    b.node("quantize", "quant", {x}, {q8});
    const uint32_t token = b.float_constant("cls_token", {1, 1, 6}, rng.floats(6, -1, 1));
    const uint32_t cls = b.float_activation("cls", {1, 1, 6});
    b.node("expand_batch", "cls.expand", {token, x}, {cls});
    const uint32_t seq = b.float_activation("seq", {1, 5, 6});
    b.node("concat", "cat", {cls, x}, {seq}, {AttrSpec("axis", {1})});
    const uint32_t pos = b.float_constant("pos_embedding", {1, 5, 6}, rng.floats(30, -1, 1));
    const uint32_t h = b.float_activation("h", {1, 5, 6});
    b.node("add", "pos.add", {seq, pos}, {h});
    const uint32_t ln_w = b.float_constant("ln.weight", {6}, rng.floats(6, 0.5, 1.5));
    const uint32_t ln_b = b.float_constant("ln.bias", {6}, rng.floats(6, -0.5, 0.5));
    const uint32_t ln = b.float_activation("ln", {1, 5, 6});
    b.node("layer_norm", "ln", {h, ln_w, ln_b}, {ln},
           {AttrSpec("axes", {1}), float_attr("eps", {1e-5f})});

    const auto heads = [&](const std::string& name, std::vector<int64_t> perm,
                           std::vector<int64_t> dims) {
        const uint32_t w = b.float_constant(name + ".weight", {6, 6}, rng.floats(36, -1, 1));
        const uint32_t projected = b.float_activation(name, {1, 5, 6});
        b.node("matmul", name, {ln, w}, {projected});
        const uint32_t split = b.float_activation(name + ".split", {1, 5, 2, 3});
        b.node("reshape", name + ".view", {projected}, {split}, {AttrSpec("shape", {5, 2, 3})});
        const uint32_t out = b.float_activation(name + ".heads", dims);
        b.node("permute", name + ".permute", {split}, {out}, {AttrSpec("perm", perm)});
        return out;
    };
    const uint32_t qh = heads("q", {0, 2, 1, 3}, {1, 2, 5, 3});
    const uint32_t kt = heads("k", {0, 2, 3, 1}, {1, 2, 3, 5});
    const uint32_t vh = heads("v", {0, 2, 1, 3}, {1, 2, 5, 3});
    const uint32_t s = b.float_activation("s", {1, 2, 5, 5});
    b.node("matmul", "attn.scores", {qh, kt}, {s});
    const uint32_t scale = b.float_constant("attn.scale", {1, 1, 1, 1}, {0.57735f});
    const uint32_t ss = b.float_activation("ss", {1, 2, 5, 5});
    b.node("mul", "attn.scale", {s, scale}, {ss});
    const uint32_t p = b.float_activation("p", {1, 2, 5, 5});
    b.node("softmax", "attn.softmax", {ss}, {p}, {AttrSpec("axis", {3})});
    const uint32_t o = b.float_activation("o", {1, 2, 5, 3});
    b.node("matmul", "attn.values", {p, vh}, {o});
    const uint32_t ot = b.float_activation("o.t", {1, 5, 2, 3});
    b.node("permute", "attn.merge.permute", {o}, {ot}, {AttrSpec("perm", {0, 2, 1, 3})});
    const uint32_t merged = b.float_activation("merged", {1, 5, 6});
    b.node("reshape", "attn.merge.view", {ot}, {merged}, {AttrSpec("shape", {5, 6})});
    const uint32_t r = b.float_activation("r", {1, 5, 6});
    b.node("sub", "residual.sub", {h, merged}, {r}, {float_attr("bounds", {-3.0f, 3.0f})});
    const uint32_t divisor = b.float_constant("divisor", {1, 1, 6}, rng.floats(6, 0.5, 2));
    const uint32_t d = b.float_activation("d", {1, 5, 6});
    b.node("div", "norm.div", {r, divisor}, {d});
    const uint32_t cls_out = b.float_activation("cls_out", {1, 1, 6});
    b.node("slice", "head.token", {d}, {cls_out},
           {AttrSpec("starts", {0, 0}), AttrSpec("ends", {1, 6}), AttrSpec("steps", {1, 1})});

    const uint32_t img = b.float_activation("img", {1, 2, 3, 4});
    const uint32_t up = b.float_activation("up", {1, 2, 5, 7});
    // torch's align_corners=False fractions for 3 -> 5 rows and 4 -> 7 columns, plus 0 and 1.
    b.node("resize_bilinear", "up", {img}, {up},
           {AttrSpec("h0", {0, 0, 1, 1, 2}), AttrSpec("h1", {1, 1, 2, 2, 2}),
            float_attr("h_weight", {0.0f, 0.7f, 0.3f, 1.0f, 0.0f}),
            AttrSpec("w0", {0, 0, 0, 1, 2, 2, 3}), AttrSpec("w1", {1, 1, 1, 2, 3, 3, 3}),
            float_attr("w_weight", {0.0f, 0.2857143f, 0.8571429f, 0.4285714f, 0.0f, 1.0f, 0.0f})});

    const uint32_t q8s = b.activation("q8s", {1, 2, 3}, 0.05f, 3);
    b.node("slice", "q8.slice", {q8}, {q8s},
           {AttrSpec("starts", {1, 1}), AttrSpec("ends", {4, 6}), AttrSpec("steps", {2, 2})});

    b.inputs = {x, img};
    b.outputs = {cls_out, up, q8s};
    return b;
}

// int8 attention (docs/quantization_spec.md section 17), for the kernel, loader and fuzz tests:
// q, k, v int8 [N, 2, 5, 3]; matmul(q, k, transpose_b) -> s [N, 2, 5, 5];
// matmul(s, v) -> o [N, 2, 5, 3]. Outputs: s, o.
inline ModelBuilder int8_attention_model() {
    ModelBuilder b;
    const uint32_t q = b.activation("q", {1, 2, 5, 3}, 0.04f, -7);
    const uint32_t k = b.activation("k", {1, 2, 5, 3}, 0.05f, 11);
    const uint32_t v = b.activation("v", {1, 2, 5, 3}, 0.03f, 0);
    const uint32_t s = b.activation("s", {1, 2, 5, 5}, 0.3f, -20);
    const Requant scores = quantize_multiplier(0.04 * 0.05 / 0.3);
    b.node("matmul", "attn.scores", {q, k}, {s},
           {AttrSpec("multiplier", {scores.multiplier}), AttrSpec("shift", {scores.shift}),
            AttrSpec("clamp", {-128, 127}), AttrSpec("transpose_b", {1})});
    const uint32_t o = b.activation("o", {1, 2, 5, 3}, 1.0f, 5);
    const Requant values = quantize_multiplier(0.3 * 0.03 / 1.0);
    b.node("matmul", "attn.values", {s, v}, {o},
           {AttrSpec("multiplier", {values.multiplier}), AttrSpec("shift", {values.shift}),
            AttrSpec("clamp", {-100, 120})});
    b.inputs = {q, k, v};
    b.outputs = {s, o};
    return b;
}

// Spec 18's table T[d] = round(2^20 exp(-s d)), as convert computes it.
inline std::vector<int32_t> softmax_table(double input_scale) {
    std::vector<int32_t> t(256);
    for (int d = 0; d < 256; ++d) {
        t[d] = static_cast<int32_t>(std::nearbyint(std::ldexp(std::exp(-input_scale * d), 20)));
    }
    return t;
}

// An int8 softmax (spec 18) of activation x along `axis` into a new activation `name` with
// (y_scale, y_zero_point): the table of x's scale, A = round(2^16 / y_scale).
inline uint32_t add_int8_softmax(ModelBuilder& b, const std::string& name, uint32_t x,
                                 int64_t axis, float y_scale, int32_t y_zero_point,
                                 std::vector<int64_t> clamp = {-128, 127}) {
    const std::vector<int64_t> dims = b.values[x].dims;
    const uint32_t table = b.bias(name + ".table", {256}, softmax_table(b.values[x].scale));
    const uint32_t y = b.activation(name, dims, y_scale, y_zero_point);
    b.node("softmax", name, {x, table}, {y},
           {AttrSpec("axis", {axis}),
            AttrSpec("multiplier", {static_cast<int64_t>(std::nearbyint(65536.0 / y_scale))}),
            AttrSpec("clamp", std::move(clamp))});
    return y;
}

// An int8 layer_norm (`axes` trailing dims) or group_norm (`groups`) (spec 19) of activation x
// into a new activation `name`. Per channel: weights 0 (spec 4's zero channel: M = 2^30,
// n = 30, a small bias), +-127 (what convert writes) or any int8 (-128 included), in turn; a
// live channel's bias and (M, n) keep typical outputs within about +-50 steps.
inline uint32_t add_int8_norm(ModelBuilder& b, const std::string& op, const std::string& name,
                              uint32_t x, int64_t axes_or_groups, int64_t eps_term,
                              float y_scale, int32_t y_zero_point, Rng& rng,
                              std::vector<int64_t> clamp = {-128, 127}) {
    const std::vector<int64_t> dims = b.values[x].dims;
    int64_t channels = 1;
    if (op == "group_norm") {
        channels = dims[1];
    } else {
        for (size_t d = dims.size() - static_cast<size_t>(axes_or_groups); d < dims.size(); ++d) {
            channels *= dims[d];
        }
    }
    std::vector<int8_t> weight;
    std::vector<int32_t> bias;
    std::vector<int64_t> multiplier, shift;
    const Requant live = quantize_multiplier(50.0 / (127.0 * 65536.0));
    for (int64_t c = 0; c < channels; ++c) {
        const int64_t kind = c % 4;
        const int8_t w = kind == 0   ? int8_t{0}
                         : kind == 1 ? int8_t{127}
                         : kind == 2 ? int8_t{-127}
                                     : static_cast<int8_t>(rng.uniform(-128, 127));
        weight.push_back(w);
        if (w == 0) {
            bias.push_back(static_cast<int32_t>(rng.uniform(-60, 60)));
            multiplier.push_back(int64_t{1} << 30);
            shift.push_back(30);
        } else {
            bias.push_back(static_cast<int32_t>(rng.uniform(-(1 << 23), 1 << 23)));
            multiplier.push_back(live.multiplier);
            shift.push_back(live.shift);
        }
    }
    const uint32_t w = b.weight(name + ".weight", {channels}, weight);
    const uint32_t bv = b.bias(name + ".bias", {channels}, bias);
    const uint32_t y = b.activation(name, dims, y_scale, y_zero_point);
    b.node(op, name, {x, w, bv}, {y},
           {AttrSpec(op == "group_norm" ? "groups" : "axes", {axes_or_groups}),
            AttrSpec("eps_term", {eps_term}), AttrSpec("multiplier", std::move(multiplier)),
            AttrSpec("shift", std::move(shift)), AttrSpec("clamp", std::move(clamp))});
    return y;
}

// int8 softmax, layer_norm and group_norm (docs/quantization_spec.md sections 18 and 19), for
// the kernel and loader tests: x [N, 6, 3, 5]; group_norm "gn" (3 groups) -> g; layer_norm "ln"
// over the last 2 dims -> l; softmax "sm" along axis 3 -> y. Outputs: g, y.
inline ModelBuilder int8_norms_model() {
    ModelBuilder b;
    Rng rng(18);
    const uint32_t x = b.activation("x", {1, 6, 3, 5}, 0.1f, 3);
    const uint32_t g = add_int8_norm(b, "group_norm", "gn", x, 3, 12, 0.05f, -4, rng);
    const uint32_t l = add_int8_norm(b, "layer_norm", "ln", g, 2, 900, 0.04f, 6, rng);
    const uint32_t y = add_int8_softmax(b, "sm", l, 3, 1.0f / 256, -128);
    b.inputs = {x};
    b.outputs = {g, y};
    return b;
}

// float32 group_norm and l2_normalize, for the kernel and loader tests: x [N, 6, 3, 5];
// group_norm "gn" (3 groups, eps 1e-5) -> g; l2_normalize "l2" along axis 1 (eps 1e-12) -> y.
inline ModelBuilder float_norms_model() {
    ModelBuilder b;
    Rng rng(19);
    const uint32_t x = b.float_activation("x", {1, 6, 3, 5});
    const uint32_t w = b.float_constant("gn.weight", {6}, rng.floats(6, -2, 2));
    const uint32_t bias = b.float_constant("gn.bias", {6}, rng.floats(6, -1, 1));
    const uint32_t g = b.float_activation("g", {1, 6, 3, 5});
    b.node("group_norm", "gn", {x, w, bias}, {g},
           {AttrSpec("groups", {3}), float_attr("eps", {1e-5f})});
    const uint32_t y = b.float_activation("y", {1, 6, 3, 5});
    b.node("l2_normalize", "l2", {g}, {y}, {AttrSpec("axis", {1}), float_attr("eps", {1e-12f})});
    b.inputs = {x};
    b.outputs = {y};
    return b;
}

}  // namespace qtk_test
