// How the Winograd convs (conv2d_int8_winograd.cpp, conv2d_float32_winograd.cpp) cut one run's
// work: the tiles of each (sample, group) plane into blocks whose transformed input fits a cache
// budget, whole micro-kernel calls of nr tiles each, and, where the planes and blocks are fewer
// than the threads, the output-channel tiles into ranges. A task is one block and one range. The
// cut depends on shapes and thread count, never on data, and changes no sum (each output's sum
// runs over its channels in order within one task). Built with the baseline flags.
#pragma once

#include <algorithm>
#include <cstdint>

namespace qtk {
namespace detail {

// Budgets for one block's transformed input: a share of L2, or what stays in a 32 KiB L1 data
// cache (the 2 ic nr_tiles <= L1 rule of MegEngine's int8 Winograd, in its byte form).
constexpr int64_t kWinogradL2BlockBytes = 256 * 1024;
constexpr int64_t kWinogradL1BlockBytes = 32 * 1024;

struct WinogradBlocking {
    int64_t block_tiles, blocks_per_plane;
    int64_t tiles_per_range, ranges;  // output-channel tiles per task, and ranges per block
};

// Tiles of the largest block: its transformed input within block_bytes, whole calls, one at least.
inline int64_t winograd_max_block_tiles(int64_t v_bytes_per_tile, int64_t block_bytes, int nr) {
    return nr * std::max<int64_t>(1, block_bytes / (v_bytes_per_tile * nr));
}

inline WinogradBlocking make_winograd_blocking(int64_t tiles, int64_t max_block_tiles,
                                               int64_t oc_tiles, int nr, int64_t planes,
                                               int threads) {
    const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
    WinogradBlocking b;
    const int64_t calls = ceil_div(tiles, nr);  // micro-kernel calls per plane
    const int64_t blocks =
        std::max(ceil_div(tiles, max_block_tiles), std::min(calls, ceil_div(threads, planes)));
    b.block_tiles = ceil_div(calls, blocks) * nr;
    b.blocks_per_plane = ceil_div(tiles, b.block_tiles);
    const int64_t ranges = std::min(oc_tiles, ceil_div(threads, planes * b.blocks_per_plane));
    b.tiles_per_range = ceil_div(oc_tiles, ranges);
    b.ranges = ceil_div(oc_tiles, b.tiles_per_range);
    return b;
}

}  // namespace detail
}  // namespace qtk
