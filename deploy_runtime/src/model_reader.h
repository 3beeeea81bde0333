// The .qmodel reader: the file's bytes -> a graph that keeps every rule of docs/qmodel_format.md.
// It trusts nothing in the bytes; what comes after it (graph passes, kernels) trusts the graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "graph.h"

namespace qtk {
namespace detail {

// The graph of a whole .qmodel file of `file_size` bytes: header, sections, CRC, every record and
// the rules that span records (ids, definition before use, graph inputs and outputs). Constants
// point into `file` (or into the graph's unpacked_constants), so the bytes must outlive the graph
// and start 64-byte aligned for the constants to be. Throws Error("qmodel: ...") naming the field,
// the value and the record.
Graph read_qmodel(const uint8_t* file, size_t file_size);

// Throws Error("qmodel: " + message): a fault in the file's contents.
[[noreturn]] void fail_qmodel(const std::string& message);

}  // namespace detail
}  // namespace qtk
