// Runs a model's int8 graph on a Device (include/qtk/device_session.h, docs/cuda.md): one step per
// node, each one CUDA kernel of kernels/cuda/ (a split one per output; a reshape that leaves the
// NCHW4 bytes as they are none); every activation in NCHW4 in one device arena that the CPU
// session's memory planner lays out, once per batch size, the graph's inputs and outputs turned
// from and into NCHW on the device.
#include <algorithm>
#include <cstring>

#include "conv2d.h"
#include "device.h"
#include "fast_run.h"
#include "graph.h"
#include "linear.h"
#include "memory_planner.h"
#include "op_kernel.h"

namespace qtk {
namespace {

using detail::Node;
using detail::NodeView;
using detail::Value;

// An activation as the CUDA kernels hold it: [N, C, H, W], or [N, C] as a 1x1 plane, or a rank-5
// view [N, A, B, H, W] as [N, A B, H, W], in NCHW4 bytes [N][ceil(C / 4)][H][W][4].
struct Nchw4 {
    int32_t batch = 0, channels = 0, height = 1, width = 1;

    int64_t bytes() const { return int64_t{batch} * ((channels + 3) / 4) * height * width * 4; }
    bool operator==(const Nchw4& o) const {
        return batch == o.batch && channels == o.channels && height == o.height && width == o.width;
    }
};

// Sets *out from a shape of rank 4 or 2 and at most 2^31 - 1 elements (the kernels index pixels
// in int32), or of rank 5 as [N, A B, H, W]: a channel shuffle's view [N, A, B, H, W] of
// [N, C, H, W] has the same bytes, and so does every op the session runs on it (data movement and
// element-wise ops keep the order of dims 1 and 2; conv and pooling take rank 4 only; a lut with a
// table per channel of dim 1 is refused there). Otherwise returns why it cannot, for a message
// that names the tensor.
std::string nchw4_of(const Shape& shape, Nchw4* out) {
    if (shape.size() != 2 && shape.size() != 4 && shape.size() != 5) {
        return "; the CUDA kernels hold activations of rank 4 or 2 ([N, C, H, W], [N, C]), and "
               "channel shuffles' views of rank 5";
    }
    int64_t elements = 1;
    for (int64_t d : shape) {
        if (d > kMaxTensorElements / elements) {
            return ", more than 2^31 - 1 elements: run a smaller batch";
        }
        elements *= d;
    }
    const size_t spatial = shape.size() == 5 ? 3 : 2;  // the first of H, W
    out->batch = int32_t(shape[0]);
    out->channels = int32_t(shape.size() == 5 ? shape[1] * shape[2] : shape[1]);
    out->height = shape.size() >= 4 ? int32_t(shape[spatial]) : 1;
    out->width = shape.size() >= 4 ? int32_t(shape[spatial + 1]) : 1;
    return "";
}

enum class StepKind {
    kConv2d, kDepthwise, kPool2d, kGlobalPool2d, kAdd, kConcat, kLut, kMul, kGather, kAlias
};

// One node's work: its kernel's parameters, their pointers and sizes bound per batch size.
struct Step {
    StepKind kind = StepKind::kAlias;
    std::string kernel;
    size_t conv_kernel = 0;  // kConv2d: which of the device's conv2d_kernels(), per batch size
    cuda::Conv2dNchw4Params conv{};
    cuda::DepthwiseNchw4Params depthwise{};
    cuda::Pool2dNchw4Params pool{};
    cuda::AddParams add{};
    cuda::ConcatParams concat{};
    cuda::LutParams lut{};
    cuda::MulParams mul{};
    std::vector<cuda::GatherChannelsParams> gathers;  // kGather: one per output
};

int32_t replicated_byte(int32_t zero_point) {
    const uint32_t byte = static_cast<uint8_t>(static_cast<int8_t>(zero_point));
    return static_cast<int32_t>(byte * 0x01010101u);
}

cuda::Window2d window_of(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& dilation) {
    return {int32_t(kernel[0]), int32_t(kernel[1]), int32_t(stride[0]), int32_t(stride[1]),
            int32_t(padding[0]), int32_t(padding[1]), int32_t(dilation[0]), int32_t(dilation[1])};
}

constexpr int64_t kMaxWindow = (int64_t{1} << 31) - 1;

// The batch-dependent sizes of a sliding-window kernel's parameters (conv, depthwise, pool).
template <typename Params>
void set_window_shapes(Params& p, const Nchw4& x, const Nchw4& y) {
    p.batch = y.batch;
    p.height = x.height;
    p.width = x.width;
    p.out_h = y.height;
    p.out_w = y.width;
}

}  // namespace

struct DeviceSession::Impl {
    std::shared_ptr<const Model> model;
    std::unique_ptr<Model::Impl> file;  // the graph as the file holds it, its CPU kernels
    std::shared_ptr<Device> device;
    DeviceOptions options;
    std::unique_ptr<detail::FastRunCache> fast_run_cache;
    std::vector<void*> constants;  // device copies, released with the session
    std::vector<Step> steps;       // one per node

    // The plan of the last batch size.
    int64_t batch = 0;
    std::vector<Shape> shapes;       // per value
    std::vector<uint32_t> storage;   // per value: the value whose bytes it is (itself, or an alias)
    std::vector<uint64_t> offsets;   // per value: its storage's offset in the arena
    uint8_t* arena = nullptr;
    uint64_t arena_bytes = 0, arena_capacity = 0;
    std::vector<Nchw4> layouts;   // per value
    std::vector<void*> staging;   // per graph input, then output: its NCHW bytes, for run()

    ~Impl() {
        release_staging();
        for (void* c : constants) {
            device->release(c);
        }
        if (arena != nullptr) {
            device->release(arena);
        }
    }

    const detail::Graph& graph() const { return file->graph; }

    template <typename T>
    const T* upload(const std::vector<T>& host) {
        void* memory = device->allocate(host.size() * sizeof(T));
        constants.push_back(memory);
        device->upload(memory, host.data(), host.size() * sizeof(T));
        return static_cast<const T*>(memory);
    }

    Step make_step(const Node& node);
    Step conv_step(const std::vector<int32_t>& bias,
                   const std::vector<int32_t>& multiplier, const std::vector<int32_t>& shift,
                   const int8_t* weight, int64_t out, int64_t in, int64_t kh, int64_t kw,
                   const cuda::Window2d& window, int32_t x_zero_point, int32_t y_zero_point,
                   detail::ClampRange clamp);
    void plan(int64_t new_batch);
    void plan_for(int64_t new_batch) {  // the plan is per batch size: made again where it changed
        if (new_batch != batch) {
            plan(new_batch);
        }
    }
    void choose_conv_kernels(const std::vector<Nchw4>& nchw4);
    void launch_all();
    void check_inputs(const std::vector<const void*>& inputs,
                      const std::vector<Shape>& input_shapes) const;
    void run_on_device(const std::vector<const void*>& inputs, const std::vector<void*>& outputs);
    cuda::LayoutParams layout(uint32_t value, const void* nchw) const;
    void release_staging() {
        for (void* buffer : staging) {
            device->release(buffer);
        }
        staging.clear();
    }
    uint8_t* at(uint32_t value) const { return arena + offsets[value]; }
};

namespace {

[[noreturn]] void unsupported(const NodeView& view, const std::string& why) {
    view.fail(why + " has no CUDA kernel yet (the device session runs int8 conv2d with groups 1 or "
              "depthwise, linear, add, mul, lut, concat, split along channels, a channel "
              "shuffle's permute, max_pool2d, avg_pool2d, global_avg_pool2d, reshape and "
              "flatten); "
              "run this model with qtk::Session on the CPU");
}

}  // namespace

Step DeviceSession::Impl::conv_step(const std::vector<int32_t>& bias,
                                    const std::vector<int32_t>& multiplier,
                                    const std::vector<int32_t>& shift, const int8_t* weight,
                                    int64_t out, int64_t in, int64_t kh, int64_t kw,
                                    const cuda::Window2d& window, int32_t x_zero_point,
                                    int32_t y_zero_point, detail::ClampRange clamp) {
    Step s;
    s.kind = StepKind::kConv2d;
    s.kernel = device->conv2d_kernels()[0];
    cuda::Conv2dNchw4Params& p = s.conv;
    p.w = upload(cuda::pack_nchw4_weights(weight, out, in, kh, kw));
    p.folded_bias = upload(cuda::fold_nchw4_bias(bias.data(), weight, out, in * kh * kw,
                                                 x_zero_point));
    p.multiplier = upload(multiplier);
    p.shift = upload(shift);
    p.padding_word = replicated_byte(x_zero_point);
    p.y_zero_point = y_zero_point;
    p.lo = clamp.lo;
    p.hi = clamp.hi;
    p.c_quads = int32_t((in + 3) / 4);
    p.out_channels = int32_t(out);
    p.window = window;
    return s;
}

Step DeviceSession::Impl::make_step(const Node& node) {
    const NodeView view(graph(), node);
    if (view.dtype() != DType::kInt8) {
        unsupported(view, std::string("a ") + dtype_name(view.dtype()) + " " + node.op);
    }
    Step s;
    if (node.op == "conv2d") {
        const detail::Conv2dParams params =
            detail::read_conv2d_params(view, DType::kInt8, DType::kInt32);
        const detail::Conv2dInt8Constants c(view, params);
        if (c.fused_prelu() || c.has_residual) {
            unsupported(view, "a conv2d with a fused PReLU or residual add");
        }
        const cuda::Window2d window =
            window_of({params.kernel_h, params.kernel_w}, {params.stride_h, params.stride_w},
                      {params.pad_h, params.pad_w}, {params.dilation_h, params.dilation_w});
        if (params.groups == 1) {
            return conv_step(c.bias, c.multiplier, c.shift, c.weight, params.out_channels,
                             params.group_in_channels, params.kernel_h, params.kernel_w, window,
                             c.input_zero_point, c.output_zero_point, c.clamp);
        }
        if (params.group_in_channels != 1 || params.out_per_group() != 1) {
            unsupported(view, "a grouped conv2d (groups " + std::to_string(params.groups) +
                                  ", neither 1 nor depthwise)");
        }
        s.kind = StepKind::kDepthwise;
        s.kernel = "conv2d_int8_depthwise";
        cuda::DepthwiseNchw4Params& p = s.depthwise;
        p.w = upload(std::vector<int8_t>(
            c.weight, c.weight + params.out_channels * params.kernel_h * params.kernel_w));
        p.bias = upload(c.bias);
        p.multiplier = upload(c.multiplier);
        p.shift = upload(c.shift);
        p.x_zero_point = c.input_zero_point;
        p.y_zero_point = c.output_zero_point;
        p.lo = c.clamp.lo;
        p.hi = c.clamp.hi;
        p.channels = int32_t(params.out_channels);
        p.window = window;
        return s;
    }
    if (node.op == "linear") {  // a 1x1 conv over [N, K] as N pixels of K channels
        const Value& weight = view.constant_input(1, "weight", DType::kInt8, 2);
        const int64_t out = weight.shape[0], in = weight.shape[1];
        const detail::LinearInt8Constants c(view, out, in);
        return conv_step(c.bias, c.multiplier, c.shift, c.weight, out, in, 1, 1,
                         cuda::Window2d{1, 1, 1, 1, 0, 0, 1, 1}, c.input_zero_point,
                         c.output_zero_point, c.clamp);
    }
    if (node.op == "add") {
        if (view.input_count() != 2 || view.has_attr("sum_zero_point")) {
            unsupported(view, "an add with a fused lookup (table and sum_zero_point)");
        }
        s.kind = StepKind::kAdd;
        s.kernel = "add_int8";
        cuda::AddParams& p = s.add;
        const std::vector<int32_t> multipliers = view.multipliers("multiplier", 2);
        p.a_zero_point = view.activation_input(0, DType::kInt8).zero_point;
        p.b_zero_point = view.activation_input(1, DType::kInt8).zero_point;
        p.a_multiplier = multipliers[0];
        p.b_multiplier = multipliers[1];
        p.shift = view.shifts("shift", 1)[0];
        p.zero_point = view.output(0, DType::kInt8).zero_point;
        const detail::ClampRange clamp = view.clamp("clamp");
        p.lo = clamp.lo;
        p.hi = clamp.hi;
        return s;
    }
    if (node.op == "concat") {  // along channels; each input rescaled on its own (spec 3)
        const size_t inputs = view.input_count();
        if (view.int_scalar("axis", 1, 3) != 1 || inputs > size_t(cuda::kConcatMaxInputs)) {
            unsupported(view, "a concat along another axis than channels, or of more than " +
                                  std::to_string(cuda::kConcatMaxInputs) + " inputs,");
        }
        s.kind = StepKind::kConcat;
        s.kernel = "concat_int8";
        const std::vector<int32_t> multipliers = view.multipliers("multiplier", inputs);
        const std::vector<int32_t> shifts = view.shifts("shift", inputs);
        s.concat.input_count = int32_t(inputs);
        for (size_t i = 0; i < inputs; ++i) {
            cuda::ConcatInput& in = s.concat.inputs[i];
            in.zero_point = view.activation_input(i, DType::kInt8).zero_point;
            in.multiplier = multipliers[i];
            in.shift = shifts[i];
        }
        s.concat.zero_point = view.output(0, DType::kInt8).zero_point;
        return s;
    }
    if (node.op == "mul") {  // shapes checked per batch: same, or [N, C, 1, 1] over [N, C, H, W]
        s.kind = StepKind::kMul;
        s.kernel = "mul_int8";
        cuda::MulParams& p = s.mul;
        p.a_zero_point = view.activation_input(0, DType::kInt8).zero_point;
        p.b_zero_point = view.activation_input(1, DType::kInt8).zero_point;
        p.multiplier = view.multipliers("multiplier", 1)[0];
        p.shift = view.shifts("shift", 1)[0];
        p.zero_point = view.output(0, DType::kInt8).zero_point;
        const detail::ClampRange clamp = view.clamp("clamp");
        p.lo = clamp.lo;
        p.hi = clamp.hi;
        return s;
    }
    if (node.op == "lut") {  // the table (or one per channel) as the CPU kernel checked it
        if (view.channels_last()) {
            unsupported(view, "a channels-last lut");
        }
        const Value& table = view.input_value(1);
        const int64_t tables = table.shape.size() == 2 ? table.shape[0] : 1;
        const int8_t* entries = reinterpret_cast<const int8_t*>(table.data);
        s.kind = StepKind::kLut;
        s.kernel = "lut_int8";
        s.lut.tables = upload(std::vector<int8_t>(entries, entries + tables * 256));
        s.lut.tables_count = int32_t(tables);
        return s;
    }
    if (node.op == "split" || node.op == "permute") {  // output channel c is input channel_of[c]
        const Shape& x = view.input_value(0).shape;  // the file's: every dim but the batch holds
        std::vector<std::vector<int32_t>> channel_of;
        if (node.op == "split") {
            if (view.int_scalar("axis", 1, int64_t(x.size()) - 1) != 1 || x.size() == 5) {
                unsupported(view, "a split along another axis than the channels of [N, C, H, W] "
                                  "or [N, C]");
            }
            int32_t first = 0;
            for (int64_t size : view.ints("sizes", node.outputs.size(), 1, kMaxWindow)) {
                channel_of.emplace_back(size_t(size));
                for (int32_t& c : channel_of.back()) {
                    c = first++;
                }
            }
        } else {
            // [N, A, B, H, W] -> [N, B, A, H, W]: output channel j A + i is input channel i B + j.
            const std::vector<int64_t> shuffle = {0, 2, 1, 3, 4};
            if (view.ints("perm", x.size(), 0, int64_t(x.size()) - 1) != shuffle) {
                unsupported(view, "a permute other than a channel shuffle's (0, 2, 1, 3, 4) "
                                  "of [N, A, B, H, W]");
            }
            const int32_t a = int32_t(x[1]), b = int32_t(x[2]);
            channel_of.emplace_back(size_t(a) * size_t(b));
            for (int32_t j = 0; j < b; ++j) {
                for (int32_t i = 0; i < a; ++i) {
                    channel_of.back()[size_t(j * a + i)] = i * b + j;
                }
            }
        }
        s.kind = StepKind::kGather;
        s.kernel = "gather_channels_int8";
        for (const std::vector<int32_t>& table : channel_of) {
            s.gathers.emplace_back();
            s.gathers.back().channel_of = upload(table);
        }
        return s;
    }
    if (node.op == "max_pool2d" || node.op == "avg_pool2d") {
        s.kind = StepKind::kPool2d;
        s.kernel = "pool2d_int8";
        cuda::Pool2dNchw4Params& p = s.pool;
        const bool average = node.op == "avg_pool2d";
        p.window = window_of(view.ints("kernel", 2, 1, kMaxWindow),
                             view.ints("stride", 2, 1, kMaxWindow),
                             view.ints("padding", 2, 0, kMaxWindow),
                             average ? std::vector<int64_t>{1, 1}
                                     : view.ints("dilation", 2, 1, kMaxWindow));
        p.average = average;
        p.count_include_pad = average && view.int_scalar("count_include_pad", 0, 1) == 1;
        p.divisor_override = average && view.has_attr("divisor_override")
                                 ? view.int_scalar("divisor_override", 1, kMaxWindow)
                                 : 0;
        p.zero_point = view.activation_input(0, DType::kInt8).zero_point;
        return s;
    }
    if (node.op == "global_avg_pool2d") {  // the average pool of one window of the whole plane
        s.kind = StepKind::kGlobalPool2d;
        s.kernel = "pool2d_int8";
        s.pool.average = true;
        s.pool.zero_point = view.activation_input(0, DType::kInt8).zero_point;
        return s;
    }
    if (node.op == "reshape" || node.op == "flatten") {
        if (view.input_value(0).constant) {
            unsupported(view, "a reshape of a constant");
        }
        s.kind = StepKind::kAlias;  // checked per batch: only reshapes that keep the NCHW4 bytes
        s.kernel = "none (the NCHW4 bytes stay)";
        return s;
    }
    unsupported(view, "op '" + node.op + "'");
}

void DeviceSession::Impl::plan(int64_t new_batch) {
    const detail::Graph& g = graph();
    batch = 0;  // until the plan is whole: a plan that fails is made again by the next run
    shapes.assign(g.values.size(), Shape{});
    for (uint32_t id = 0; id < g.values.size(); ++id) {
        if (g.values[id].constant) {
            shapes[id] = g.values[id].shape;
        }
    }
    for (uint32_t id : g.inputs) {
        shapes[id] = g.values[id].shape;
        shapes[id][0] = new_batch;
    }
    storage.resize(g.values.size());
    for (uint32_t id = 0; id < g.values.size(); ++id) {
        storage[id] = id;
    }
    std::vector<Shape> input_shapes;
    std::vector<Nchw4> nchw4(g.values.size());
    auto activation = [&](uint32_t id, const NodeView& view) {
        const std::string unfit = nchw4_of(shapes[id], &nchw4[id]);
        if (!unfit.empty()) {
            view.fail("'" + g.values[id].name + "' has shape " + to_string(shapes[id]) + unfit);
        }
        return nchw4[id];
    };
    for (uint32_t id : g.inputs) {
        const std::string unfit = nchw4_of(shapes[id], &nchw4[id]);
        if (!unfit.empty()) {
            throw Error("graph input '" + g.values[id].name + "' has shape " +
                        to_string(shapes[id]) + unfit);
        }
    }
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& node = g.nodes[k];
        const NodeView view(g, node);
        input_shapes.clear();
        for (uint32_t id : node.inputs) {
            input_shapes.push_back(shapes[id]);
        }
        std::vector<Shape> out = file->kernels[k]->infer_shapes(input_shapes);
        for (size_t o = 0; o < node.outputs.size(); ++o) {
            shapes[node.outputs[o]] = std::move(out[o]);
            activation(node.outputs[o], view);
        }
        const Nchw4 x = activation(node.inputs[0], view);
        const Nchw4 y = nchw4[node.outputs[0]];
        Step& s = steps[k];
        switch (s.kind) {
            case StepKind::kConv2d:
                set_window_shapes(s.conv, x, y);
                break;
            case StepKind::kDepthwise:
                set_window_shapes(s.depthwise, x, y);
                break;
            case StepKind::kGlobalPool2d:
                s.pool.window = cuda::Window2d{x.height, x.width, 1, 1, 0, 0, 1, 1};
                [[fallthrough]];
            case StepKind::kPool2d:
                set_window_shapes(s.pool, x, y);
                s.pool.channels = y.channels;
                break;
            case StepKind::kAdd:
                s.add.count = y.bytes();
                break;
            case StepKind::kLut:
                if (s.lut.tables_count > 1 && s.lut.tables_count != y.channels) {
                    unsupported(view, "a lut with a table per channel of a rank-5 view");
                }
                s.lut.count = y.bytes();
                s.lut.channel_quads = (y.channels + 3) / 4;
                s.lut.plane = y.height * y.width;
                break;
            case StepKind::kMul: {
                // Each operand y's shape, or one value per sample and channel over y's plane.
                const auto per_channel = [&](size_t i) {
                    const Nchw4 v = activation(node.inputs[i], view);
                    if (v == y) {
                        return false;
                    }
                    if (v.batch != y.batch || v.channels != y.channels || v.height * v.width != 1) {
                        unsupported(view, "a mul of " + to_string(input_shapes[0]) + " by " +
                                              to_string(input_shapes[1]) +
                                              " (the CUDA kernel broadcasts only [N, C, 1, 1] "
                                              "over [N, C, H, W])");
                    }
                    return true;
                };
                s.mul.a_per_channel = per_channel(0);
                s.mul.b_per_channel = per_channel(1);
                s.mul.count = y.bytes();
                s.mul.plane = y.height * y.width;
                break;
            }
            case StepKind::kGather:
                for (size_t o = 0; o < node.outputs.size(); ++o) {
                    cuda::GatherChannelsParams& p = s.gathers[o];
                    p.batch = x.batch;
                    p.x_channels = x.channels;
                    p.y_channels = nchw4[node.outputs[o]].channels;
                    p.plane = x.height * x.width;
                }
                break;
            case StepKind::kConcat:
                s.concat.batch = y.batch;
                s.concat.plane = y.height * y.width;
                for (size_t i = 0; i < node.inputs.size(); ++i) {
                    s.concat.inputs[i].channels = activation(node.inputs[i], view).channels;
                }
                break;
            case StepKind::kAlias: {
                const bool one_pixel = x.height * x.width == 1 && y.height * y.width == 1;
                if (!(x == y) && !(one_pixel && x.batch == y.batch && x.channels == y.channels)) {
                    unsupported(view, "a reshape from " + to_string(input_shapes[0]) + " to " +
                                          to_string(shapes[node.outputs[0]]) +
                                          " (only [N, C, 1, 1] <-> [N, C] keep the NCHW4 bytes)");
                }
                storage[node.outputs[0]] = storage[node.inputs[0]];
                break;
            }
        }
    }

    // Lifetimes of each storage, in steps, as the CPU session plans its arena.
    const size_t steps_count = std::max<size_t>(1, g.nodes.size());
    std::vector<int64_t> tensor_of(g.values.size(), -1);
    std::vector<detail::TensorLifetime> lifetimes;
    auto define = [&](uint32_t id, size_t step) {
        if (storage[id] == id) {
            tensor_of[id] = int64_t(lifetimes.size());
            lifetimes.push_back({uint64_t(nchw4[id].bytes()), step, step});
        }
    };
    auto use = [&](uint32_t id, size_t step) {
        const int64_t t = tensor_of[storage[id]];
        if (t >= 0) {
            lifetimes[size_t(t)].last_step = std::max(lifetimes[size_t(t)].last_step, step);
        }
    };
    for (uint32_t id : g.inputs) {
        define(id, 0);
    }
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        for (uint32_t id : g.nodes[k].inputs) {
            use(id, k);
        }
        for (uint32_t id : g.nodes[k].outputs) {
            define(id, k);
        }
    }
    for (uint32_t id : g.outputs) {
        use(id, steps_count - 1);
    }
    const detail::MemoryPlan memory = detail::plan_memory(lifetimes);
    if (memory.arena_bytes > arena_capacity) {  // the old arena stays if the larger one fails
        uint8_t* larger = static_cast<uint8_t*>(device->allocate(size_t(memory.arena_bytes)));
        if (arena != nullptr) {
            device->release(arena);
        }
        arena = larger;
        arena_capacity = memory.arena_bytes;
    }
    arena_bytes = memory.arena_bytes;
    offsets.assign(g.values.size(), 0);
    for (uint32_t id = 0; id < g.values.size(); ++id) {
        if (tensor_of[storage[id]] >= 0) {
            offsets[id] = memory.offsets[size_t(tensor_of[storage[id]])];
        }
    }
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& node = g.nodes[k];
        Step& s = steps[k];
        uint8_t* y = at(node.outputs[0]);
        s.conv.x = reinterpret_cast<const int32_t*>(at(node.inputs[0]));
        s.conv.y = reinterpret_cast<int8_t*>(y);
        s.depthwise.x = reinterpret_cast<const int8_t*>(at(node.inputs[0]));
        s.depthwise.y = reinterpret_cast<int8_t*>(y);
        s.pool.x = s.depthwise.x;
        s.pool.y = s.depthwise.y;
        s.add.a = s.depthwise.x;
        s.add.b = node.inputs.size() > 1 ? reinterpret_cast<const int8_t*>(at(node.inputs[1]))
                                         : nullptr;
        s.add.y = s.depthwise.y;
        for (int32_t i = 0; i < s.concat.input_count; ++i) {
            s.concat.inputs[i].x = reinterpret_cast<const int8_t*>(at(node.inputs[size_t(i)]));
        }
        s.concat.y = s.depthwise.y;
        s.lut.x = s.depthwise.x;
        s.lut.y = s.depthwise.y;
        s.mul.a = s.add.a;
        s.mul.b = s.add.b;
        s.mul.y = s.depthwise.y;
        for (size_t o = 0; o < s.gathers.size(); ++o) {
            s.gathers[o].x = s.depthwise.x;
            s.gathers[o].y = reinterpret_cast<int8_t*>(at(node.outputs[o]));
        }
    }
    choose_conv_kernels(nchw4);
    layouts = nchw4;
    release_staging();
    for (const std::vector<uint32_t>* ends : {&g.inputs, &g.outputs}) {
        for (uint32_t id : *ends) {
            staging.push_back(device->allocate(size_t(layout(id, nullptr).nchw_bytes())));
        }
    }
    batch = new_batch;
}

// Graph value `value` (planned) between its NCHW bytes at `nchw` and its NCHW4 bytes in the arena;
// x and y as to_nchw4 reads them (from_nchw4 swaps them).
cuda::LayoutParams DeviceSession::Impl::layout(uint32_t value, const void* nchw) const {
    const Nchw4& v = layouts[value];
    return {static_cast<const int8_t*>(nchw), reinterpret_cast<int8_t*>(at(value)), v.batch,
            v.channels, v.height * v.width};
}

// The graph inputs' NCHW bytes (device memory) into the arena's NCHW4, every step, the outputs
// back to NCHW bytes (device memory).
void DeviceSession::Impl::run_on_device(const std::vector<const void*>& inputs,
                                        const std::vector<void*>& outputs) {
    const detail::Graph& g = graph();
    for (size_t i = 0; i < g.inputs.size(); ++i) {
        device->to_nchw4(layout(g.inputs[i], inputs[i]));
    }
    launch_all();
    for (size_t i = 0; i < g.outputs.size(); ++i) {
        cuda::LayoutParams p = layout(g.outputs[i], nullptr);
        p.x = p.y;
        p.y = static_cast<int8_t*>(outputs[i]);
        device->from_nchw4(p);
    }
}

// Fast-Run over the device's GEMM convolutions, per layer and batch size (they give the same
// bytes): the cache's choice, else under kSearch the fastest of a few timed launches.
void DeviceSession::Impl::choose_conv_kernels(const std::vector<Nchw4>& nchw4) {
    const std::vector<std::string> kernels = device->conv2d_kernels();
    for (size_t k = 0; k < steps.size(); ++k) {
        Step& s = steps[k];
        if (s.kind != StepKind::kConv2d) {
            continue;
        }
        s.conv_kernel = 0;
        if (options.fast_run != FastRun::kOff && kernels.size() > 1) {
            const cuda::Conv2dNchw4Params& p = s.conv;
            const Nchw4& x = nchw4[graph().nodes[k].inputs[0]];
            const cuda::Window2d& w = p.window;
            const std::string key =
                device->name() + " | qtk " + kVersion + " | conv2d x[" + std::to_string(x.batch) +
                ", " + std::to_string(x.channels) + ", " + std::to_string(x.height) + ", " +
                std::to_string(x.width) + "] out " + std::to_string(p.out_channels) + " kernel " +
                std::to_string(w.kernel_h) + "x" + std::to_string(w.kernel_w) + " stride " +
                std::to_string(w.stride_h) + "x" + std::to_string(w.stride_w) + " padding " +
                std::to_string(w.pad_h) + "x" + std::to_string(w.pad_w) + " dilation " +
                std::to_string(w.dilation_h) + "x" + std::to_string(w.dilation_w);
            const std::string* cached = fast_run_cache->find(key);
            const auto known = cached ? std::find(kernels.begin(), kernels.end(), *cached)
                                      : kernels.end();
            if (known != kernels.end()) {
                s.conv_kernel = size_t(known - kernels.begin());
            } else if (options.fast_run == FastRun::kSearch) {
                double best = 0;
                for (size_t i = 0; i < kernels.size(); ++i) {
                    device->conv2d(p, i);  // warm-up
                    const double seconds = device->seconds([&] {
                        for (int r = 0; r < 3; ++r) {
                            device->conv2d(p, i);
                        }
                    });
                    if (i == 0 || seconds < best) {
                        best = seconds;
                        s.conv_kernel = i;
                    }
                }
                fast_run_cache->record(key, kernels[s.conv_kernel]);
            }
        }
        s.kernel = kernels[s.conv_kernel];
    }
    fast_run_cache->save();
}

void DeviceSession::Impl::launch_all() {
    for (const Step& s : steps) {
        switch (s.kind) {
            case StepKind::kConv2d:
                device->conv2d(s.conv, s.conv_kernel);
                break;
            case StepKind::kDepthwise:
                device->depthwise(s.depthwise);
                break;
            case StepKind::kPool2d:
            case StepKind::kGlobalPool2d:
                device->pool2d(s.pool);
                break;
            case StepKind::kAdd:
                device->add(s.add);
                break;
            case StepKind::kConcat:
                device->concat(s.concat);
                break;
            case StepKind::kLut:
                device->lut(s.lut);
                break;
            case StepKind::kMul:
                device->mul(s.mul);
                break;
            case StepKind::kGather:
                for (const cuda::GatherChannelsParams& p : s.gathers) {
                    device->gather_channels(p);
                }
                break;
            case StepKind::kAlias:
                break;
        }
    }
}

DeviceSession::DeviceSession(std::shared_ptr<const Model> model, std::shared_ptr<Device> device,
                             const DeviceOptions& options)
    : impl_(std::make_unique<Impl>()) {
    if (!model || !device) {
        throw Error("DeviceSession: the model and the device must not be null");
    }
    impl_->model = std::move(model);
    impl_->device = std::move(device);
    impl_->options = options;
    impl_->fast_run_cache = std::make_unique<detail::FastRunCache>(options.fast_run_cache);
    const Model::Impl& m = *impl_->model->impl_;
    LoadOptions file_graph;
    file_graph.optimize_graph = false;
    impl_->file = detail::parse_model(m.bytes, m.size, file_graph);
    const detail::Graph& g = impl_->graph();
    for (const std::vector<uint32_t>* ends : {&g.inputs, &g.outputs}) {
        for (uint32_t id : *ends) {
            if (g.values[id].dtype != DType::kInt8) {
                throw Error(std::string("graph ") + (ends == &g.inputs ? "input" : "output") +
                            " '" + g.values[id].name + "' is " + dtype_name(g.values[id].dtype) +
                            "; the device session takes and gives int8 (quantize and dequantize "
                            "on the host: Session::quantize_input, dequantize_output)");
            }
        }
    }
    for (const Node& node : g.nodes) {
        impl_->steps.push_back(impl_->make_step(node));
    }
}

DeviceSession::~DeviceSession() = default;

void DeviceSession::Impl::check_inputs(const std::vector<const void*>& inputs,
                                       const std::vector<Shape>& input_shapes) const {
    const detail::Graph& g = graph();
    if (inputs.size() != g.inputs.size() || input_shapes.size() != g.inputs.size()) {
        throw Error("DeviceSession: the model has " + std::to_string(g.inputs.size()) +
                    " graph input(s), got " + std::to_string(inputs.size()) + " pointer(s) and " +
                    std::to_string(input_shapes.size()) + " shape(s)");
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Value& v = g.values[g.inputs[i]];
        Shape expected = v.shape;
        expected[0] = input_shapes[i].empty() ? 0 : input_shapes[i][0];
        if (input_shapes[i] != expected || expected[0] < 1 || inputs[i] == nullptr) {
            throw Error("graph input '" + v.name + "' takes " + batch_shape_pattern(v.shape) +
                        " int8 with N >= 1, got " + to_string(input_shapes[i]) +
                        (inputs[i] == nullptr ? " and a null pointer" : ""));
        }
        if (input_shapes[i][0] != input_shapes[0][0]) {
            throw Error("graph inputs disagree on the batch size: " +
                        to_string(input_shapes[0]) + " and " + to_string(input_shapes[i]));
        }
    }
}

std::vector<Tensor> DeviceSession::run(const std::vector<const void*>& inputs,
                                       const std::vector<Shape>& input_shapes) {
    Impl& s = *impl_;
    const detail::Graph& g = s.graph();
    s.check_inputs(inputs, input_shapes);
    s.plan_for(input_shapes[0][0]);
    const size_t ni = g.inputs.size();
    for (size_t i = 0; i < ni; ++i) {
        s.device->upload(s.staging[i], inputs[i],
                         size_t(s.layout(g.inputs[i], nullptr).nchw_bytes()));
    }
    s.run_on_device({s.staging.begin(), s.staging.begin() + ptrdiff_t(ni)},
                    {s.staging.begin() + ptrdiff_t(ni), s.staging.end()});
    std::vector<Tensor> outputs;
    for (size_t o = 0; o < g.outputs.size(); ++o) {
        Tensor t;
        t.shape = s.shapes[g.outputs[o]];
        t.data.resize(size_t(s.layout(g.outputs[o], nullptr).nchw_bytes()));
        s.device->download(t.data.data(), s.staging[ni + o], t.data.size());
        outputs.push_back(std::move(t));
    }
    return outputs;
}

void DeviceSession::run_on_device(const std::vector<const void*>& inputs,
                                  const std::vector<Shape>& input_shapes,
                                  const std::vector<void*>& outputs) {
    Impl& s = *impl_;
    s.check_inputs(inputs, input_shapes);
    const size_t count = s.graph().outputs.size();
    if (outputs.size() != count ||
        std::find(outputs.begin(), outputs.end(), nullptr) != outputs.end()) {
        throw Error("DeviceSession::run_on_device: the model has " + std::to_string(count) +
                    " graph output(s), got " + std::to_string(outputs.size()) +
                    " pointer(s), each must be non-null");
    }
    s.plan_for(input_shapes[0][0]);
    s.run_on_device(inputs, outputs);
    s.device->synchronize();
}

std::vector<Shape> DeviceSession::output_shapes(int64_t batch) {
    Impl& s = *impl_;
    if (batch < 1) {
        throw Error("DeviceSession::output_shapes: the batch size must be 1 or more, got " +
                    std::to_string(batch));
    }
    s.plan_for(batch);
    std::vector<Shape> shapes;
    for (uint32_t id : s.graph().outputs) {
        shapes.push_back(s.shapes[id]);
    }
    return shapes;
}

std::string DeviceSession::device_name() const { return impl_->device->name(); }

std::vector<std::string> DeviceSession::kernels() const {
    std::vector<std::string> names;
    for (const Step& s : impl_->steps) {
        names.push_back(s.kernel);
    }
    return names;
}

size_t DeviceSession::arena_bytes() const { return size_t(impl_->arena_bytes); }

std::vector<double> DeviceSession::time_runs(int runs) {
    if (impl_->batch == 0) {
        throw Error("DeviceSession::time_runs: run the session once first");
    }
    std::vector<double> seconds;
    for (int i = 0; i < runs; ++i) {
        seconds.push_back(impl_->device->seconds([this] { impl_->launch_all(); }));
    }
    return seconds;
}

}  // namespace qtk
