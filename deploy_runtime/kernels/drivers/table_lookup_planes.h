// The driver of every op computed as int8 table lookups (lut, prelu): the reference's own tables,
// one for the tensor or one per channel, and lut_int8.h's vector lookups over each channel plane,
// threads splitting the elements (channels-last with a table per channel: a byte at a time). The
// op gives its reference factory and its tables.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "../contracts/lut_int8.h"
#include "beside_reference.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

// The elements one table covers in x [N, C, ...] (NCHW): a channel's plane with one table per
// channel, the whole tensor with one for all.
inline int64_t table_plane(const Shape& shape, int64_t channels) {
    return channels > 1 ? element_count(shape) / (shape[0] * channels) : element_count(shape);
}

// fn(first, last, table) for each piece of elements [begin, end) that lies in one plane of `plane`
// elements, with that plane's table of `tables` ([channels][256]; plane p is channel p % channels).
template <typename Fn>
void for_each_table_run(int64_t begin, int64_t end, int64_t plane,
                        const std::vector<int8_t>& tables, const Fn& fn) {
    const int64_t channels = static_cast<int64_t>(tables.size() / 256);
    while (begin < end) {
        const int64_t p = begin / plane;
        const int64_t stop = std::min(end, (p + 1) * plane);
        fn(begin, stop, &tables[size_t(p % channels * 256)]);
        begin = stop;
    }
}

template <std::unique_ptr<OpKernel> (*kMakeReference)(const NodeView& node),
          std::vector<int8_t> (*kTables)(const NodeView& node)>  // [channels][256]
class TableLookupPlanes final : public BesideReference {
 public:
    TableLookupPlanes(const NodeView& node, const Int8LutUkernel& ukernel)
        : BesideReference(node, kMakeReference),
          ukernel_(ukernel),
          tables_(kTables(node)),
          channels_last_(node.channels_last()) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t channels = static_cast<int64_t>(tables_.size() / 256);
        const Shape& shape = *io.input_shapes[0];
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        if (channels > 1 && channels_last_) {
            // Each pixel's channels, each from its own table: nothing for the vector lookups to
            // share, so a byte at a time, threads splitting the pixels.
            pool.parallel_for(element_count(shape) / channels, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin * channels; i < end * channels; i += channels) {
                    for (int64_t c = 0; c < channels; ++c) {
                        y[i + c] = tables_[size_t(c * 256 + int32_t{x[i + c]} + 128)];
                    }
                }
            });
            return;
        }
        // Ranges of elements, cut at plane boundaries so each piece has one table.
        const int64_t plane = table_plane(shape, channels);
        pool.parallel_for(element_count(shape), [&](int64_t begin, int64_t end) {
            for_each_table_run(begin, end, plane, tables_,
                               [&](int64_t first, int64_t last, const int8_t* table) {
                                   ukernel_.run(x + first, last - first, table, y + first);
                               });
        });
    }

 private:
    const Int8LutUkernel& ukernel_;
    const std::vector<int8_t> tables_;
    const bool channels_last_;
};

}  // namespace detail
}  // namespace qtk
