// The loader against malformed variants of a valid builder model: each must throw qtk::Error whose
// message names the problem (the expected substring). Plus the valid model's metadata, loading from
// a file, and the CRC-32 known answer.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <functional>
#include <limits>

#include "check.h"
#include "crc32.h"
#include "model_builder.h"
#include "qtk/runtime.h"

using qtk_test::AttrSpec;
using qtk_test::ModelBuilder;
using qtk_test::NodeSpec;
using qtk_test::ValueSpec;

namespace {

using Bytes = std::vector<uint8_t>;

ValueSpec& value(ModelBuilder& b, const std::string& name) {
    for (ValueSpec& v : b.values) {
        if (v.name == name) {
            return v;
        }
    }
    throw std::logic_error("no value " + name);
}

uint32_t value_id(const ModelBuilder& b, const std::string& name) {
    for (size_t i = 0; i < b.values.size(); ++i) {
        if (b.values[i].name == name) {
            return static_cast<uint32_t>(i);
        }
    }
    throw std::logic_error("no value " + name);
}

NodeSpec& node(ModelBuilder& b, const std::string& name) {
    for (NodeSpec& n : b.nodes) {
        if (n.name == name) {
            return n;
        }
    }
    throw std::logic_error("no node " + name);
}

AttrSpec& attr(NodeSpec& n, const std::string& key) {
    for (AttrSpec& a : n.attrs) {
        if (a.key == key) {
            return a;
        }
    }
    throw std::logic_error("no attr " + key);
}

void remove_attr(NodeSpec& n, const std::string& key) {
    for (size_t i = 0; i < n.attrs.size(); ++i) {
        if (n.attrs[i].key == key) {
            n.attrs.erase(n.attrs.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
}

// x [1, 3, 4, 5] -> prelu (int8, a slope per channel) -> y, then dequantize -> float prelu with
// its slopes constant: the two forms of prelu, for the loader's refusals.
ModelBuilder prelu_model() {
    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, 3, 4, 5}, 0.05f, -3);
    const uint32_t y = b.activation("y", {1, 3, 4, 5}, 0.04f, 2);
    const uint32_t f = b.float_activation("f", {1, 3, 4, 5});
    const uint32_t w = b.float_constant("prelu_f.weight", {3}, {0.25f, -0.5f, 0.0f});
    const uint32_t g = b.float_activation("g", {1, 3, 4, 5});
    b.node("prelu", "prelu", {x}, {y},
           {AttrSpec("positive_multiplier", {1342177280}), AttrSpec("positive_shift", {31}),
            AttrSpec("multiplier", {1342177280, -1342177280, 0}), AttrSpec("shift", {32, 31, 1}),
            AttrSpec("clamp", {-128, 127})});
    b.node("dequantize", "dq", {y}, {f}, {});
    b.node("prelu", "prelu_f", {f, w}, {g}, {});
    b.inputs = {x};
    b.outputs = {g};
    return b;
}

Bytes edited_model(const std::function<void(ModelBuilder&)>& edit,
                   ModelBuilder (*seed)() = qtk_test::sample_model) {
    ModelBuilder b = seed();
    edit(b);
    return b.build();
}

// Edits the valid file's bytes; `refresh` then makes file_size and the CRC consistent again, so
// the check under test is the one that fires.
Bytes edited_bytes(const std::function<void(Bytes&)>& edit, bool refresh) {
    Bytes bytes = qtk_test::sample_model().build();
    edit(bytes);
    if (refresh) {
        qtk_test::refresh_header(bytes);
    }
    return bytes;
}

struct Variant {
    std::string what;
    Bytes bytes;
    std::string expected;
};

std::vector<Variant> malformed_variants() {
    using namespace qtk_test;
    const Bytes valid = sample_model().build();
    const uint64_t graph_size = get_u64(valid, kGraphSizeField);
    const uint64_t blob_offset = get_u64(valid, kBlobOffsetField);
    const size_t num_values_at = 64 + 4 + sample_model().producer.size();
    std::vector<Variant> v;

    // Header and sections.
    v.push_back({"empty file", {}, "file is 0 bytes, shorter than the 64-byte header"});
    v.push_back({"truncated header", Bytes(valid.begin(), valid.begin() + 40),
                 "shorter than the 64-byte header"});
    v.push_back(
        {"truncated in the graph, stale file_size",
         Bytes(valid.begin(), valid.begin() + 64 + static_cast<std::ptrdiff_t>(graph_size / 2)),
         "does not match the real size"});
    v.push_back(
        {"truncated in the graph, file_size fixed",
         edited_bytes([&](Bytes& b) { b.resize(64 + graph_size / 2); }, true),
         "graph section [64, 64 + " + std::to_string(graph_size) + ") extends past the end"});
    v.push_back({"truncated in the blob",
                 edited_bytes([](Bytes& b) { b.resize(b.size() - 10); }, true), "blob section"});
    v.push_back(
        {"graph section cut short (consistent header)",
         edited_bytes([&](Bytes& b) { put_u64(b, kGraphSizeField, graph_size - 30); }, true),
         "graph section ends early"});
    v.push_back({"bad magic", edited_bytes([](Bytes& b) { b[3] = 'X'; }, false), "bad magic"});
    v.push_back({"bad version", edited_bytes([](Bytes& b) { put_u32(b, kVersionField, 2); }, false),
                 "format_version 2 is not supported: this runtime reads version 1"});
    v.push_back({"bad header_size",
                 edited_bytes([](Bytes& b) { put_u32(b, kHeaderSizeField, 80); }, false),
                 "header_size 80 must be 64"});
    v.push_back({"file_size mismatch",
                 edited_bytes([](Bytes& b) { b.resize(b.size() + 7); }, false),
                 "does not match the real size"});
    v.push_back({"reserved field set",
                 edited_bytes([](Bytes& b) { put_u32(b, kReservedField, 7); }, false),
                 "reserved header field is 7"});
    v.push_back({"graph_offset inside the header",
                 edited_bytes([](Bytes& b) { put_u64(b, kGraphOffsetField, 8); }, true),
                 "graph_offset 8 overlaps"});
    v.push_back(
        {"graph_size out of range",
         edited_bytes([](Bytes& b) { put_u64(b, kGraphSizeField, uint64_t{1} << 63); }, false),
         "extends past the end"});
    v.push_back({"blob_offset past the end, size wraps",
                 edited_bytes([](Bytes& b) { put_u64(b, kBlobSizeField, ~uint64_t{0}); }, true),
                 "blob section"});
    v.push_back(
        {"unaligned blob_offset",
         edited_bytes([&](Bytes& b) { put_u64(b, kBlobOffsetField, blob_offset + 4); }, true),
         "is not a multiple of 64"});
    v.push_back({"blob over the header",
                 edited_bytes([](Bytes& b) { put_u64(b, kBlobOffsetField, 0); }, true),
                 "blob_offset 0 overlaps the 64-byte header"});
    v.push_back({"overlapping sections",
                 edited_bytes([](Bytes& b) { put_u64(b, kBlobOffsetField, 64); }, true),
                 "overlap"});
    v.push_back({"CRC mismatch", edited_bytes([](Bytes& b) { b[70] ^= 1; }, false),
                 "does not match the graph section's CRC-32"});

    // Graph section encoding.
    v.push_back({"trailing bytes in the graph",
                 edited_model([](ModelBuilder& b) { b.graph_trailer = {0, 0, 0}; }),
                 "graph section has 3 trailing bytes after the last node"});
    v.push_back({"num_values over the limit",
                 edited_bytes([&](Bytes& b) { put_u32(b, num_values_at, 1u << 21); }, true),
                 "num_values 2097152 exceeds the limit 1048576"});
    v.push_back({"num_values larger than the section",
                 edited_bytes([&](Bytes& b) { put_u32(b, num_values_at, 1000000); }, true),
                 "num_values 1000000 needs at least"});
    v.push_back({"string too long",
                 edited_model([](ModelBuilder& b) { value(b, "a").name = std::string(5000, 'a'); }),
                 "length 5000 exceeds 4096"});
    v.push_back({"invalid UTF-8 name",
                 edited_model([](ModelBuilder& b) { node(b, "conv1").name = "conv\xC0\x80"; }),
                 "is not valid UTF-8"});
    v.push_back({"node input id out of range",
                 edited_model([](ModelBuilder& b) { node(b, "add1").inputs[1] = 999; }),
                 "node 2 ('add1'): inputs[1] = 999 is not below num_values"});
    v.push_back({"graph output id out of range",
                 edited_model([](ModelBuilder& b) { b.outputs[0] = 500; }),
                 "graph_outputs[0] = 500"});
    v.push_back({"bad dtype code", edited_model([](ModelBuilder& b) { value(b, "a").dtype = 9; }),
                 "value 3 ('a'): dtype 9 is not 1 (int8), 2 (int32), 3 (float32), 4 (int4), "
                 "5 (int2), 6 (uint8) or 7 (int1)"});
    v.push_back({"packed activation", edited_model([](ModelBuilder& b) { value(b, "a").dtype = 4; }),
                 "value 3 ('a'): dtype int4 is for constants only"});
    v.push_back({"packed weight of int8 size",
                 edited_model([](ModelBuilder& b) { value(b, "conv1.weight").dtype = 5; }),
                 "data_size 72 does not match shape [4, 2, 3, 3] of int2 (18 bytes)"});
    v.push_back({"absurd rank", edited_model([](ModelBuilder& b) {
                     value(b, "a").dims = std::vector<int64_t>(9, 1);
                 }),
                 "rank 9 exceeds 8"});
    v.push_back({"zero dim", edited_model([](ModelBuilder& b) { value(b, "a").dims[2] = 0; }),
                 "dims[2] = 0 is outside [1, 2^31)"});
    v.push_back({"dim of 2^31",
                 edited_model([](ModelBuilder& b) { value(b, "a").dims[1] = int64_t{1} << 31; }),
                 "dims[1] = 2147483648 is outside [1, 2^31)"});
    v.push_back({"dims product overflow", edited_model([](ModelBuilder& b) {
                     value(b, "a").dims = {1, 1 << 30, 1 << 30, 1 << 30, 4};
                 }),
                 "has more than 2^31 - 1 elements"});
    v.push_back({"has_data not 0/1",
                 edited_bytes(
                     [&](Bytes& b) {
                         // value 0 ('x'): name(4 + 1) dtype rank dims(4 * 8) scale zp, then
                         // has_data.
                         b[num_values_at + 4 + 5 + 1 + 1 + 32 + 4 + 4] = 2;
                     },
                     true),
                 "has_data 2 is not 0 or 1"});

    // Value rules.
    v.push_back({"scale 0", edited_model([](ModelBuilder& b) { value(b, "a").scale = 0.0f; }),
                 "value 3 ('a'): scale 0.000000 must be finite and > 0"});
    v.push_back({"scale NaN",
                 edited_model([](ModelBuilder& b) { value(b, "x").scale = std::nanf(""); }),
                 "must be finite and > 0"});
    v.push_back({"scale negative",
                 edited_model([](ModelBuilder& b) { value(b, "x").scale = -0.5f; }),
                 "scale -0.500000 must be finite"});
    v.push_back({"zero point out of range",
                 edited_model([](ModelBuilder& b) { value(b, "c").zero_point = 200; }),
                 "zero_point 200 is outside [-128, 127]"});
    v.push_back({"unaligned data offset", edited_model([](ModelBuilder& b) {
                     value(b, "conv1.weight").override_data_offset = true;
                     value(b, "conv1.weight").data_offset = 65;
                 }),
                 "value 1 ('conv1.weight'): data_offset 65 is not a multiple of 64"});
    v.push_back(
        {"data outside the blob", edited_model([](ModelBuilder& b) {
             value(b, "conv1.weight").override_data_offset = true;
             value(b, "conv1.weight").data_offset = 4096;
         }),
         "value 1 ('conv1.weight'): data_offset 4096 + data_size 72 exceeds blob section size"});
    v.push_back({"data_size not matching the shape", edited_model([](ModelBuilder& b) {
                     value(b, "conv1.bias").override_data_size = true;
                     value(b, "conv1.bias").data_size = 4;
                 }),
                 "data_size 4 does not match shape [4] of int32 (16 bytes)"});

    // Graph rules.
    v.push_back({"no graph inputs", edited_model([](ModelBuilder& b) { b.inputs.clear(); }),
                 "the graph has no inputs"});
    v.push_back({"graph input is a constant",
                 edited_model([](ModelBuilder& b) { b.inputs = {value_id(b, "conv1.bias")}; }),
                 "graph input 0 (value 2 ('conv1.bias')) is a constant"});
    v.push_back({"graph input listed twice",
                 edited_model([](ModelBuilder& b) { b.inputs = {0, 0}; }), "is listed twice"});
    v.push_back({"activation produced twice", edited_model([](ModelBuilder& b) {
                     node(b, "relu6").outputs = {value_id(b, "a")};
                 }),
                 "node 'relu6' (clamp): output value 3 ('a') is produced twice (already produced "
                 "by node 'conv1' (conv2d))"});
    v.push_back({"use before definition",
                 edited_model([](ModelBuilder& b) { std::swap(b.nodes[0], b.nodes[1]); }),
                 "node 'relu6' (clamp): input value 3 ('a') is used before it is defined"});
    v.push_back({"constant as node output", edited_model([](ModelBuilder& b) {
                     node(b, "relu6").outputs = {value_id(b, "fc.weight")};
                 }),
                 "output value 15 ('fc.weight') is a constant"});
    v.push_back({"graph output never produced", edited_model([](ModelBuilder& b) {
                     b.outputs[0] = b.activation("orphan", {1, 3}, 0.1f, 0);
                 }),
                 "graph output 0 (value 18 ('orphan')) is produced by no node"});

    // Node rules (checked by the kernel factories).
    v.push_back({"unknown op", edited_model([](ModelBuilder& b) { node(b, "conv1").op = "foo"; }),
                 "node 'conv1' uses op 'foo' which this runtime does not know; re-export with a "
                 "matching qtk version"});
    v.push_back({"missing attribute",
                 edited_model([](ModelBuilder& b) { remove_attr(node(b, "conv1"), "stride"); }),
                 "node 'conv1' (conv2d): missing attribute 'stride'"});
    v.push_back({"wrong attribute length",
                 edited_model([](ModelBuilder& b) { attr(node(b, "conv1"), "stride").ints = {1}; }),
                 "attribute 'stride' must have 2 values, got 1"});
    v.push_back({"unknown attribute", edited_model([](ModelBuilder& b) {
                     node(b, "maxpool").attrs.push_back(AttrSpec("return_indices", {1}));
                 }),
                 "node 'maxpool' (max_pool2d): unknown attribute 'return_indices'"});
    v.push_back({"attribute twice", edited_model([](ModelBuilder& b) {
                     node(b, "cat").attrs.push_back(AttrSpec("axis", {1}));
                 }),
                 "attribute 'axis' appears twice"});
    v.push_back({"float attribute where ints are required", edited_model([](ModelBuilder& b) {
                     AttrSpec& a = attr(node(b, "conv1"), "groups");
                     a.kind = 2;
                     a.floats = {1.0f};
                 }),
                 "attribute 'groups' must be an i64 list"});
    v.push_back({"bad attribute kind code",
                 edited_model([](ModelBuilder& b) { attr(node(b, "conv1"), "groups").kind = 7; }),
                 "attr kind 7 of 'groups' is not 1 (i64) or 2 (f32)"});
    v.push_back({"shift out of range",
                 edited_model([](ModelBuilder& b) { attr(node(b, "fc"), "shift").ints[1] = 63; }),
                 "attribute 'shift'[1] = 63 is outside [1, 62]"});
    v.push_back({"negative multiplier", edited_model([](ModelBuilder& b) {
                     attr(node(b, "add1"), "multiplier").ints[0] = -5;
                 }),
                 "attribute 'multiplier'[0] = -5 is outside [0, 2147483647]"});
    v.push_back({"empty clamp", edited_model([](ModelBuilder& b) {
                     attr(node(b, "relu6"), "clamp").ints = {10, 5};
                 }),
                 "is empty (lo > hi)"});
    v.push_back({"weights of the wrong dtype", edited_model([](ModelBuilder& b) {
                     ValueSpec& w = value(b, "conv1.weight");
                     w.dtype = 2;
                     w.data.resize(w.data.size() * 4);
                 }),
                 "node 'conv1' (conv2d): weight 'conv1.weight' must be int8, got int32"});
    v.push_back({"weight that is an activation",
                 edited_model([](ModelBuilder& b) { node(b, "fc").inputs[1] = value_id(b, "x"); }),
                 "weight 'x' must be a constant"});
    v.push_back({"bias of the wrong shape", edited_model([](ModelBuilder& b) {
                     node(b, "conv2").inputs[2] = value_id(b, "conv1.bias");
                 }),
                 "bias 'conv1.bias' has shape [4], expected [8] (one per output channel of weight "
                 "'conv2.weight' [8, 2, 2, 2])"});
    v.push_back({"weights outside the narrow range",
                 edited_model([](ModelBuilder& b) { value(b, "fc.weight").data[5] = 0x80; }),
                 "weight 'fc.weight' holds -128 at element 5"});
    v.push_back({"accumulator overflow", edited_model([](ModelBuilder& b) {
                     for (int i = 0; i < 4; ++i) {
                         value(b, "conv1.bias").data[i] = i == 3 ? 0x7f : 0xff;
                     }
                 }),
                 "output channel 0 can overflow the int32 accumulator"});
    v.push_back({"groups not dividing the channels",
                 edited_model([](ModelBuilder& b) { attr(node(b, "conv2"), "groups").ints = {3}; }),
                 "groups 3 does not divide the weight's 8 output channels"});
    v.push_back({"channel mismatch", edited_model([](ModelBuilder& b) {
                     ValueSpec& w = value(b, "conv1.weight");
                     w.dims = {4, 3, 3, 3};
                     w.data.resize(108, 1);
                 }),
                 "input has 2 channels, the weight expects 3"});
    v.push_back({"output shape differs from the computed one",
                 edited_model([](ModelBuilder& b) { value(b, "e").dims = {1, 8, 2, 2}; }),
                 "node 'maxpool' (max_pool2d): output 'e' has shape [1, 8, 2, 2] in the file, but "
                 "the op computes [1, 8, 3, 3]"});
    v.push_back({"pool changing the quantization",
                 edited_model([](ModelBuilder& b) { value(b, "e").zero_point = 1; }),
                 "must keep its input's (scale, zero_point)"});
    v.push_back({"pool padding over half the kernel", edited_model([](ModelBuilder& b) {
                     attr(node(b, "avgpool"), "padding").ints = {2, 1};
                 }),
                 "padding 2 exceeds half the kernel extent 3"});
    v.push_back({"concat axis 0",
                 edited_model([](ModelBuilder& b) { attr(node(b, "cat"), "axis").ints = {0}; }),
                 "attribute 'axis'[0] = 0 is outside [1, 3]"});
    v.push_back(
        {"node with an extra output", edited_model([](ModelBuilder& b) {
             node(b, "relu6").outputs.push_back(b.activation("extra", {1, 4, 6, 6}, 0.1f, -5));
         }),
         "node 'relu6' (clamp): expects 1 outputs, got 2"});
    v.push_back({"weight of rank 3",
                 edited_model([](ModelBuilder& b) { value(b, "conv1.weight").dims = {4, 2, 9}; }),
                 "weight 'conv1.weight' must have rank 4, got shape [4, 2, 9]"});
    v.push_back({"linear feature mismatch", edited_model([](ModelBuilder& b) {
                     ValueSpec& w = value(b, "fc.weight");
                     w.dims = {3, 9};
                     w.data.resize(27, 1);
                 }),
                 "node 'fc' (linear): input has 8 features, the weight expects 9"});
    v.push_back({"concat inputs differing off the axis", edited_model([](ModelBuilder& b) {
                     node(b, "cat").inputs[1] = value_id(b, "x");
                     attr(node(b, "cat"), "axis").ints = {2};
                 }),
                 "input 1 has shape [1, 2, 6, 6], which differs from input 0's [1, 4, 6, 6] in a "
                 "dim other than axis 2"});
    {
        ModelBuilder b = add_model();
        b.values[b.inputs[1]].dims[0] = 2;
        v.push_back({"graph inputs with different batches", b.build(),
                     "graph input 1 (value 1 ('y')) has batch 2 but graph input 0 has batch 1"});
    }
    v.push_back({"add with a missing input",
                 edited_model([](ModelBuilder& b) { node(b, "add1").inputs.pop_back(); }),
                 "expects 2 inputs, got 1"});

    // The newer int8 ops (int8_ops_model).
    const auto int8_ops = [](const std::function<void(ModelBuilder&)>& edit) {
        return edited_model(edit, qtk_test::int8_ops_model);
    };
    v.push_back({"perm that is not a permutation", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "shuffle.transpose"), "perm").ints = {0, 2, 2, 3, 4};
                 }),
                 "node 'shuffle.transpose' (permute): attribute 'perm' = [0, 2, 2, 3, 4] is not a "
                 "permutation (2 appears twice)"});
    v.push_back({"perm moving the batch", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "shuffle.transpose"), "perm").ints = {1, 0, 2, 3, 4};
                 }),
                 "must start with 0 (the batch stays dim 0)"});
    v.push_back({"perm of the wrong length", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "shuffle.transpose"), "perm").ints = {0, 2, 1};
                 }),
                 "attribute 'perm' must have 5 values, got 3"});
    v.push_back({"split sizes not summing to the dim", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "split"), "sizes").ints = {1, 2, 2};
                 }),
                 "node 'split' (split): sizes [1, 2, 2] sum to 5, but the input's dim 1 is 4"});
    v.push_back({"split sizes not one per output",
                 int8_ops([](ModelBuilder& b) { attr(node(b, "split"), "sizes").ints = {2, 2}; }),
                 "attribute 'sizes' must have 3 values, got 2"});
    v.push_back({"resize_nearest index past the height", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "up.nearest"), "index_h").ints = {0, 0, 4, 9};
                 }),
                 "node 'up.nearest' (resize_nearest): attribute 'index_h'[3] = 9 is outside [0, 9) "
                 "(the input's height"});
    v.push_back({"resize_nearest negative index", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "up.nearest"), "index_w").ints = {5, -1, 0};
                 }),
                 "attribute 'index_w'[1] = -1 is outside [0, 2147483647]"});
    v.push_back({"bilinear weight over 1024", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "up.bilinear"), "h_weight").ints = {0, 1025, 1024};
                 }),
                 "node 'up.bilinear' (resize_bilinear): attribute 'h_weight'[1] = 1025 is outside "
                 "[0, 1024]"});
    v.push_back({"bilinear index past the width", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "up.bilinear"), "w1").ints = {1, 2, 4, 6};
                 }),
                 "attribute 'w1'[3] = 6 is outside [0, 6) (the input's width"});
    v.push_back({"bilinear index lists of different lengths", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "up.bilinear"), "h1").ints = {1, 4};
                 }),
                 "attribute 'h1' must have 3 values, got 2"});
    v.push_back({"lut table of the wrong size", int8_ops([](ModelBuilder& b) {
                     value(b, "se.gate.table").dims = {255};
                     value(b, "se.gate.table").data.resize(255);
                 }),
                 "node 'se.gate' (lut): table 'se.gate.table' must have shape [256]"});
    v.push_back({"lut table of the wrong dtype", int8_ops([](ModelBuilder& b) {
                     value(b, "se.gate.table").dtype = 3;
                     value(b, "se.gate.table").data.resize(1024);
                 }),
                 "table 'se.gate.table' must be int8, got float32"});
    v.push_back({"sigmoid of int8",
                 int8_ops([](ModelBuilder& b) { node(b, "se.gate").op = "sigmoid"; }),
                 "node 'se.gate' (sigmoid): op 'sigmoid' has no int8 kernel"});
    v.push_back({"mul of shapes that do not broadcast", int8_ops([](ModelBuilder& b) {
                     node(b, "se.mul").inputs[0] = value_id(b, "grouped");
                 }),
                 "inputs of shapes [1, 2, 2, 6, 5] and [1, 4, 1, 1] do not broadcast"});
    v.push_back({"reshape with two -1", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "shuffle.view"), "shape").ints = {-1, -1, 6, 5};
                 }),
                 "node 'shuffle.view' (reshape): attribute 'shape' = [-1, -1, 6, 5] has more than "
                 "one -1"});
    v.push_back({"reshape to a different element count", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "shuffle.view"), "shape").ints = {2, 2, 6, 4};
                 }),
                 "does not fit the input's 120 elements per sample"});
    v.push_back({"reshape with a zero dim", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "shuffle.view"), "shape").ints = {2, 0, 6, 5};
                 }),
                 "attribute 'shape'[1] is 0"});
    v.push_back({"negative padding", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "pad"), "pads").ints = {1, -1, 2, 1};
                 }),
                 "attribute 'pads'[1] = -1 is outside [0, "});
    v.push_back({"int8 pad value out of range",
                 int8_ops([](ModelBuilder& b) { attr(node(b, "pad"), "value").ints = {200}; }),
                 "attribute 'value'[0] = 200 is outside [-128, 127]"});
    v.push_back({"keepdim not 0 or 1", int8_ops([](ModelBuilder& b) {
                     attr(node(b, "head.pool"), "keepdim").ints = {2};
                 }),
                 "attribute 'keepdim'[0] = 2 is outside [0, 1]"});
    for (const char* name : {"grouped", "swapped", "padded", "s1", "near", "g"}) {
        v.push_back(
            {std::string("pass-through op changing the quantization of ") + name,
             int8_ops([&](ModelBuilder& b) { value(b, name).zero_point += 1; }),
             std::string("output '") + name + "' must keep its input's (scale, zero_point)"});
    }

    // Float32 values and kernels (mixed_model).
    const auto mixed = [](const std::function<void(ModelBuilder&)>& edit) {
        return edited_model(edit, qtk_test::mixed_model);
    };
    v.push_back({"float activation with a nonzero scale",
                 mixed([](ModelBuilder& b) { value(b, "f1").scale = 0.5f; }),
                 "('f1'): scale 0.500000 must be 0 for a float32 activation"});
    v.push_back({"float activation with a nonzero zero point",
                 mixed([](ModelBuilder& b) { value(b, "f1").zero_point = 3; }),
                 "('f1'): zero_point 3 must be 0 for a float32 activation"});
    v.push_back({"int32 activation", mixed([](ModelBuilder& b) { value(b, "f1").dtype = 2; }),
                 "('f1'): dtype int32 is for constants only"});
    v.push_back({"add of int8 and float32",
                 mixed([](ModelBuilder& b) { node(b, "residual").inputs[0] = value_id(b, "c"); }),
                 "node 'residual' (add): input 1 ('f3') must be an int8 activation, got a float32 "
                 "activation"});
    v.push_back({"add of float32 and int8",
                 mixed([](ModelBuilder& b) { node(b, "residual").inputs[1] = value_id(b, "c"); }),
                 "node 'residual' (add): input 1 ('c') must be a float32 activation, got an int8 "
                 "activation"});
    v.push_back({"concat of float32 and int8",
                 mixed([](ModelBuilder& b) { node(b, "cat").inputs[1] = value_id(b, "c"); }),
                 "node 'cat' (concat): input 1 ('c') must be a float32 activation"});
    v.push_back(
        {"quantize of int8", mixed([](ModelBuilder& b) { node(b, "dequant").op = "quantize"; }),
         "node 'dequant' (quantize): op 'quantize' has no int8 kernel (input 0 'c' is int8)"});
    v.push_back({"dequantize of float32",
                 mixed([](ModelBuilder& b) { node(b, "quant").op = "dequantize"; }),
                 "node 'quant' (dequantize): op 'dequantize' has no float32 kernel"});
    v.push_back({"quantize producing float32", mixed([](ModelBuilder& b) {
                     ValueSpec& q = value(b, "q");
                     q.dtype = 3;
                     q.scale = 0.0f;
                     q.zero_point = 0;
                 }),
                 "node 'quant' (quantize): output 'q' must be int8, got float32"});
    v.push_back({"dequantize producing int8", mixed([](ModelBuilder& b) {
                     ValueSpec& f = value(b, "f1");
                     f.dtype = 1;
                     f.scale = 0.1f;
                 }),
                 "node 'dequant' (dequantize): output 'f1' must be float32, got int8"});
    v.push_back({"float conv with a quantization attribute", mixed([](ModelBuilder& b) {
                     node(b, "fconv").attrs.push_back(AttrSpec("multiplier", {1 << 30}));
                 }),
                 "node 'fconv' (conv2d): unknown attribute 'multiplier'"});
    v.push_back({"float conv with int8 weights", mixed([](ModelBuilder& b) {
                     ValueSpec& w = value(b, "fconv.weight");
                     w.dtype = 1;
                     w.data.resize(24);
                 }),
                 "weight 'fconv.weight' must be float32, got int8"});
    v.push_back({"float linear with an int32 bias",
                 mixed([](ModelBuilder& b) { value(b, "fc.bias").dtype = 2; }),
                 "node 'fc' (linear): bias 'fc.bias' must be float32, got int32"});
    v.push_back({"empty float bounds", mixed([](ModelBuilder& b) {
                     attr(node(b, "hardtanh"), "bounds").floats = {3.0f, -1.0f};
                 }),
                 "node 'hardtanh' (clamp): attribute 'bounds' = [3.000000, -1.000000] is empty"});
    v.push_back({"NaN bound", mixed([](ModelBuilder& b) {
                     attr(node(b, "fc"), "bounds").floats[0] = std::nanf("");
                 }),
                 "node 'fc' (linear): attribute 'bounds'[0] is NaN"});
    v.push_back({"i64 bounds", mixed([](ModelBuilder& b) {
                     attr(node(b, "hardtanh"), "bounds") = AttrSpec("bounds", {-1, 3});
                 }),
                 "attribute 'bounds' must be an f32 list"});
    v.push_back({"float clamp without bounds",
                 mixed([](ModelBuilder& b) { remove_attr(node(b, "hardtanh"), "bounds"); }),
                 "node 'hardtanh' (clamp): missing attribute 'bounds'"});
    v.push_back({"float pad with an i64 value", mixed([](ModelBuilder& b) {
                     attr(node(b, "pad"), "value") = AttrSpec("value", {0});
                 }),
                 "node 'pad' (pad): attribute 'value' must be an f32 list"});

    // The float fallback ops, slice and expand_batch (transformer_model).
    const auto transformer = [](const std::function<void(ModelBuilder&)>& edit) {
        return edited_model(edit, qtk_test::transformer_model);
    };
    v.push_back({"layer_norm axes 0",
                 transformer([](ModelBuilder& b) { attr(node(b, "ln"), "axes").ints = {0}; }),
                 "node 'ln' (layer_norm): attribute 'axes'[0] = 0 is outside [1, 2]"});
    v.push_back({"layer_norm axes reaching the batch",
                 transformer([](ModelBuilder& b) { attr(node(b, "ln"), "axes").ints = {3}; }),
                 "attribute 'axes'[0] = 3 is outside [1, 2]"});
    v.push_back({"layer_norm eps 0", transformer([](ModelBuilder& b) {
                     attr(node(b, "ln"), "eps").floats = {0.0f};
                 }),
                 "node 'ln' (layer_norm): attribute 'eps' = 0.000000 must be finite and > 0"});
    v.push_back({"layer_norm eps of two values", transformer([](ModelBuilder& b) {
                     attr(node(b, "ln"), "eps").floats = {1e-5f, 1e-5f};
                 }),
                 "attribute 'eps' must have 1 values, got 2"});
    v.push_back({"layer_norm weight of the wrong shape", transformer([](ModelBuilder& b) {
                     value(b, "ln.weight").dims = {5};
                     value(b, "ln.weight").data.resize(20);
                 }),
                 "node 'ln' (layer_norm): 'ln.weight' has shape [5], expected [6] (the last 1 "
                 "dims of the input [1, 5, 6])"});
    v.push_back({"layer_norm without a bias",
                 transformer([](ModelBuilder& b) { node(b, "ln").inputs.pop_back(); }),
                 "node 'ln' (layer_norm): expects 3 inputs, got 2"});
    v.push_back({"layer_norm with an activation weight", transformer([](ModelBuilder& b) {
                     node(b, "ln").inputs[1] = value_id(b, "seq");
                 }),
                 "node 'ln' (layer_norm): weight 'seq' must be a constant"});
    v.push_back({"softmax axis 0", transformer([](ModelBuilder& b) {
                     attr(node(b, "attn.softmax"), "axis").ints = {0};
                 }),
                 "node 'attn.softmax' (softmax): attribute 'axis'[0] = 0 is outside [1, 3]"});
    v.push_back({"softmax axis past the rank", transformer([](ModelBuilder& b) {
                     attr(node(b, "attn.softmax"), "axis").ints = {4};
                 }),
                 "attribute 'axis'[0] = 4 is outside [1, 3]"});
    v.push_back({"softmax without an axis", transformer([](ModelBuilder& b) {
                     remove_attr(node(b, "attn.softmax"), "axis");
                 }),
                 "node 'attn.softmax' (softmax): missing attribute 'axis'"});
    v.push_back({"int8 softmax without a table",
                 transformer([](ModelBuilder& b) { node(b, "q8.slice").op = "softmax"; }),
                 "node 'q8.slice' (softmax): expects 2 inputs, got 1"});
    v.push_back({"matmul inner dims differing", transformer([](ModelBuilder& b) {
                     value(b, "q.weight").dims = {5, 6};
                     value(b, "q.weight").data.resize(120);
                 }),
                 "node 'q' (matmul): input 0 [1, 5, 6] has 6 columns but input 1 [5, 6] has 5 "
                 "rows"});
    v.push_back({"matmul of activations of different ranks", transformer([](ModelBuilder& b) {
                     node(b, "attn.values").inputs[1] = value_id(b, "ln");
                 }),
                 "node 'attn.values' (matmul): inputs of ranks 4 and 3: two activations need "
                 "equal ranks"});
    v.push_back({"matmul by a constant of higher rank", transformer([](ModelBuilder& b) {
                     value(b, "q.weight").dims = {1, 1, 6, 6};
                 }),
                 "constant 'q.weight' has rank 4, above input 0's 3"});
    v.push_back({"matmul by a constant whose dim 0 is not 1", transformer([](ModelBuilder& b) {
                     value(b, "q.weight").dims = {2, 3, 6};
                 }),
                 "node 'q' (matmul): constant 'q.weight' has shape [2, 3, 6]; its dim 0 faces the "
                 "batch"});
    v.push_back({"matmul of rank 1", transformer([](ModelBuilder& b) {
                     value(b, "q.weight").dims = {36};
                 }),
                 "'q.weight' has shape [36]; matmul's inputs have rank >= 2"});
    v.push_back({"matmul with an int8 operand", transformer([](ModelBuilder& b) {
                     node(b, "q").inputs[1] = value_id(b, "q8");
                 }),
                 "node 'q' (matmul): input 1 ('q8') must be a float32 activation, got an int8 "
                 "activation"});
    v.push_back({"matmul output shape differing from the file", transformer([](ModelBuilder& b) {
                     value(b, "s").dims = {1, 2, 5, 3};
                 }),
                 "node 'attn.scores' (matmul): output 's' has shape [1, 2, 5, 3] in the file, but "
                 "the op computes [1, 2, 5, 5]"});
    v.push_back({"float matmul with transpose_b 2", transformer([](ModelBuilder& b) {
                     node(b, "attn.scores").attrs.push_back(AttrSpec("transpose_b", {2}));
                 }),
                 "node 'attn.scores' (matmul): attribute 'transpose_b'[0] = 2 is outside [0, 1]"});
    v.push_back({"float matmul with transpose_b and untransposed shapes",
                 transformer([](ModelBuilder& b) {
                     node(b, "attn.scores").attrs.push_back(AttrSpec("transpose_b", {1}));
                 }),
                 "node 'attn.scores' (matmul): input 0 [1, 2, 5, 3] has 3 columns but input 1 "
                 "[1, 2, 3, 5] has 5 columns (transpose_b: b is [..., P, K])"});
    v.push_back({"float matmul with requantization attributes", transformer([](ModelBuilder& b) {
                     node(b, "attn.scores").attrs.push_back(AttrSpec("multiplier", {1 << 30}));
                 }),
                 "node 'attn.scores' (matmul): unknown attribute 'multiplier'"});

    // int8 matmul (int8_attention_model).
    const auto attention = [](const std::function<void(ModelBuilder&)>& edit) {
        return edited_model(edit, qtk_test::int8_attention_model);
    };
    v.push_back({"int8 matmul without a multiplier", attention([](ModelBuilder& b) {
                     remove_attr(node(b, "attn.values"), "multiplier");
                 }),
                 "node 'attn.values' (matmul): missing attribute 'multiplier'"});
    v.push_back({"int8 matmul without a clamp", attention([](ModelBuilder& b) {
                     remove_attr(node(b, "attn.scores"), "clamp");
                 }),
                 "node 'attn.scores' (matmul): missing attribute 'clamp'"});
    v.push_back({"int8 matmul with two shifts", attention([](ModelBuilder& b) {
                     attr(node(b, "attn.values"), "shift").ints = {20, 20};
                 }),
                 "node 'attn.values' (matmul): attribute 'shift' must have 1 values, got 2"});
    v.push_back({"int8 matmul with a shift of 0", attention([](ModelBuilder& b) {
                     attr(node(b, "attn.values"), "shift").ints = {0};
                 }),
                 "node 'attn.values' (matmul): attribute 'shift'[0] = 0 is outside [1, 62]"});
    v.push_back({"int8 matmul with a multiplier of 2^31", attention([](ModelBuilder& b) {
                     attr(node(b, "attn.values"), "multiplier").ints = {int64_t{1} << 31};
                 }),
                 "attribute 'multiplier'[0] = 2147483648 is outside [0, 2147483647]"});
    v.push_back({"int8 matmul with an empty clamp", attention([](ModelBuilder& b) {
                     attr(node(b, "attn.values"), "clamp").ints = {10, -10};
                 }),
                 "node 'attn.values' (matmul): attribute 'clamp' = [10, -10] is empty (lo > hi)"});
    v.push_back({"int8 matmul with transpose_b of two values", attention([](ModelBuilder& b) {
                     attr(node(b, "attn.scores"), "transpose_b").ints = {1, 1};
                 }),
                 "node 'attn.scores' (matmul): attribute 'transpose_b' must have 1 values, got 2"});
    v.push_back({"int8 matmul without transpose_b on q and k", attention([](ModelBuilder& b) {
                     remove_attr(node(b, "attn.scores"), "transpose_b");
                 }),
                 "node 'attn.scores' (matmul): input 0 [1, 2, 5, 3] has 3 columns but input 1 "
                 "[1, 2, 5, 3] has 5 rows"});
    v.push_back({"int8 matmul with a float32 output", attention([](ModelBuilder& b) {
                     value(b, "o").dtype = 3;
                     value(b, "o").scale = 0.0f;
                     value(b, "o").zero_point = 0;
                 }),
                 "node 'attn.values' (matmul): output 'o' must be int8, got float32"});
    v.push_back({"int8 matmul of an int8 constant", attention([](ModelBuilder& b) {
                     const uint32_t w = b.weight("v.weight", {1, 2, 5, 3},
                                                 std::vector<int8_t>(30, 1));
                     node(b, "attn.values").inputs[1] = w;
                 }),
                 "node 'attn.values' (matmul): input 1 ('v.weight') must be an int8 activation, "
                 "got an int8 constant"});
    v.push_back({"int8 matmul of activations of different ranks", attention([](ModelBuilder& b) {
                     const uint32_t flat = b.activation("v.flat", {1, 10, 3}, 0.03f, 0);
                     b.node("reshape", "v.view", {value_id(b, "v")}, {flat},
                            {AttrSpec("shape", {10, 3})});
                     std::rotate(b.nodes.begin(), b.nodes.end() - 1, b.nodes.end());
                     node(b, "attn.values").inputs[1] = flat;
                 }),
                 "node 'attn.values' (matmul): inputs of ranks 4 and 3: two activations need "
                 "equal ranks"});
    v.push_back({"int8 matmul whose batch dims do not broadcast", attention([](ModelBuilder& b) {
                     value(b, "k").dims = {1, 3, 5, 3};
                 }),
                 "node 'attn.scores' (matmul): the batch dims of [1, 2, 5, 3] and [1, 3, 5, 3] do "
                 "not broadcast"});
    v.push_back({"int8 matmul of K 33026", attention([](ModelBuilder& b) {
                     value(b, "q").dims = {1, 2, 5, 33026};
                     value(b, "k").dims = {1, 2, 5, 33026};
                 }),
                 "node 'attn.scores' (matmul): K = 33026 products of up to 255 * 255 could "
                 "overflow the int32 accumulator (K <= 33025, docs/quantization_spec.md section "
                 "17); keep this matmul float"});
    v.push_back({"int8 matmul output zero point out of range",
                 attention([](ModelBuilder& b) { value(b, "s").zero_point = 128; }),
                 "zero_point"});

    // int8 softmax, layer_norm and group_norm (int8_norms_model).
    const auto norms = [](const std::function<void(ModelBuilder&)>& edit) {
        return edited_model(edit, qtk_test::int8_norms_model);
    };
    v.push_back({"int8 softmax axis 0",
                 norms([](ModelBuilder& b) { attr(node(b, "sm"), "axis").ints = {0}; }),
                 "node 'sm' (softmax): attribute 'axis'[0] = 0 is outside [1, 3]"});
    v.push_back({"int8 softmax multiplier 0",
                 norms([](ModelBuilder& b) { attr(node(b, "sm"), "multiplier").ints = {0}; }),
                 "node 'sm' (softmax): attribute 'multiplier'[0] = 0 is outside [1, 1073741824]"});
    v.push_back({"int8 softmax multiplier above 2^30", norms([](ModelBuilder& b) {
                     attr(node(b, "sm"), "multiplier").ints = {(int64_t{1} << 30) + 1};
                 }),
                 "attribute 'multiplier'[0] = 1073741825 is outside [1, 1073741824]"});
    v.push_back({"int8 softmax without a clamp",
                 norms([](ModelBuilder& b) { remove_attr(node(b, "sm"), "clamp"); }),
                 "node 'sm' (softmax): missing attribute 'clamp'"});
    v.push_back({"int8 softmax with an eps", norms([](ModelBuilder& b) {
                     node(b, "sm").attrs.push_back(float_attr("eps", {1e-5f}));
                 }),
                 "node 'sm' (softmax): unknown attribute 'eps'"});
    v.push_back({"int8 softmax table of 255", norms([](ModelBuilder& b) {
                     value(b, "sm.table").dims = {255};
                     value(b, "sm.table").data.resize(255 * 4);
                 }),
                 "node 'sm' (softmax): table 'sm.table' has shape [255], expected [256]"});
    v.push_back({"int8 softmax table of int8", norms([](ModelBuilder& b) {
                     value(b, "sm.table").dtype = 1;
                     value(b, "sm.table").data.resize(256);
                 }),
                 "node 'sm' (softmax): table 'sm.table' must be int32, got int8"});
    v.push_back({"int8 softmax table as an activation", norms([](ModelBuilder& b) {
                     node(b, "sm").inputs[1] = value_id(b, "x");
                 }),
                 "node 'sm' (softmax): table 'x' must be a constant"});
    v.push_back({"int8 softmax table T[0] below 2^20", norms([](ModelBuilder& b) {
                     std::vector<uint8_t>& t = value(b, "sm.table").data;
                     t[0] = t[1] = 0xFF;  // 2^20 - 1, little-endian
                     t[2] = 0x0F;
                 }),
                 "node 'sm' (softmax): table 'sm.table'[0] = 1048575 must be 2^20"});
    v.push_back({"int8 softmax table entry above 2^20", norms([](ModelBuilder& b) {
                     std::vector<uint8_t>& t = value(b, "sm.table").data;
                     t[4 * 7] = 0x01;  // 2^20 + 1, little-endian
                     t[4 * 7 + 1] = 0x00;
                     t[4 * 7 + 2] = 0x10;
                     t[4 * 7 + 3] = 0x00;
                 }),
                 "node 'sm' (softmax): table 'sm.table'[7] = 1048577 is outside [0, 2^20]"});
    v.push_back({"int8 softmax table entry negative", norms([](ModelBuilder& b) {
                     std::fill_n(value(b, "sm.table").data.begin() + 4 * 9, 4, uint8_t{0xFF});
                 }),
                 "table 'sm.table'[9] = -1 is outside [0, 2^20]"});
    v.push_back({"int8 softmax of a float32 output", norms([](ModelBuilder& b) {
                     value(b, "sm").dtype = 3;
                     value(b, "sm").scale = 0.0f;
                     value(b, "sm").zero_point = 0;
                 }),
                 "node 'sm' (softmax): output 'sm' must be int8, got float32"});
    v.push_back({"int8 layer_norm axes 3",
                 norms([](ModelBuilder& b) { attr(node(b, "ln"), "axes").ints = {4}; }),
                 "node 'ln' (layer_norm): attribute 'axes'[0] = 4 is outside [1, 3]"});
    v.push_back({"int8 layer_norm with eps", norms([](ModelBuilder& b) {
                     remove_attr(node(b, "ln"), "eps_term");
                     node(b, "ln").attrs.push_back(float_attr("eps", {1e-5f}));
                 }),
                 "node 'ln' (layer_norm): missing attribute 'eps_term'"});
    v.push_back({"int8 layer_norm eps_term 0",
                 norms([](ModelBuilder& b) { attr(node(b, "ln"), "eps_term").ints = {0}; }),
                 "node 'ln' (layer_norm): attribute 'eps_term'[0] = 0 is outside [1, "
                 "2305843009213693952]"});
    v.push_back({"int8 layer_norm eps_term above 2^61", norms([](ModelBuilder& b) {
                     attr(node(b, "ln"), "eps_term").ints = {(int64_t{1} << 61) + 1};
                 }),
                 "attribute 'eps_term'[0] = 2305843009213693953 is outside"});
    v.push_back({"int8 layer_norm with one multiplier", norms([](ModelBuilder& b) {
                     attr(node(b, "ln"), "multiplier").ints = {1 << 30};
                 }),
                 "node 'ln' (layer_norm): attribute 'multiplier' must have 15 values, got 1"});
    v.push_back({"int8 layer_norm shift 63",
                 norms([](ModelBuilder& b) { attr(node(b, "ln"), "shift").ints[4] = 63; }),
                 "node 'ln' (layer_norm): attribute 'shift'[4] = 63 is outside [1, 62]"});
    v.push_back({"int8 layer_norm weight of the normalized shape", norms([](ModelBuilder& b) {
                     value(b, "ln.weight").dims = {3, 5};
                 }),
                 "node 'ln' (layer_norm): weight 'ln.weight' must have rank 1, got shape [3, 5]"});
    v.push_back({"int8 layer_norm weight of the wrong length", norms([](ModelBuilder& b) {
                     value(b, "ln.weight").dims = {14};
                     value(b, "ln.weight").data.resize(14);
                 }),
                 "node 'ln' (layer_norm): 'ln.weight' has shape [14], expected [15] (one per "
                 "channel of the normalized dims of the input [1, 6, 3, 5])"});
    v.push_back({"int8 layer_norm float32 weight", norms([](ModelBuilder& b) {
                     value(b, "ln.weight").dtype = 3;
                     value(b, "ln.weight").data.resize(60);
                 }),
                 "node 'ln' (layer_norm): weight 'ln.weight' must be int8, got float32"});
    v.push_back({"int8 layer_norm int8 bias", norms([](ModelBuilder& b) {
                     value(b, "ln.bias").dtype = 1;
                     value(b, "ln.bias").data.resize(15);
                 }),
                 "node 'ln' (layer_norm): bias 'ln.bias' must be int32, got int8"});
    v.push_back({"int8 layer_norm bias above 2^30", norms([](ModelBuilder& b) {
                     std::vector<uint8_t>& bias = value(b, "ln.bias").data;
                     bias[4 * 2] = 0x01;  // 2^30 + 1, little-endian
                     bias[4 * 2 + 1] = bias[4 * 2 + 2] = 0x00;
                     bias[4 * 2 + 3] = 0x40;
                 }),
                 "node 'ln' (layer_norm): bias 'ln.bias'[2] = 1073741825 is outside [-2^30, "
                 "2^30]"});
    v.push_back({"int8 group_norm groups 4", norms([](ModelBuilder& b) {
                     attr(node(b, "gn"), "groups").ints = {4};
                 }),
                 "node 'gn' (group_norm): groups = 4 does not divide the 6 channels of "
                 "[1, 6, 3, 5]"});
    v.push_back({"int8 group_norm groups 0",
                 norms([](ModelBuilder& b) { attr(node(b, "gn"), "groups").ints = {0}; }),
                 "node 'gn' (group_norm): attribute 'groups'[0] = 0 is outside [1, 6]"});
    v.push_back({"int8 group_norm with axes", norms([](ModelBuilder& b) {
                     node(b, "gn").attrs.push_back(AttrSpec("axes", {1}));
                 }),
                 "node 'gn' (group_norm): unknown attribute 'axes'"});
    v.push_back({"int8 group_norm weight per group", norms([](ModelBuilder& b) {
                     value(b, "gn.weight").dims = {3};
                     value(b, "gn.weight").data.resize(3);
                 }),
                 "node 'gn' (group_norm): 'gn.weight' has shape [3], expected [6] (one per "
                 "channel of the input [1, 6, 3, 5])"});
    v.push_back({"int8 group_norm without a bias",
                 norms([](ModelBuilder& b) { node(b, "gn").inputs.pop_back(); }),
                 "node 'gn' (group_norm): expects 3 inputs, got 2"});
    v.push_back({"int8 group_norm clamp past 127",
                 norms([](ModelBuilder& b) { attr(node(b, "gn"), "clamp").ints = {-128, 128}; }),
                 "node 'gn' (group_norm): attribute 'clamp'[1] = 128 is outside [-128, 127]"});

    // float32 group_norm and l2_normalize (float_norms_model).
    const auto float_norms = [](const std::function<void(ModelBuilder&)>& edit) {
        return edited_model(edit, qtk_test::float_norms_model);
    };
    v.push_back({"float group_norm groups 4", float_norms([](ModelBuilder& b) {
                     attr(node(b, "gn"), "groups").ints = {4};
                 }),
                 "node 'gn' (group_norm): groups = 4 does not divide the 6 channels"});
    v.push_back({"float group_norm eps 0", float_norms([](ModelBuilder& b) {
                     attr(node(b, "gn"), "eps").floats = {0.0f};
                 }),
                 "node 'gn' (group_norm): attribute 'eps' = 0.000000 must be finite and > 0"});
    v.push_back({"float group_norm with eps_term", float_norms([](ModelBuilder& b) {
                     remove_attr(node(b, "gn"), "eps");
                     node(b, "gn").attrs.push_back(AttrSpec("eps_term", {1}));
                 }),
                 "node 'gn' (group_norm): missing attribute 'eps'"});
    v.push_back({"float group_norm bias of the wrong length", float_norms([](ModelBuilder& b) {
                     value(b, "gn.bias").dims = {5};
                     value(b, "gn.bias").data.resize(20);
                 }),
                 "node 'gn' (group_norm): 'gn.bias' has shape [5], expected [6] (the channels "
                 "of the input [1, 6, 3, 5])"});
    v.push_back({"float group_norm int8 weight", float_norms([](ModelBuilder& b) {
                     value(b, "gn.weight").dtype = 1;
                     value(b, "gn.weight").data.resize(6);
                 }),
                 "node 'gn' (group_norm): weight 'gn.weight' must be float32, got int8"});
    v.push_back({"l2_normalize axis 0",
                 float_norms([](ModelBuilder& b) { attr(node(b, "l2"), "axis").ints = {0}; }),
                 "node 'l2' (l2_normalize): attribute 'axis'[0] = 0 is outside [1, 3]"});
    v.push_back({"l2_normalize eps negative", float_norms([](ModelBuilder& b) {
                     attr(node(b, "l2"), "eps").floats = {-1.0f};
                 }),
                 "node 'l2' (l2_normalize): attribute 'eps' = -1.000000 must be finite and >= 0"});
    v.push_back({"l2_normalize eps infinite", float_norms([](ModelBuilder& b) {
                     attr(node(b, "l2"), "eps").floats = {std::numeric_limits<float>::infinity()};
                 }),
                 "node 'l2' (l2_normalize): attribute 'eps' = inf must be finite and >= 0"});
    v.push_back({"l2_normalize without eps",
                 float_norms([](ModelBuilder& b) { remove_attr(node(b, "l2"), "eps"); }),
                 "node 'l2' (l2_normalize): missing attribute 'eps'"});
    v.push_back({"int8 l2_normalize with a softmax table",
                 norms([](ModelBuilder& b) { node(b, "sm").op = "l2_normalize"; }),
                 "node 'sm' (l2_normalize): expects 1 inputs, got 2"});

    v.push_back({"add of two constants", transformer([](ModelBuilder& b) {
                     node(b, "pos.add").inputs[0] = value_id(b, "pos_embedding");
                 }),
                 "node 'pos.add' (add): both inputs are constants"});
    v.push_back({"add of a constant whose dim 0 is not 1", transformer([](ModelBuilder& b) {
                     value(b, "pos_embedding").dims = {5, 1, 6};
                 }),
                 "node 'pos.add' (add): constant 'pos_embedding' has shape [5, 1, 6]; its dim 0 "
                 "faces the batch, so it must be 1"});
    v.push_back({"add of a constant that does not broadcast", transformer([](ModelBuilder& b) {
                     value(b, "pos_embedding").dims = {1, 6, 5};
                 }),
                 "inputs of shapes [1, 5, 6] and [1, 6, 5] do not broadcast"});
    v.push_back({"mul by a constant of lower rank", transformer([](ModelBuilder& b) {
                     value(b, "attn.scale").dims = {1};
                 }),
                 "node 'attn.scale' (mul): inputs of shapes [1, 2, 5, 5] and [1] do not "
                 "broadcast (equal ranks"});
    v.push_back({"div by an int8 constant", transformer([](ModelBuilder& b) {
                     value(b, "divisor").dtype = 1;
                     value(b, "divisor").data.resize(6);
                 }),
                 "node 'norm.div' (div): constant input 1 ('divisor') must be float32, got int8"});
    v.push_back({"sub of float32 and int8", transformer([](ModelBuilder& b) {
                     node(b, "residual.sub").inputs[1] = value_id(b, "q8");
                 }),
                 "node 'residual.sub' (sub): input 1 ('q8') must be a float32 activation"});
    v.push_back({"sub of int8", transformer([](ModelBuilder& b) {
                     node(b, "q8.slice").op = "sub";
                 }),
                 "node 'q8.slice' (sub): op 'sub' has no int8 kernel (input 0 'q8' is int8)"});
    v.push_back({"div with an empty bounds", transformer([](ModelBuilder& b) {
                     node(b, "norm.div").attrs.push_back(float_attr("bounds", {1.0f, 0.0f}));
                 }),
                 "node 'norm.div' (div): attribute 'bounds' = [1.000000, 0.000000] is empty"});
    v.push_back({"slice attributes of the wrong count", transformer([](ModelBuilder& b) {
                     attr(node(b, "head.token"), "starts").ints = {0};
                 }),
                 "node 'head.token' (slice): attribute 'starts' must have 2 values, got 1"});
    v.push_back({"slice of an empty range", transformer([](ModelBuilder& b) {
                     attr(node(b, "head.token"), "ends").ints = {0, 6};
                 }),
                 "attribute 'starts'[0] = 0 is not below 'ends'[0] = 0: dim 1 would be empty"});
    v.push_back({"slice past the dim", transformer([](ModelBuilder& b) {
                     attr(node(b, "head.token"), "ends").ints = {1, 7};
                 }),
                 "node 'head.token' (slice): attribute 'ends'[1] = 7 is past the input's dim 2 "
                 "of 6"});
    v.push_back({"slice step 0", transformer([](ModelBuilder& b) {
                     attr(node(b, "head.token"), "steps").ints = {0, 1};
                 }),
                 "attribute 'steps'[0] = 0 is outside [1, 2147483647]"});
    v.push_back({"slice with a negative start", transformer([](ModelBuilder& b) {
                     attr(node(b, "head.token"), "starts").ints = {-1, 0};
                 }),
                 "attribute 'starts'[0] = -1 is outside [0, 2147483647]"});
    v.push_back({"int8 slice changing the quantization",
                 transformer([](ModelBuilder& b) { value(b, "q8s").zero_point += 1; }),
                 "node 'q8.slice' (slice): output 'q8s' must keep its input's (scale, "
                 "zero_point)"});
    v.push_back({"expand_batch like a constant", transformer([](ModelBuilder& b) {
                     node(b, "cls.expand").inputs[1] = value_id(b, "pos_embedding");
                 }),
                 "node 'cls.expand' (expand_batch): input 1 ('pos_embedding') must be an "
                 "activation: the output takes its batch size"});
    v.push_back({"expand_batch of a constant whose dim 0 is not 1",
                 transformer([](ModelBuilder& b) { value(b, "cls_token").dims = {2, 1, 3}; }),
                 "constant 'cls_token' has shape [2, 1, 3]; its dim 0 must be 1"});
    v.push_back({"expand_batch of an int8 constant", transformer([](ModelBuilder& b) {
                     ValueSpec& token = value(b, "cls_token");
                     token.dtype = 1;
                     token.data.resize(6);
                 }),
                 "node 'cls.expand' (expand_batch): input 0 ('cls_token') is an int8 constant, "
                 "which carries no (scale, zero_point)"});
    v.push_back({"expand_batch with an attribute", transformer([](ModelBuilder& b) {
                     node(b, "cls.expand").attrs.push_back(AttrSpec("axis", {0}));
                 }),
                 "node 'cls.expand' (expand_batch): unknown attribute 'axis'"});
    v.push_back({"float bilinear fraction over 1", transformer([](ModelBuilder& b) {
                     attr(node(b, "up"), "h_weight").floats[1] = 1.5f;
                 }),
                 "node 'up' (resize_bilinear): attribute 'h_weight'[1] = 1.500000 is outside "
                 "[0, 1]"});
    v.push_back({"float bilinear fraction NaN", transformer([](ModelBuilder& b) {
                     attr(node(b, "up"), "w_weight").floats[0] = std::nanf("");
                 }),
                 "attribute 'w_weight'[0] is NaN"});
    v.push_back({"float bilinear with Q10 weights", transformer([](ModelBuilder& b) {
                     attr(node(b, "up"), "h_weight") = AttrSpec("h_weight", {0, 717, 307, 1024, 0});
                 }),
                 "node 'up' (resize_bilinear): attribute 'h_weight' must be an f32 list"});
    v.push_back({"float bilinear with a requantization", transformer([](ModelBuilder& b) {
                     node(b, "up").attrs.push_back(AttrSpec("multiplier", {1 << 30}));
                 }),
                 "node 'up' (resize_bilinear): unknown attribute 'multiplier'"});
    v.push_back({"float bilinear index past the height", transformer([](ModelBuilder& b) {
                     attr(node(b, "up"), "h1").ints = {1, 1, 2, 2, 3};
                 }),
                 "attribute 'h1'[4] = 3 is outside [0, 3) (the input's height"});

    // conv_transpose2d, reflect / replicate pad and the float functions with attributes
    // (issue 18's ops), on a small valid model of each.
    const auto upsampling = [](const std::function<void(ModelBuilder&)>& edit) {
        ModelBuilder b;
        qtk_test::Rng rng(5);
        const uint32_t x = b.activation("x", {1, 4, 3, 3}, 0.05f, 2);
        const uint32_t w = b.weight("up.weight", {6, 2, 3, 3}, qtk_test::random_weights(rng, 108));
        const uint32_t bias = b.bias("up.bias", {6}, qtk_test::random_bias(rng, 6));
        const uint32_t y = b.activation("y", {1, 6, 6, 6}, 0.1f, -1);
        std::vector<AttrSpec> attrs = {AttrSpec("stride", {2, 2}), AttrSpec("padding", {1, 1}),
                                       AttrSpec("output_padding", {1, 1}),
                                       AttrSpec("dilation", {1, 1}), AttrSpec("groups", {2})};
        for (const AttrSpec& a : qtk_test::requant_attrs(6, 0.05, 0.02, 0.1)) {
            attrs.push_back(a);
        }
        b.node("conv_transpose2d", "up", {x, w, bias}, {y}, attrs);
        const uint32_t padded = b.activation("padded", {1, 6, 9, 7}, 0.1f, -1);
        b.node("pad", "pad", {y}, {padded}, {AttrSpec("pads", {1, 0, 2, 1}), AttrSpec("mode", {1})});
        const uint32_t f = b.float_activation("f", {1, 6, 9, 7});
        b.node("dequantize", "dequant", {padded}, {f});
        const uint32_t g = b.float_activation("g", {1, 6, 9, 7});
        b.node("softplus", "act", {f}, {g},
               {qtk_test::float_attr("beta", {1.0f}), qtk_test::float_attr("threshold", {20.0f})});
        b.inputs = {x};
        b.outputs = {g};
        edit(b);
        return b.build();
    };
    v.push_back({"conv_transpose2d output_padding as large as the stride",
                 upsampling([](ModelBuilder& b) {
                     attr(node(b, "up"), "output_padding").ints = {1, 2};
                 }),
                 "node 'up' (conv_transpose2d): attribute 'output_padding'[1] = 2 must be smaller "
                 "than the stride or the dilation (2, 1)"});
    v.push_back({"conv_transpose2d without output_padding", upsampling([](ModelBuilder& b) {
                     remove_attr(node(b, "up"), "output_padding");
                 }),
                 "node 'up' (conv_transpose2d): missing attribute 'output_padding'"});
    v.push_back({"conv_transpose2d groups not dividing the output channels",
                 upsampling([](ModelBuilder& b) { attr(node(b, "up"), "groups").ints = {4}; }),
                 "groups 4 does not divide the weight's 6 output channels"});
    v.push_back({"conv_transpose2d input channels not the weight's",
                 upsampling([](ModelBuilder& b) { attr(node(b, "up"), "groups").ints = {3}; }),
                 "input has 4 channels, the weight expects 6 (2 per group x 3 groups)"});
    v.push_back({"conv_transpose2d weight of -128", upsampling([](ModelBuilder& b) {
                     value(b, "up.weight").data[5] = static_cast<uint8_t>(-128);
                 }),
                 "weight 'up.weight' holds -128 at element 5"});
    v.push_back({"conv_transpose2d multipliers for too few channels",
                 upsampling([](ModelBuilder& b) {
                     attr(node(b, "up"), "multiplier").ints.pop_back();
                 }),
                 "attribute 'multiplier' must have 6 values, got 5"});
    v.push_back({"pad mode 3", upsampling([](ModelBuilder& b) {
                     attr(node(b, "pad"), "mode").ints = {3};
                 }),
                 "node 'pad' (pad): attribute 'mode'[0] = 3 is outside [0, 2]"});
    v.push_back({"reflect pad with a value", upsampling([](ModelBuilder& b) {
                     node(b, "pad").attrs.push_back(AttrSpec("value", {0}));
                 }),
                 "node 'pad' (pad): unknown attribute 'value'"});
    v.push_back({"reflect pad as wide as the plane", upsampling([](ModelBuilder& b) {
                     attr(node(b, "pad"), "pads").ints = {6, 0, 2, 1};
                     value(b, "padded").dims = {1, 6, 9, 12};
                     value(b, "f").dims = {1, 6, 9, 12};
                     value(b, "g").dims = {1, 6, 9, 12};
                 }),
                 "reflect padding (left 6, right 0, top 2, bottom 1) of a 6x6 plane: each pad "
                 "must be smaller than its axis"});
    v.push_back({"softplus without its threshold", upsampling([](ModelBuilder& b) {
                     remove_attr(node(b, "act"), "threshold");
                 }),
                 "node 'act' (softplus): missing attribute 'threshold'"});
    v.push_back({"softplus with an infinite beta", upsampling([](ModelBuilder& b) {
                     attr(node(b, "act"), "beta").floats = {INFINITY};
                 }),
                 "node 'act' (softplus): attribute 'beta' must be finite"});

    // prelu (spec 22): int8 multipliers and shifts, one per channel or one; float32 slopes.
    const auto prelu = [](const std::function<void(ModelBuilder&)>& edit) {
        return edited_model(edit, prelu_model);
    };
    v.push_back({"prelu without its clamp",
                 prelu([](ModelBuilder& b) { remove_attr(node(b, "prelu"), "clamp"); }),
                 "node 'prelu' (prelu): missing attribute 'clamp'"});
    v.push_back({"prelu with 2 multipliers for 3 channels", prelu([](ModelBuilder& b) {
                     attr(node(b, "prelu"), "multiplier").ints = {1342177280, 0};
                 }),
                 "node 'prelu' (prelu): 2 slopes for input [1, 3, 4, 5]: one, or one per channel "
                 "(dim 1)"});
    v.push_back({"prelu with a multiplier of -2^31", prelu([](ModelBuilder& b) {
                     attr(node(b, "prelu"), "multiplier").ints = {0, -2147483648LL, 0};
                 }),
                 "node 'prelu' (prelu): attribute 'multiplier'[1] = -2147483648 is outside"});
    v.push_back({"prelu with a shift of 0", prelu([](ModelBuilder& b) {
                     attr(node(b, "prelu"), "shift").ints = {32, 0, 1};
                 }),
                 "node 'prelu' (prelu): attribute 'shift'"});
    v.push_back({"prelu with a negative positive multiplier", prelu([](ModelBuilder& b) {
                     attr(node(b, "prelu"), "positive_multiplier").ints = {-5};
                 }),
                 "node 'prelu' (prelu): attribute 'positive_multiplier'"});
    v.push_back({"float prelu without its slopes",
                 prelu([](ModelBuilder& b) { node(b, "prelu_f").inputs.pop_back(); }),
                 "node 'prelu_f' (prelu): expects 2 inputs, got 1"});
    v.push_back({"float prelu with 2 slopes for 3 channels", prelu([](ModelBuilder& b) {
                     value(b, "prelu_f.weight").dims = {2};
                     value(b, "prelu_f.weight").data.resize(8);
                 }),
                 "node 'prelu_f' (prelu): 2 slopes for input [1, 3, 4, 5]"});
    return v;
}

void test_malformed() {
    const std::vector<Variant> variants = malformed_variants();
    CHECK(variants.size() >= 20);
    for (const Variant& v : variants) {
        bool threw = false;
        std::string message;
        try {
            qtk::Model::from_bytes(v.bytes.data(), v.bytes.size());
        } catch (const qtk::Error& e) {
            threw = true;
            message = e.what();
        }
        if (!threw) {
            qtk_test::report_failure(__FILE__, __LINE__, v.what + ": loaded without error");
        } else if (message.find(v.expected) == std::string::npos) {
            qtk_test::report_failure(
                __FILE__, __LINE__,
                v.what + ": message '" + message + "' lacks '" + v.expected + "'");
        }
    }
    std::printf("%zu malformed variants checked\n", variants.size());
}

void test_valid_model() {
    const Bytes bytes = qtk_test::sample_model().build();
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    CHECK(model->producer() == "qtk-test 0.1");
    CHECK_EQ(model->node_count(), 11u);
    const std::vector<std::string> ops = model->op_names();
    CHECK(ops.front() == "conv2d" && ops.back() == "linear");
    CHECK_EQ(model->inputs().size(), 1u);
    CHECK(model->inputs()[0].name == "x");
    CHECK(model->inputs()[0].shape == (qtk::Shape{1, 2, 6, 6}));
    CHECK(model->inputs()[0].scale == 0.05f);
    CHECK_EQ(model->inputs()[0].zero_point, 3);
    CHECK_EQ(model->outputs().size(), 2u);
    CHECK(model->outputs()[1].name == "e");

    const Bytes mixed_bytes = qtk_test::mixed_model().build();
    const auto mixed = qtk::Model::from_bytes(mixed_bytes.data(), mixed_bytes.size());
    CHECK(mixed->inputs()[1].name == "y");
    CHECK(mixed->inputs()[1].dtype == qtk::DType::kFloat32);
    CHECK(mixed->inputs()[1].scale == 0.0f);
    CHECK(mixed->outputs()[0].dtype == qtk::DType::kFloat32);
    CHECK(mixed->outputs()[2].dtype == qtk::DType::kInt8);
    CHECK(mixed->op_names()[0] == "quantize");

    const Bytes prelu_bytes = prelu_model().build();  // the base of the prelu refusals loads
    CHECK_EQ(qtk::Model::from_bytes(prelu_bytes.data(), prelu_bytes.size())->node_count(), 3u);
}

void test_load_from_file() {
    const Bytes bytes = qtk_test::sample_model().build();
    const char* path = "test_loader_model.qmodel";
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()),
                  static_cast<std::streamsize>(bytes.size()));
    }
    const auto model = qtk::Model::load(path);  // mapped
    qtk::Session session(model);
    const std::vector<int8_t> x(72, 1);
    CHECK_EQ(session.run({x.data()}, {{1, 2, 6, 6}}).size(), 2u);
    // An empty file cannot be mapped: it is read, then refused.
    {
        std::ofstream empty(path, std::ios::binary | std::ios::trunc);
    }
    CHECK_THROWS_WITH(qtk::Model::load(path),
                      "model file 'test_loader_model.qmodel': qmodel: file is 0 bytes");
    std::remove(path);
    CHECK_THROWS_WITH(qtk::Model::load("/nonexistent/dir/m.qmodel"),
                      "cannot open model file '/nonexistent/dir/m.qmodel'");
    CHECK_THROWS_WITH(qtk::Model::load("."), "model file '.'");
}

void test_crc32_known_answer() {
    const char* text = "123456789";
    CHECK_EQ(qtk::detail::crc32(reinterpret_cast<const uint8_t*>(text), 9), 0xCBF43926u);
    CHECK_EQ(qtk::detail::crc32(nullptr, 0), 0u);
}

}  // namespace

int main() {
    test_crc32_known_answer();
    test_valid_model();
    test_malformed();
    test_load_from_file();
    return qtk_test::check_report();
}
