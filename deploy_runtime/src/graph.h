// The graph as the loader hands it on: records of docs/qmodel_format.md, already checked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qtk/runtime.h"

namespace qtk {
namespace detail {

struct Value {
    std::string name;
    DType dtype = DType::kInt8;
    Shape shape;
    float scale = 0.0f;
    int32_t zero_point = 0;
    bool constant = false;
    // Constants only: little-endian bytes inside the model's blob section, 64-byte aligned.
    const uint8_t* data = nullptr;
    size_t data_size = 0;
};

enum class AttrKind : uint8_t { kInts = 1, kFloats = 2 };

struct Attr {
    std::string key;
    AttrKind kind = AttrKind::kInts;
    std::vector<int64_t> ints;
    std::vector<float> floats;
};

struct Node {
    std::string op;
    std::string name;  // the module path in the torch model
    std::vector<uint32_t> inputs;
    std::vector<uint32_t> outputs;
    std::vector<Attr> attrs;
};

struct Graph {
    std::string producer;
    std::vector<Value> values;
    // Sub-8-bit constants widened to int8 at load; their values point here, not into the file.
    std::vector<std::shared_ptr<const std::vector<int8_t>>> unpacked_constants;
    std::vector<uint32_t> inputs;
    std::vector<uint32_t> outputs;
    std::vector<Node> nodes;  // in execution order
};

class OpKernel;

}  // namespace detail

struct Model::Impl {
    std::shared_ptr<const uint8_t> bytes;  // the whole file; constants point into it
    size_t size = 0;                       // its length in bytes
    detail::Graph graph;
    std::vector<std::unique_ptr<detail::OpKernel>> kernels;  // one per node
    std::vector<std::string> algorithms;                      // the one serving each node
    std::vector<TensorInfo> inputs;
    std::vector<TensorInfo> outputs;

    ~Impl();  // where OpKernel is complete
};

namespace detail {
// Reads and checks a .qmodel's bytes (`size` of them) and creates its kernels (model_loader.cpp).
std::unique_ptr<Model::Impl> parse_model(std::shared_ptr<const uint8_t> bytes, size_t size,
                                         const LoadOptions& options);
}  // namespace detail

}  // namespace qtk
