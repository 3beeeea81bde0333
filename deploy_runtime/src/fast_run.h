// Fast-Run: where several algorithms compute a layer, time each on this machine and keep the
// fastest. Every algorithm gives the reference's bytes, so the choice changes only the time. A
// cache file remembers the winners, keyed by layer signature, thread count, CPU and qtk version,
// so later loads skip the search and choose the same kernels.
#pragma once

#include <map>
#include <string>

#include "graph.h"
#include "op_registry.h"
#include "qtk/runtime.h"

namespace qtk {
namespace detail {

// The cache file: one "<key>\t<algorithm>" line per layer; lines starting with '#' are comments.
class FastRunCache {
 public:
    // Reads `path` when it names an existing file (a malformed one is an Error naming the line);
    // an empty path keeps the cache in memory.
    explicit FastRunCache(std::string path);

    const std::string* find(const std::string& key) const;
    void record(const std::string& key, const std::string& algorithm);
    // Rewrites the file (through a temporary and a rename) when something was recorded.
    void save() const;

 private:
    std::string path_;
    std::map<std::string, std::string> entries_;
    bool changed_ = false;
};

// "<cpu> | qtk <version> | <threads> threads | <op> <dtype> <input shapes> <geometry attrs>":
// what decides a layer's speed, and nothing (like requantization constants) that does not.
std::string layer_key(const Graph& graph, const Node& node, int threads);

// The picker create_kernel() calls for a layer with several candidates: the cached winner when it
// is one of them; otherwise, under FastRun::kSearch, the fastest by median time on random inputs
// (recorded in the cache), and under kUse the first candidate. The cache must outlive the picker.
KernelPicker fast_run_picker(FastRun mode, FastRunCache& cache, int threads);

}  // namespace detail
}  // namespace qtk
