#include "graph_passes.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "conv2d.h"
#include "op_kernel.h"

namespace qtk {
namespace detail {

// The tables of a prelu node, one per slope, and of a lut node, one or one per channel:
// [count][256] each, checked by their references (kernels/reference/prelu.cpp, elementwise.cpp).
std::vector<int8_t> prelu_int8_tables(const NodeView& node);
std::vector<int8_t> lut_int8_tables(const NodeView& node);

namespace {

constexpr size_t kNoProducer = static_cast<size_t>(-1);  // graph inputs and constants

const Attr* find_ints(const Node& node, const char* key, size_t count) {
    for (const Attr& a : node.attrs) {
        if (a.key == key) {
            return a.kind == AttrKind::kInts && a.ints.size() == count ? &a : nullptr;
        }
    }
    return nullptr;
}

Attr ints_attr(const char* key, std::vector<int64_t> ints) {
    Attr a;
    a.key = key;
    a.kind = AttrKind::kInts;
    a.ints = std::move(ints);
    return a;
}

// An int8 add as the file writes it (no pass has fused anything into it): the fusion passes take
// only those; malformed adds stay, for their kernel to report.
bool plain_int8_add(const Graph& g, const Node& add) {
    return add.op == "add" && add.inputs.size() == 2 && add.outputs.size() == 1 &&
           add.attrs.size() == 3 && find_ints(add, "multiplier", 2) && find_ints(add, "shift", 1) &&
           find_ints(add, "clamp", 2) && g.values[add.outputs[0]].dtype == DType::kInt8;
}

// Drops the nodes marked `gone`, keeping the others' order; returns how many went.
size_t remove_nodes(Graph& g, const std::vector<bool>& gone) {
    std::vector<Node> kept;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        if (!gone[k]) {
            kept.push_back(std::move(g.nodes[k]));
        }
    }
    const size_t removed = g.nodes.size() - kept.size();
    g.nodes = std::move(kept);
    return removed;
}

}  // namespace

size_t fuse_residual_adds(Graph& g) {
    std::vector<size_t> producer(g.values.size(), kNoProducer);
    std::vector<size_t> readers(g.values.size(), 0);  // node inputs and graph outputs
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        for (uint32_t id : g.nodes[k].inputs) {
            ++readers[id];
        }
        for (uint32_t id : g.nodes[k].outputs) {
            producer[id] = k;
        }
    }
    for (uint32_t id : g.outputs) {
        ++readers[id];
    }
    const auto is_int8 = [&](uint32_t id) { return g.values[id].dtype == DType::kInt8; };

    std::vector<bool> fused(g.nodes.size(), false);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& add = g.nodes[k];
        if (!plain_int8_add(g, add)) {
            continue;
        }
        const Attr* multiplier = find_ints(add, "multiplier", 2);
        const Attr* shift = find_ints(add, "shift", 1);
        const Attr* clamp = find_ints(add, "clamp", 2);
        // The operand whose conv runs last, of those whose residual already exists then.
        size_t operand = 2, conv_index = 0;
        for (size_t i = 0; i < 2; ++i) {
            const uint32_t conv_out = add.inputs[i], residual = add.inputs[1 - i];
            const size_t p = producer[conv_out];
            if (p == kNoProducer || g.nodes[p].op != "conv2d" || g.nodes[p].inputs.size() != 3 ||
                !is_int8(g.nodes[p].inputs[0]) || !is_int8(conv_out) || !is_int8(residual) ||
                readers[conv_out] != 1 ||
                (producer[residual] != kNoProducer && producer[residual] >= p)) {
                continue;
            }
            if (operand == 2 || p > conv_index) {
                operand = i;
                conv_index = p;
            }
        }
        if (operand == 2) {
            continue;
        }
        Node& conv = g.nodes[conv_index];
        const uint32_t conv_out = add.inputs[operand];
        const int64_t m_conv = multiplier->ints[operand];
        const int64_t m_residual = multiplier->ints[1 - operand];
        conv.inputs.push_back(add.inputs[1 - operand]);
        conv.outputs = add.outputs;
        conv.attrs.push_back(ints_attr("conv_zero_point", {g.values[conv_out].zero_point}));
        conv.attrs.push_back(ints_attr("add_multiplier", {m_conv, m_residual}));
        conv.attrs.push_back(ints_attr("add_shift", shift->ints));
        conv.attrs.push_back(ints_attr("add_clamp", clamp->ints));
        producer[add.outputs[0]] = conv_index;
        fused[k] = true;
    }
    return remove_nodes(g, fused);
}

size_t fuse_lookups_into_adds(Graph& g) {
    std::vector<std::vector<size_t>> readers(g.values.size());
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        for (uint32_t id : g.nodes[k].inputs) {
            readers[id].push_back(k);
        }
    }
    std::vector<bool> graph_output(g.values.size(), false);
    for (uint32_t id : g.outputs) {
        graph_output[id] = true;
    }
    std::vector<bool> fused(g.nodes.size(), false);
    for (Node& add : g.nodes) {
        if (!plain_int8_add(g, add)) {
            continue;
        }
        const uint32_t sum = add.outputs[0];
        if (graph_output[sum] || readers[sum].size() != 1) {
            continue;
        }
        const size_t k = readers[sum][0];
        const Node& lookup = g.nodes[k];
        const int32_t sum_zero_point = g.values[sum].zero_point;
        // The lookup's tables as a constant of shape [256] or [C, 256], C the sum's dim 1: a
        // lut's own (channels-last luts stay), a prelu's built from its slopes.
        const bool lut = lookup.op == "lut" && lookup.attrs.empty();
        if ((!lut && lookup.op != "prelu") || lookup.inputs[0] != sum) {
            continue;
        }
        std::vector<int8_t> tables;
        try {
            tables = lut ? lut_int8_tables(NodeView(g, lookup))
                         : prelu_int8_tables(NodeView(g, lookup));
        } catch (const Error&) {
            continue;  // malformed: its own kernel reports it
        }
        uint32_t table = 0;
        if (lut) {
            table = lookup.inputs[1];
        } else {
            Value v;
            v.name = lookup.name + ".table";
            v.shape = tables.size() == 256 ? Shape{256} : Shape{int64_t(tables.size() / 256), 256};
            v.constant = true;
            v.scale = 1.0f;
            auto owned = std::make_shared<const std::vector<int8_t>>(std::move(tables));
            v.data = reinterpret_cast<const uint8_t*>(owned->data());
            v.data_size = owned->size();
            g.unpacked_constants.push_back(std::move(owned));
            g.values.push_back(std::move(v));
            table = uint32_t(g.values.size() - 1);
        }
        add.inputs.push_back(table);
        add.attrs.push_back(ints_attr("sum_zero_point", {sum_zero_point}));
        add.outputs = lookup.outputs;
        fused[k] = true;
    }
    return remove_nodes(g, fused);
}

namespace {

// Ops that join a channels-last region, never pay for one: they read either layout alike.
// max_pool2d and global_avg_pool2d (told by their "layout" attribute); the element-wise lut and
// mul (its broadcasts too: squeeze-excitation's [N, C, 1, 1] factors become [N, 1, 1, C] beside
// the [N, H, W, C] activations). Not a lut with a table per channel (spec 25): channels-last, a
// table per byte defeats the vector lookups, and PP-LCNet ran 2.9x slower (2.24 ms against 0.77
// with one table per lut; 0.95 with those luts and their region NCHW, AMD EPYC Zen 5, 1 thread).
bool layout_free_member(const Graph& g, const Node& n) {
    if (n.op == "lut") {
        return n.inputs.size() == 2 && g.values[n.inputs[1]].shape.size() == 1;
    }
    return n.op == "max_pool2d" || n.op == "global_avg_pool2d" || n.op == "mul";
}

}  // namespace

size_t use_nhwc_layout(Graph& g, const NhwcChooser& choose) {
    std::vector<size_t> producer(g.values.size(), kNoProducer);
    std::vector<std::vector<size_t>> readers(g.values.size());
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        for (uint32_t id : g.nodes[k].inputs) {
            readers[id].push_back(k);
        }
        for (uint32_t id : g.nodes[k].outputs) {
            producer[id] = k;
        }
    }
    std::vector<bool> graph_output(g.values.size(), false);
    for (uint32_t id : g.outputs) {
        graph_output[id] = true;
    }

    // Whether node n's `count` first inputs and its one output are 4-d int8 activations.
    const auto int8_4d = [&](const Node& n, size_t count) {
        bool all = n.outputs.size() == 1 && n.inputs.size() >= count &&
                   g.values[n.outputs[0]].shape.size() == 4;
        for (size_t i = 0; all && i < count; ++i) {
            const Value& v = g.values[n.inputs[i]];
            all = v.dtype == DType::kInt8 && v.shape.size() == 4 && !v.constant;
        }
        return all;
    };
    std::vector<NhwcChoice> choice(g.nodes.size(), NhwcChoice::kNo);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& n = g.nodes[k];
        if (n.op == "conv2d" && (n.inputs.size() == 3 || n.inputs.size() == 4) && int8_4d(n, 1)) {
            choice[k] = choose(g, n);
        } else if (layout_free_member(g, n) && int8_4d(n, n.op == "mul" ? 2 : 1)) {
            choice[k] = NhwcChoice::kFits;
        }
    }
    // The input slots of a member that hold activations (a conv's input 0 and fused residual 3,
    // both of mul's, the others' input 0); the activations themselves; whether a reader reads
    // `id` as one.
    const auto activation_slots = [&](const Node& n) {
        if (n.op == "mul") {
            return std::vector<size_t>{0, 1};
        }
        return n.op == "conv2d" && n.inputs.size() == 4 ? std::vector<size_t>{0, 3}
                                                        : std::vector<size_t>{0};
    };
    const auto activations = [&](const Node& n) {
        std::vector<uint32_t> ids;
        for (size_t slot : activation_slots(n)) {
            ids.push_back(n.inputs[slot]);
        }
        return ids;
    };
    const auto reads_activation = [&](const Node& reader, uint32_t id) {
        const std::vector<uint32_t> ids = activations(reader);
        return std::find(ids.begin(), ids.end(), id) != ids.end();
    };

    // Regions: candidates joined along the activations between them (union-find, roots first).
    std::vector<size_t> region(g.nodes.size());
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        region[k] = k;
    }
    const auto root = [&](size_t k) {
        while (region[k] != k) {
            k = region[k] = region[region[k]];
        }
        return k;
    };
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        if (choice[k] == NhwcChoice::kNo) {
            continue;
        }
        for (uint32_t id : activations(g.nodes[k])) {
            const size_t p = producer[id];
            if (p != kNoProducer && choice[p] != NhwcChoice::kNo) {
                region[std::max(root(p), root(k))] = std::min(root(p), root(k));
            }
        }
    }
    // A region converts where its convs' activations outweigh the bytes its permutes move
    // kRegionGain times (or where a pin asks for it). A permute moves its tensor once; each conv
    // in NHWC saves transposes of about its own input and output. mobilenet_v2 is one region of
    // 51 convs behind permutes of 1/28 of their bytes (1 thread 2.64 -> 2.29 ms); shufflenet_v2's
    // branches of three convs are 2-3 times their permutes' bytes, and ran slower converted
    // (1.50 against 1.32 ms). A region with a conv over fewer than 4 input channels (an image's
    // stem) converts whatever its permutes: the channels-last kernel packs such a conv's
    // K by kernel rows, where NCHW pads every tap's channels to 4, a quarter or more of its
    // multiplies (BiRealNet18's 7x7 stem over 3 channels and its max-pool, behind permutes of 2.7
    // times fewer bytes: 973 -> 825 us with them, 1 thread, Zen 4).
    constexpr uint64_t kRegionGain = 8;
    constexpr int64_t kQuadChannels = 4;
    const auto bytes = [&](uint32_t id) { return uint64_t(element_count(g.values[id].shape)); };
    std::vector<uint64_t> conv_bytes(g.nodes.size(), 0), permute_bytes(g.nodes.size(), 0);
    std::vector<bool> pinned(g.nodes.size(), false), few_channels(g.nodes.size(), false);
    std::set<std::pair<size_t, uint32_t>> permuted;  // (region, NCHW input): one permute each
    std::vector<bool> read_nchw(g.values.size(), false);  // a conv output, outside its region
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        if (choice[k] == NhwcChoice::kNo) {
            continue;
        }
        const size_t r = root(k);
        const uint32_t out = g.nodes[k].outputs[0];
        pinned[r] = pinned[r] || choice[k] == NhwcChoice::kPinned;
        if (g.nodes[k].op == "conv2d") {
            conv_bytes[r] += bytes(g.nodes[k].inputs[0]) + bytes(out);
            few_channels[r] =
                few_channels[r] || g.values[g.nodes[k].inputs[0]].shape[1] < kQuadChannels;
        }
        for (uint32_t id : activations(g.nodes[k])) {
            const size_t p = producer[id];
            if ((p == kNoProducer || choice[p] == NhwcChoice::kNo || root(p) != r) &&
                permuted.insert({r, id}).second) {
                permute_bytes[r] += bytes(id);
            }
        }
        read_nchw[out] = graph_output[out];
        for (size_t reader : readers[out]) {
            read_nchw[out] = read_nchw[out] || choice[reader] == NhwcChoice::kNo ||
                             root(reader) != r || !reads_activation(g.nodes[reader], out);
        }
        permute_bytes[r] += read_nchw[out] ? bytes(out) : 0;
    }
    std::vector<bool> convert(g.nodes.size(), false);
    size_t count = 0;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const size_t r = root(k);
        convert[k] = choice[k] != NhwcChoice::kNo &&
                     (pinned[r] || few_channels[r] ||
                      conv_bytes[r] >= kRegionGain * permute_bytes[r]);
        count += convert[k];
    }
    if (count == 0) {
        return 0;
    }

    const auto add_value = [&](uint32_t from, const std::vector<int64_t>& perm, const char* tag) {
        Value v = g.values[from];
        v.name += tag;
        for (size_t d = 0; d < perm.size(); ++d) {
            v.shape[d] = g.values[from].shape[size_t(perm[d])];
        }
        g.values.push_back(std::move(v));
        return uint32_t(g.values.size() - 1);
    };
    const auto permute = [&](uint32_t from, uint32_t to, const std::vector<int64_t>& perm) {
        Node n;
        n.op = "permute";
        n.name = g.values[to].name;
        n.inputs = {from};
        n.outputs = {to};
        n.attrs.push_back(ints_attr("perm", perm));
        return n;
    };
    const std::vector<int64_t> to_nhwc = {0, 2, 3, 1}, to_nchw = {0, 3, 1, 2};

    std::map<uint32_t, uint32_t> nhwc_of;  // NCHW value -> its NHWC twin
    std::vector<Node> nodes;
    nodes.reserve(g.nodes.size() + 2 * count);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        Node node = std::move(g.nodes[k]);
        if (!convert[k]) {
            nodes.push_back(std::move(node));
            continue;
        }
        for (size_t i : activation_slots(node)) {
            const uint32_t id = node.inputs[i];
            auto twin = nhwc_of.find(id);
            if (twin == nhwc_of.end()) {
                twin = nhwc_of.emplace(id, add_value(id, to_nhwc, " (NHWC)")).first;
                nodes.push_back(permute(id, twin->second, to_nhwc));
            }
            node.inputs[i] = twin->second;
        }
        const uint32_t out = node.outputs[0];
        const uint32_t out_nhwc = add_value(out, to_nhwc, " (NHWC)");
        nhwc_of.emplace(out, out_nhwc);
        node.outputs[0] = out_nhwc;
        if (node.op != "lut" && node.op != "mul") {  // element-wise: the same in either layout
            node.attrs.push_back(ints_attr("layout", {kLayoutNhwc}));
        }
        nodes.push_back(std::move(node));
        if (read_nchw[out]) {
            nodes.push_back(permute(out_nhwc, out, to_nchw));
        }
    }
    g.nodes = std::move(nodes);
    return count;
}

}  // namespace detail
}  // namespace qtk
