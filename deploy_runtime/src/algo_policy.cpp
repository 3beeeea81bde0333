#include "algo_policy.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace qtk {
namespace detail {
namespace {

const Conv2dAlgo* find_conv2d_algo(DType dtype, const std::string& name) {
    for (const Conv2dAlgo* algo : conv2d_algos(dtype)) {
        if (name == algo->name) {
            return algo;
        }
    }
    return nullptr;
}

std::string conv2d_algo_names(DType dtype) {
    std::string names;
    for (const Conv2dAlgo* algo : conv2d_algos(dtype)) {
        names += std::string(names.empty() ? "" : ", ") + algo->name;
    }
    return names;
}

}  // namespace

std::vector<const Conv2dAlgo*> usable_conv2d_algos(DType dtype, const Conv2dParams& params,
                                                   IsaLevel cap, const char* pinned) {
    if (pinned == nullptr || *pinned == '\0') {
        std::vector<const Conv2dAlgo*> usable;
        for (const Conv2dAlgo* algo : conv2d_algos(dtype)) {
            if (algo->usable(params, cap)) {
                usable.push_back(algo);
            }
        }
        // Those not preferred for this layer go after the rest; the reference stays last.
        std::stable_partition(usable.begin(), usable.end() - 1, [&](const Conv2dAlgo* algo) {
            return algo->preferred == nullptr || algo->preferred(params);
        });
        return usable;  // never empty: the reference is always usable
    }
    const DType other = dtype == DType::kInt8 ? DType::kFloat32 : DType::kInt8;
    if (const Conv2dAlgo* algo = find_conv2d_algo(dtype, pinned)) {
        if (!cpu_supports(algo->isa) || algo->isa > cap) {
            throw Error(std::string("QTK_CONV_ALGO=") + pinned + " is not usable here: " +
                        (!cpu_supports(algo->isa)
                             ? std::string("this CPU lacks ") + isa_name(algo->isa)
                             : std::string("QTK_ISA=") + isa_name(cap) + " excludes " +
                                   isa_name(algo->isa)));
        }
        // A pin serves the layers it fits (a depthwise kernel, the depthwise layers); the others
        // keep their usual choice, so one model can be run with each algorithm pinned in turn.
        return algo->fits_layout(params) && algo->fits(params)
                   ? std::vector<const Conv2dAlgo*>{algo}
                   : usable_conv2d_algos(dtype, params, cap, nullptr);
    }
    if (find_conv2d_algo(other, pinned) != nullptr) {  // it pins the other dtype's layers
        return usable_conv2d_algos(dtype, params, cap, nullptr);
    }
    throw Error(std::string("QTK_CONV_ALGO=") + pinned + " names no " + dtype_name(dtype) +
                " conv2d algorithm built here; use one of: " + conv2d_algo_names(dtype) + " (" +
                dtype_name(other) + " layers: " + conv2d_algo_names(other) + ")");
}

const Conv2dAlgo& choose_conv2d_algo(DType dtype, const Conv2dParams& params, IsaLevel cap,
                                     const char* pinned) {
    return *usable_conv2d_algos(dtype, params, cap, pinned).front();
}

NhwcChoice choose_nhwc(const Graph& graph, const Node& node) {
    try {
        Conv2dParams params =
            read_conv2d_params(NodeView(graph, node), DType::kInt8, DType::kInt32);
        const IsaLevel cap = isa_cap();
        const char* pinned = std::getenv("QTK_CONV_ALGO");
        const Conv2dAlgo& nchw = choose_conv2d_algo(DType::kInt8, params, cap, pinned);
        params.nhwc = true;
        const Conv2dAlgo& nhwc = choose_conv2d_algo(DType::kInt8, params, cap, pinned);
        const bool pins = pinned != nullptr && *pinned != '\0';
        const bool reference = &nhwc == conv2d_algos(DType::kInt8).back();  // always last
        if (reference || (pins && std::string(nchw.name) == pinned)) {
            return NhwcChoice::kNo;
        }
        return pins && std::string(nhwc.name) == pinned ? NhwcChoice::kPinned : NhwcChoice::kFits;
    } catch (const Error&) {
        return NhwcChoice::kNo;
    }
}

std::vector<KernelCandidate> conv2d_candidates(const NodeView& node, DType dtype) {
    const Conv2dParams params =
        read_conv2d_params(node, dtype, dtype == DType::kInt8 ? DType::kInt32 : dtype);
    std::vector<const Conv2dAlgo*> algos;
    try {
        algos = usable_conv2d_algos(dtype, params, isa_cap(), std::getenv("QTK_CONV_ALGO"));
    } catch (const Error& e) {
        node.fail(e.what());
    }
    std::vector<KernelCandidate> candidates;
    for (const Conv2dAlgo* algo : algos) {
        candidates.push_back({algo->name, [algo, node] { return algo->make(node); }});
    }
    return candidates;
}

std::vector<KernelCandidate> usable_candidates(const NodeView& node, const OpAlgo* const* first,
                                               const OpAlgo* const* last) {
    IsaLevel cap = IsaLevel::kScalar;
    try {
        cap = isa_cap();
    } catch (const Error& e) {
        node.fail(e.what());
    }
    std::vector<KernelCandidate> candidates;
    for (; first != last; ++first) {
        const OpAlgo* algo = *first;
        if (algo->usable(cap)) {
            candidates.push_back({algo->name, [algo, node] { return algo->make(node); }});
        }
    }
    return candidates;  // never empty: the reference is always usable
}

}  // namespace detail
}  // namespace qtk
