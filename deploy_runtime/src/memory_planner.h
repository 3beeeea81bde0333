// Places every activation of a run in one arena, reusing bytes whose tensors are no longer live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qtk {
namespace detail {

constexpr uint64_t kArenaAlignment = 64;

// A tensor is live at steps first_step..last_step (inclusive; a step is one node's execution).
struct TensorLifetime {
    uint64_t bytes = 0;
    size_t first_step = 0;
    size_t last_step = 0;
};

struct MemoryPlan {
    std::vector<uint64_t> offsets;  // per tensor, multiples of kArenaAlignment
    uint64_t arena_bytes = 0;
    uint64_t lower_bound = 0;  // max over steps of the sum of live tensor sizes
};

// Greedy by size: the largest tensor first, each at the lowest aligned offset that overlaps no
// tensor already placed whose lifetime overlaps its own. Deterministic (ties by index).
MemoryPlan plan_memory(const std::vector<TensorLifetime>& tensors);

}  // namespace detail
}  // namespace qtk
