#include "graph_passes.h"

#include <string>
#include <vector>

namespace qtk {
namespace detail {
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
    size_t count = 0;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& add = g.nodes[k];
        // Malformed adds stay, for their kernel to report.
        const Attr* multiplier = find_ints(add, "multiplier", 2);
        const Attr* shift = find_ints(add, "shift", 1);
        const Attr* clamp = find_ints(add, "clamp", 2);
        if (add.op != "add" || add.inputs.size() != 2 || add.outputs.size() != 1 ||
            add.attrs.size() != 3 || !multiplier || !shift || !clamp || !is_int8(add.outputs[0])) {
            continue;
        }
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
        const int64_t m_conv = multiplier->ints[operand], m_residual = multiplier->ints[1 - operand];
        conv.inputs.push_back(add.inputs[1 - operand]);
        conv.outputs = add.outputs;
        conv.attrs.push_back(ints_attr("conv_zero_point", {g.values[conv_out].zero_point}));
        conv.attrs.push_back(ints_attr("add_multiplier", {m_conv, m_residual}));
        conv.attrs.push_back(ints_attr("add_shift", shift->ints));
        conv.attrs.push_back(ints_attr("add_clamp", clamp->ints));
        producer[add.outputs[0]] = conv_index;
        fused[k] = true;
        ++count;
    }

    std::vector<Node> kept;
    kept.reserve(g.nodes.size() - count);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        if (!fused[k]) {
            kept.push_back(std::move(g.nodes[k]));
        }
    }
    g.nodes = std::move(kept);
    return count;
}

}  // namespace detail
}  // namespace qtk
