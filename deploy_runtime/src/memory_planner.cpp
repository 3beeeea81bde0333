#include "memory_planner.h"

#include <algorithm>
#include <numeric>

namespace qtk {
namespace detail {
namespace {

uint64_t align_up(uint64_t v) {
    return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

bool lifetimes_overlap(const TensorLifetime& a, const TensorLifetime& b) {
    return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

uint64_t live_bytes_peak(const std::vector<TensorLifetime>& tensors) {
    size_t steps = 0;
    for (const TensorLifetime& t : tensors) {
        steps = std::max(steps, t.last_step + 1);
    }
    std::vector<uint64_t> delta(steps + 1, 0);  // += at first_step, -= after last_step
    for (const TensorLifetime& t : tensors) {
        delta[t.first_step] += t.bytes;
        delta[t.last_step + 1] -= t.bytes;  // unsigned wrap-around cancels in the running sum
    }
    uint64_t live = 0;
    uint64_t peak = 0;
    for (size_t s = 0; s < steps; ++s) {
        live += delta[s];
        peak = std::max(peak, live);
    }
    return peak;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<TensorLifetime>& tensors) {
    MemoryPlan plan;
    plan.offsets.assign(tensors.size(), 0);
    plan.lower_bound = live_bytes_peak(tensors);

    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return tensors[a].bytes > tensors[b].bytes; });

    std::vector<size_t> placed;     // in placement order
    std::vector<size_t> conflicts;  // placed tensors whose lifetime overlaps, by offset
    for (size_t t : order) {
        conflicts.clear();
        for (size_t p : placed) {
            if (lifetimes_overlap(tensors[t], tensors[p])) {
                conflicts.push_back(p);
            }
        }
        std::sort(conflicts.begin(), conflicts.end(),
                  [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
        // Sweep the conflicts by start offset; the first gap that fits wins.
        uint64_t offset = 0;
        for (size_t c : conflicts) {
            if (offset + tensors[t].bytes <= plan.offsets[c]) {
                break;
            }
            offset = std::max(offset, align_up(plan.offsets[c] + tensors[c].bytes));
        }
        plan.offsets[t] = offset;
        plan.arena_bytes = std::max(plan.arena_bytes, offset + tensors[t].bytes);
        placed.push_back(t);
    }
    return plan;
}

}  // namespace detail
}  // namespace qtk
