// Runs a model: shape inference for the actual batch, one memory plan per batch size, nodes in
// file order.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "aligned_buffer.h"
#include "graph.h"
#include "memory_planner.h"
#include "op_kernel.h"
#include "op_registry.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace {

constexpr int kMaxThreads = 1024;

int checked_threads(int threads) {
    if (threads < 1 || threads > kMaxThreads) {
        throw Error("SessionOptions.threads must be in [1, " + std::to_string(kMaxThreads) +
                    "], got " + std::to_string(threads));
    }
    return threads;
}

// Every dim >= 1; the element count, or -1 when it exceeds kMaxTensorElements.
int64_t bounded_element_count(const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d > kMaxTensorElements / n) {
            return -1;
        }
        n *= d;
    }
    return n;
}

}  // namespace

namespace detail {

// Everything that depends on the batch size.
struct ExecutionPlan {
    int64_t batch = 0;
    std::vector<Shape> shapes;      // per value; constants keep their file shapes
    std::vector<uint64_t> offsets;  // per value: where an activation lives in the arena
    std::vector<int64_t> workspace_offsets;  // per node: its workspace in the arena, or -1
    AlignedBytes arena;             // the session's own, unless it shares an Arena
    uint8_t* base = nullptr;        // the arena node_io points into
    uint64_t arena_bytes = 0;
    uint64_t lower_bound = 0;
    std::vector<NodeIO> node_io;  // per node, pointing into the arena at `base` and shapes
};

}  // namespace detail

struct Arena::Impl {
    detail::AlignedBytes bytes;
    size_t size = 0;

    // At least `needed` bytes; the old contents need not survive (a run rewrites its inputs).
    uint8_t* reserve(size_t needed) {
        if (needed > size || !bytes) {
            bytes = detail::allocate_aligned(needed, "the shared activation arena");
            size = needed;
        }
        return bytes.get();
    }
};

Arena::Arena() : impl_(std::make_unique<Impl>()) {}
Arena::~Arena() = default;
size_t Arena::bytes() const { return impl_->size; }

struct Session::Impl {
    std::shared_ptr<const Model> model;
    detail::ThreadPool pool;
    detail::ExecutionPlan plan;
    bool profiling;
    bool keep_intermediates;
    bool has_run = false;
    std::vector<double> node_seconds;  // per node, summed over runs (profiling only)
    std::vector<double> last_start;    // per node, the last run's start since `epoch`
    std::vector<double> last_seconds;  // per node, the last run's time
    std::vector<detail::ThreadPool::RangeTime> ranges;  // the last run's, in node order
    std::vector<size_t> first_range;  // per node and one past the last: its ranges in `ranges`
    std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
    int64_t profiled_runs = 0;
    std::shared_ptr<Arena> shared_arena;
    detail::Int8QuantizeFn quantize_input;  // float inputs of int8 graph inputs

    Impl(std::shared_ptr<const Model> m, const SessionOptions& options)
        : model(std::move(m)),
          pool(checked_threads(options.threads)),
          profiling(options.profile),
          keep_intermediates(options.keep_intermediates),
          shared_arena(options.arena),
          quantize_input(detail::choose_int8_quantizer()) {}

    // Points every node's activations into the arena at `base`.
    void bind(detail::ExecutionPlan& p, uint8_t* base) const;

    const Model::Impl& m() const { return *model->impl_; }
    detail::ExecutionPlan make_plan(int64_t batch) const;
    void check_inputs(const std::vector<const void*>& inputs,
                      const std::vector<Shape>& input_shapes) const;
    Tensor copy_activation(uint32_t id) const;  // as the last run left it
    // The bytes an activation takes at the current batch.
    size_t activation_bytes(uint32_t id) const {
        return static_cast<size_t>(detail::element_count(plan.shapes[id])) *
               dtype_size(m().graph.values[id].dtype);
    }
};

detail::ExecutionPlan Session::Impl::make_plan(int64_t batch) const {
    const detail::Graph& g = m().graph;
    detail::ExecutionPlan p;
    p.batch = batch;
    p.shapes.resize(g.values.size());

    auto set_shape = [&](uint32_t id, Shape shape) {
        if (bounded_element_count(shape) < 0) {
            throw Error("batch " + std::to_string(batch) + " is too large: '" + g.values[id].name +
                        "' would have shape " + to_string(shape) + ", more than 2^31 - 1 elements");
        }
        p.shapes[id] = std::move(shape);
    };
    for (uint32_t id = 0; id < g.values.size(); ++id) {
        if (g.values[id].constant) {
            p.shapes[id] = g.values[id].shape;
        }
    }
    for (uint32_t id : g.inputs) {
        Shape shape = g.values[id].shape;
        shape[0] = batch;
        set_shape(id, std::move(shape));
    }
    std::vector<Shape> input_shapes;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const detail::Node& node = g.nodes[k];
        input_shapes.clear();
        for (uint32_t id : node.inputs) {
            input_shapes.push_back(p.shapes[id]);
        }
        std::vector<Shape> out = m().kernels[k]->infer_shapes(input_shapes);
        for (size_t i = 0; i < node.outputs.size(); ++i) {
            set_shape(node.outputs[i], std::move(out[i]));
        }
    }

    // Lifetimes in steps (one per node): from the producing node, or step 0 for graph inputs, to
    // the last consumer, or the last step for graph outputs; kernel workspaces for their step.
    const size_t steps = std::max<size_t>(1, g.nodes.size());
    const size_t kNotActivation = static_cast<size_t>(-1);
    std::vector<size_t> tensor_of(g.values.size(), kNotActivation);
    std::vector<detail::TensorLifetime> lifetimes;
    auto add_tensor = [&](uint32_t id, size_t step) {
        tensor_of[id] = lifetimes.size();
        // At most (2^31 - 1) * 4 bytes: no overflow.
        const uint64_t bytes = static_cast<uint64_t>(bounded_element_count(p.shapes[id])) *
                               dtype_size(g.values[id].dtype);
        lifetimes.push_back({bytes, step, step});
    };
    for (uint32_t id : g.inputs) {
        add_tensor(id, 0);
    }
    // A kernel's workspace is one more tensor, live while its node runs.
    std::vector<size_t> workspace_tensor(g.nodes.size(), kNotActivation);
    std::vector<Shape> output_shapes;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        input_shapes.clear();
        for (uint32_t id : g.nodes[k].inputs) {
            input_shapes.push_back(p.shapes[id]);
            if (tensor_of[id] != kNotActivation) {
                lifetimes[tensor_of[id]].last_step = k;
            }
        }
        output_shapes.clear();
        for (uint32_t id : g.nodes[k].outputs) {
            output_shapes.push_back(p.shapes[id]);
            add_tensor(id, k);
        }
        const size_t workspace =
            m().kernels[k]->workspace_bytes(input_shapes, output_shapes, pool.threads());
        if (workspace > 0) {
            workspace_tensor[k] = lifetimes.size();
            lifetimes.push_back({workspace, k, k});
        }
    }
    for (uint32_t id : g.outputs) {
        lifetimes[tensor_of[id]].last_step = steps - 1;
    }
    if (keep_intermediates) {  // no activation's bytes are reused: all are live to the end
        for (size_t t : tensor_of) {
            if (t != kNotActivation) {
                lifetimes[t].last_step = steps - 1;
            }
        }
    }

    const detail::MemoryPlan memory = detail::plan_memory(lifetimes);
    p.arena_bytes = memory.arena_bytes;
    p.lower_bound = memory.lower_bound;
    if (p.arena_bytes > std::numeric_limits<size_t>::max()) {
        throw Error("the activation arena for batch " + std::to_string(batch) + " needs " +
                    std::to_string(p.arena_bytes) + " bytes, more than this machine can address");
    }
    if (!shared_arena) {
        p.arena =
            detail::allocate_aligned(static_cast<size_t>(p.arena_bytes), "the activation arena");
    }
    p.offsets.assign(g.values.size(), 0);
    for (uint32_t id = 0; id < g.values.size(); ++id) {
        if (tensor_of[id] != kNotActivation) {
            p.offsets[id] = memory.offsets[tensor_of[id]];
        }
    }
    p.workspace_offsets.assign(g.nodes.size(), -1);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        if (workspace_tensor[k] != kNotActivation) {
            p.workspace_offsets[k] = static_cast<int64_t>(memory.offsets[workspace_tensor[k]]);
        }
    }

    if (p.arena) {  // a shared Arena is bound at each run: others may move it in between
        bind(p, p.arena.get());
    }
    return p;
}

void Session::Impl::bind(detail::ExecutionPlan& p, uint8_t* arena) const {
    const detail::Graph& g = m().graph;
    p.base = arena;
    p.node_io.assign(g.nodes.size(), detail::NodeIO());
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        detail::NodeIO& io = p.node_io[k];
        for (uint32_t id : g.nodes[k].inputs) {
            const detail::Value& v = g.values[id];
            io.inputs.push_back(v.constant ? v.data : arena + p.offsets[id]);
            io.input_shapes.push_back(&p.shapes[id]);
        }
        for (uint32_t id : g.nodes[k].outputs) {
            io.outputs.push_back(arena + p.offsets[id]);
            io.output_shapes.push_back(&p.shapes[id]);
        }
        if (p.workspace_offsets[k] >= 0) {
            io.workspace = arena + p.workspace_offsets[k];
        }
    }
}

void Session::Impl::check_inputs(const std::vector<const void*>& inputs,
                                 const std::vector<Shape>& input_shapes) const {
    const std::vector<TensorInfo>& expected = m().inputs;
    if (inputs.size() != expected.size() || input_shapes.size() != expected.size()) {
        throw Error("the model has " + std::to_string(expected.size()) + " inputs, got " +
                    std::to_string(inputs.size()) + " pointers and " +
                    std::to_string(input_shapes.size()) + " shapes");
    }
    for (size_t i = 0; i < expected.size(); ++i) {
        const Shape& want = expected[i].shape;
        const Shape& got = input_shapes[i];
        const std::string label = "input " + std::to_string(i) + " ('" + expected[i].name + "')";
        bool fits = got.size() == want.size() && got[0] >= 1;
        for (size_t d = 1; fits && d < want.size(); ++d) {
            fits = got[d] == want[d];
        }
        if (!fits) {
            throw Error(label + ": expected " + dtype_name(expected[i].dtype) +
                        " tensor of shape " + batch_shape_pattern(want) +
                        " (any N >= 1), got shape " + to_string(got));
        }
        if (got[0] != input_shapes[0][0]) {
            throw Error(label + ": batch " + std::to_string(got[0]) +
                        " differs from input 0's batch " + std::to_string(input_shapes[0][0]));
        }
        if (inputs[i] == nullptr) {
            throw Error(label + ": data pointer is null");
        }
    }
}

Session::Session(std::shared_ptr<const Model> model, SessionOptions options) {
    if (!model) {
        throw Error("Session: model is null");
    }
    impl_ = std::make_unique<Impl>(std::move(model), options);
    impl_->plan = impl_->make_plan(impl_->m().inputs[0].shape[0]);
}

Session::~Session() = default;

std::vector<Tensor> Session::run(const std::vector<const void*>& inputs,
                                 const std::vector<Shape>& input_shapes) {
    impl_->check_inputs(inputs, input_shapes);
    impl_->has_run = false;  // until this run completes: a failed one leaves no intermediates
    if (input_shapes[0][0] != impl_->plan.batch) {
        impl_->plan = impl_->make_plan(input_shapes[0][0]);
    }

    const detail::Graph& g = impl_->m().graph;
    detail::ExecutionPlan& p = impl_->plan;
    if (impl_->shared_arena) {  // another session may have grown (moved) it since this one ran
        uint8_t* base = impl_->shared_arena->impl_->reserve(static_cast<size_t>(p.arena_bytes));
        if (base != p.base) {
            impl_->bind(p, base);
        }
    }
    for (size_t i = 0; i < g.inputs.size(); ++i) {
        const uint32_t id = g.inputs[i];
        std::memcpy(p.base + p.offsets[id], inputs[i], impl_->activation_bytes(id));
    }
    if (impl_->profiling) {
        using Seconds = std::chrono::duration<double>;
        impl_->node_seconds.resize(g.nodes.size());
        impl_->last_start.resize(g.nodes.size());
        impl_->last_seconds.resize(g.nodes.size());
        impl_->ranges.clear();
        impl_->first_range.assign(g.nodes.size() + 1, 0);
        struct LogRanges {  // the pool logs the ranges of this run only, even if a kernel throws
            detail::ThreadPool& pool;
            LogRanges(detail::ThreadPool& p, std::vector<detail::ThreadPool::RangeTime>* log)
                : pool(p) {
                pool.set_range_log(log);
            }
            ~LogRanges() { pool.set_range_log(nullptr); }
        } log_ranges(impl_->pool, &impl_->ranges);
        for (size_t k = 0; k < g.nodes.size(); ++k) {
            impl_->first_range[k] = impl_->ranges.size();
            const auto start = std::chrono::steady_clock::now();
            impl_->m().kernels[k]->run(p.node_io[k], impl_->pool);
            const double seconds = Seconds(std::chrono::steady_clock::now() - start).count();
            impl_->node_seconds[k] += seconds;
            impl_->last_start[k] = Seconds(start - impl_->epoch).count();
            impl_->last_seconds[k] = seconds;
        }
        impl_->first_range[g.nodes.size()] = impl_->ranges.size();
        ++impl_->profiled_runs;
    } else {
        for (size_t k = 0; k < g.nodes.size(); ++k) {
            impl_->m().kernels[k]->run(p.node_io[k], impl_->pool);
        }
    }

    impl_->has_run = true;
    std::vector<Tensor> outputs;
    for (uint32_t id : g.outputs) {
        outputs.push_back(impl_->copy_activation(id));
    }
    return outputs;
}

Tensor Session::Impl::copy_activation(uint32_t id) const {
    Tensor t;
    t.shape = plan.shapes[id];
    t.dtype = m().graph.values[id].dtype;
    const uint8_t* bytes = plan.base + plan.offsets[id];
    const size_t count = static_cast<size_t>(detail::element_count(t.shape));
    if (t.dtype == DType::kFloat32) {
        t.float_data.resize(count);
        std::memcpy(t.float_data.data(), bytes, activation_bytes(id));
    } else {
        t.data.resize(count);
        std::memcpy(t.data.data(), bytes, activation_bytes(id));
    }
    return t;
}

std::vector<Intermediate> Session::intermediates() const {
    if (!impl_->keep_intermediates) {
        throw Error("Session::intermediates needs SessionOptions::keep_intermediates");
    }
    if (!impl_->has_run) {
        throw Error("Session::intermediates: the session has not run yet");
    }
    const detail::Graph& g = impl_->m().graph;
    std::vector<Intermediate> values;
    for (uint32_t id : g.inputs) {
        values.push_back({id, g.values[id].name, "", "", impl_->copy_activation(id)});
    }
    for (const detail::Node& node : g.nodes) {
        for (uint32_t id : node.outputs) {
            values.push_back({id, g.values[id].name, node.name, node.op,
                              impl_->copy_activation(id)});
        }
    }
    return values;
}

std::vector<Tensor> Session::run_image(const uint8_t* image, const Shape& shape) {
    const std::vector<TensorInfo>& inputs = impl_->m().inputs;
    if (inputs.size() != 1 || inputs[0].dtype != DType::kUInt8) {
        throw Error("run_image: the model's graph input 0 ('" + inputs[0].name + "') is " +
                    dtype_name(inputs[0].dtype) + (inputs.size() > 1 ? " (of several)" : "") +
                    "; run_image needs one uint8 image input (export with image=)");
    }
    return run({image}, {shape});
}

size_t Session::arena_bytes() const { return static_cast<size_t>(impl_->plan.arena_bytes); }
size_t Session::arena_lower_bound() const { return static_cast<size_t>(impl_->plan.lower_bound); }
int64_t Session::batch() const { return impl_->plan.batch; }
const Model& Session::model() const { return *impl_->model; }

void Session::quantize_input(size_t index, const float* x, size_t count, int8_t* q) const {
    const std::vector<TensorInfo>& inputs = impl_->m().inputs;
    if (index >= inputs.size()) {
        throw Error("input index " + std::to_string(index) + " is out of range: the model has " +
                    std::to_string(inputs.size()) + " inputs");
    }
    if (inputs[index].dtype != DType::kInt8) {
        const bool image = inputs[index].dtype == DType::kUInt8;
        throw Error("input " + std::to_string(index) + " is " + dtype_name(inputs[index].dtype) +
                    (image ? "; pass the uint8 image itself (run_image)"
                           : "; pass float data directly") +
                    " (graph input '" + inputs[index].name + "' is not quantized)");
    }
    impl_->quantize_input(x, static_cast<int64_t>(count), arith::inverse_scale(inputs[index].scale),
                          inputs[index].zero_point, q);
}

void Session::dequantize_output(size_t index, const int8_t* q, size_t count, float* x) const {
    const std::vector<TensorInfo>& outputs = impl_->m().outputs;
    if (index >= outputs.size()) {
        throw Error("output index " + std::to_string(index) + " is out of range: the model has " +
                    std::to_string(outputs.size()) + " outputs");
    }
    if (outputs[index].dtype != DType::kInt8) {
        throw Error("output " + std::to_string(index) + " is " + dtype_name(outputs[index].dtype) +
                    "; it needs no dequantization (graph output '" + outputs[index].name + "')");
    }
    for (size_t i = 0; i < count; ++i) {
        x[i] = arith::dequantize(q[i], outputs[index].scale, outputs[index].zero_point);
    }
}

std::vector<NodeProfile> Session::profile() const {
    std::vector<NodeProfile> nodes;
    if (!impl_->profiling) {
        return nodes;
    }
    const detail::Graph& g = impl_->m().graph;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const detail::Node& node = g.nodes[k];
        NodeProfile n{node.name, node.op, impl_->m().algorithms[k],
                      k < impl_->node_seconds.size() ? impl_->node_seconds[k] : 0.0,
                      impl_->profiled_runs, 0,
                      k < impl_->last_start.size() ? impl_->last_start[k] : 0.0,
                      k < impl_->last_seconds.size() ? impl_->last_seconds[k] : 0.0,
                      {}};
        if (k + 1 < impl_->first_range.size()) {
            using Seconds = std::chrono::duration<double>;
            for (size_t r = impl_->first_range[k]; r < impl_->first_range[k + 1]; ++r) {
                const detail::ThreadPool::RangeTime& t = impl_->ranges[r];
                n.last_ranges.push_back({t.thread, Seconds(t.start - impl_->epoch).count(),
                                         Seconds(t.end - t.start).count()});
            }
        }
        // conv2d and linear: each output element takes one product per weight of its channel
        if ((node.op == "conv2d" || node.op == "conv2d_binary" || node.op == "linear") &&
            node.inputs.size() > 1) {
            const Shape& weight = impl_->plan.shapes[node.inputs[1]];
            n.macs = detail::element_count(impl_->plan.shapes[node.outputs[0]]) *
                     (detail::element_count(weight) / weight[0]);
        }
        nodes.push_back(std::move(n));
    }
    return nodes;
}

}  // namespace qtk
