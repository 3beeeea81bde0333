#include "fast_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "aligned_buffer.h"
#include "cpu_features.h"
#include "op_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

// Attributes that hold per-channel constants or bounds: they change no kernel's speed.
bool shapes_the_work(const Attr& attr) {
    return attr.key != "multiplier" && attr.key != "shift" && attr.key != "clamp" &&
           attr.key != "bounds";
}

// Fills `bytes` with a fixed pseudo-random pattern (xorshift): kernels see realistic data, and
// every search times the same inputs.
void fill_pattern(uint8_t* bytes, size_t size) {
    uint32_t state = 0x9e3779b9u;
    for (size_t i = 0; i < size; ++i) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        bytes[i] = static_cast<uint8_t>(state >> 24);
    }
}

size_t byte_size(DType dtype, const Shape& shape) {
    size_t n = dtype_size(dtype);
    for (int64_t d : shape) {
        n *= static_cast<size_t>(d);
    }
    return n;
}

// Random activations (float32 ones in [-1, 1]) and the node's real constants, at the file's
// shapes; outputs sized by the op's shape inference.
class TimingBench {
 public:
    TimingBench(const Graph& graph, const Node& node, const OpKernel& kernel) {
        std::vector<Shape> shapes;
        for (uint32_t id : node.inputs) {
            const Value& v = graph.values[id];
            shapes.push_back(v.shape);
            if (v.constant) {
                io_.inputs.push_back(v.data);
                continue;
            }
            buffers_.push_back(allocate_aligned(byte_size(v.dtype, v.shape), "Fast-Run inputs"));
            uint8_t* data = buffers_.back().get();
            fill_pattern(data, byte_size(v.dtype, v.shape));
            if (v.dtype == DType::kFloat32) {
                float* f = reinterpret_cast<float*>(data);
                for (size_t i = 0; i < byte_size(v.dtype, v.shape) / 4; ++i) {
                    f[i] = static_cast<float>(data[4 * i] % 201) / 100.0f - 1.0f;
                }
            }
            io_.inputs.push_back(data);
        }
        input_shapes_ = shapes;
        output_shapes_ = kernel.infer_shapes(input_shapes_);
        for (size_t i = 0; i < output_shapes_.size(); ++i) {
            const DType dtype = graph.values[node.outputs[i]].dtype;
            buffers_.push_back(allocate_aligned(byte_size(dtype, output_shapes_[i]),
                                                "Fast-Run outputs"));
            io_.outputs.push_back(buffers_.back().get());
        }
        for (const Shape& s : input_shapes_) {
            io_.input_shapes.push_back(&s);
        }
        for (const Shape& s : output_shapes_) {
            io_.output_shapes.push_back(&s);
        }
    }

    // Median seconds of one run: one warm-up, then at least 5 runs and 20 ms (at most 50 runs).
    double median_seconds(const OpKernel& kernel, ThreadPool& pool) const {
        using Clock = std::chrono::steady_clock;
        const AlignedBytes workspace = allocate_aligned(
            kernel.workspace_bytes(input_shapes_, output_shapes_, pool.threads()),
            "Fast-Run workspace");
        NodeIO io = io_;
        io.workspace = workspace.get();
        kernel.run(io, pool);
        std::vector<double> times;
        double total = 0.0;
        while (times.size() < 50 && (times.size() < 5 || total < 0.02)) {
            const auto start = Clock::now();
            kernel.run(io, pool);
            times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
            total += times.back();
        }
        std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
        return times[times.size() / 2];
    }

 private:
    std::vector<AlignedBytes> buffers_;
    std::vector<Shape> input_shapes_, output_shapes_;
    NodeIO io_;
};

}  // namespace

FastRunCache::FastRunCache(std::string path) : path_(std::move(path)) {
    if (path_.empty()) {
        return;
    }
    std::ifstream in(path_);
    if (!in) {
        return;  // no cache yet: a search will create it
    }
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        const size_t tab = line.find('\t');
        if (tab == std::string::npos || tab == 0 || tab + 1 == line.size() ||
            line.find('\t', tab + 1) != std::string::npos) {
            throw Error("Fast-Run cache '" + path_ + "' line " + std::to_string(number) +
                        " is not '<layer key><TAB><algorithm>'; delete the file to search again");
        }
        entries_[line.substr(0, tab)] = line.substr(tab + 1);
    }
}

const std::string* FastRunCache::find(const std::string& key) const {
    const auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
}

void FastRunCache::record(const std::string& key, const std::string& algorithm) {
    entries_[key] = algorithm;
    changed_ = true;
}

void FastRunCache::save() const {
    if (!changed_ || path_.empty()) {
        return;
    }
    const std::string temporary = path_ + ".tmp";
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << "# qtk Fast-Run cache: <layer key>\\t<algorithm>, written by qtk " << kVersion
            << "\n";
        for (const auto& [key, algorithm] : entries_) {
            out << key << '\t' << algorithm << '\n';
        }
        if (!out) {
            throw Error("cannot write Fast-Run cache '" + temporary + "'");
        }
    }
    if (std::rename(temporary.c_str(), path_.c_str()) != 0) {
        throw Error("cannot replace Fast-Run cache '" + path_ + "'");
    }
}

std::string layer_key(const Graph& graph, const Node& node, int threads) {
    std::string key = cpu_name() + " | qtk " + kVersion + " | " + std::to_string(threads) +
                      " threads | " + node.op;
    for (uint32_t id : node.inputs) {
        const Value& v = graph.values[id];
        key += std::string(" ") + dtype_name(v.dtype) + to_string(v.shape);
    }
    for (const Attr& attr : node.attrs) {
        if (!shapes_the_work(attr) || attr.kind != AttrKind::kInts) {
            continue;
        }
        key += " " + attr.key + "=" + to_string(attr.ints);
    }
    return key;
}

KernelPicker fast_run_picker(FastRun mode, FastRunCache& cache, int threads) {
    auto pool = std::make_shared<ThreadPool>(threads);
    return [mode, &cache, threads, pool](const Graph& graph, const Node& node,
                                         const std::vector<KernelCandidate>& candidates) {
        const std::string key = layer_key(graph, node, threads);
        if (const std::string* cached = cache.find(key)) {
            for (size_t i = 0; i < candidates.size(); ++i) {
                if (*cached == candidates[i].algorithm) {
                    return i;
                }
            }
        }
        if (mode != FastRun::kSearch) {
            return size_t{0};
        }
        size_t best = 0;
        double best_seconds = 0.0;
        for (size_t i = 0; i < candidates.size(); ++i) {
            const std::unique_ptr<OpKernel> kernel = candidates[i].make();
            const double seconds = TimingBench(graph, node, *kernel).median_seconds(*kernel, *pool);
            if (i == 0 || seconds < best_seconds) {
                best = i;
                best_seconds = seconds;
            }
        }
        cache.record(key, candidates[best].algorithm);
        return best;
    };
}

}  // namespace detail
}  // namespace qtk
