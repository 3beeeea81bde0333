// The public C++ API of the qtk deploy runtime: load a .qmodel (docs/qmodel_format.md) and run it
// on int8 tensors with the arithmetic of docs/quantization_spec.md; the float parts of a
// mixed-precision model run in float32.
//
//   auto model = qtk::Model::load("m.qmodel");          // validates every byte it reads
//   qtk::Session session(model, {/*threads=*/4});
//   std::vector<qtk::Tensor> out = session.run({x.data()}, {{8, 1, 28, 28}});
//
// A Model is immutable and may be shared by any number of sessions and threads. A Session owns the
// activation arena and a thread pool; use one session per calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace qtk {

// Every failure the runtime reports (a bad model file, a bad input, a bad option) is a qtk::Error
// whose message names what is wrong.
class Error : public std::runtime_error {
 public:
    using std::runtime_error::runtime_error;
};

// The values are the format's dtype codes. uint8 is only an image graph input, read by
// image_to_int8 nodes (docs/qmodel_format.md).
enum class DType : uint8_t { kInt8 = 1, kInt32 = 2, kFloat32 = 3, kUInt8 = 6 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

using Shape = std::vector<int64_t>;

// "[1, 3, 224, 224]"
std::string to_string(const Shape& shape);
// "[N, 3, 224, 224]": a graph input's shape with its batch dim left open, for messages.
std::string batch_shape_pattern(const Shape& shape);

// The largest element count of any tensor the runtime handles (a fuzzed or hostile file cannot
// make it allocate more per tensor; real models are far below it).
constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

struct TensorInfo {
    std::string name;
    DType dtype;  // int8 or float32 for graph inputs and outputs; uint8 for an image input
    Shape shape;  // as in the file: for graph inputs and outputs dims[0] is the example batch
    float scale;  // int8 only; 0 for float32
    int32_t zero_point;
};

// An output of Session::run, owning its values (row-major): `data` for an int8 output,
// `float_data` for a float32 one; the other stays empty.
struct Tensor {
    Shape shape;
    DType dtype = DType::kInt8;
    std::vector<int8_t> data;
    std::vector<float> float_data;
};

class Session;
class DeviceSession;

// The runtime's version; it keys Fast-Run caches (a new version may time kernels differently).
constexpr const char* kVersion = "0.1.0";

// One core's int8 multiply-accumulate peak in MACs per second, measured for `seconds` on
// registers with the exact products of the best int8 kernels this CPU runs: AVX-512 VNNI's
// vpdpbusd, else AVX2's vpmaddwd (int16) into vpaddd; 0 where this build or CPU has neither.
// Benchmarks report the conv layers' share of it.
double measure_int8_peak(double seconds = 0.2);

// One core's binary product peak (spec 24) in products per second: xor, vpopcntq and add on
// registers with AVX-512 VPOPCNTDQ, else AVX2's nibble-table popcount (vpshufb) and byte adds;
// 0 where this build or CPU has neither.
// benchmarks.binary reports the binary convs' share of it.
double measure_binary_peak(double seconds = 0.2);

// What reading memory that another core has just written costs against reading one's own writes,
// in nanoseconds per KiB, measured for about `seconds` by two threads that each write 256 KiB
// (an L2's worth) and then read their own or the other's, a word a cache line. It says where the
// cores sit: on one Zen 5 VM own reads took 4 ns/KiB and the other's 13 or 29 from minute to minute
// (the two vCPUs on one core complex or on two), and qtk's 2-thread times moved with it.
// Benchmarks report it beside their 2-thread figures.
struct CoreToCore {
    double own_ns_per_kib = 0.0, other_ns_per_kib = 0.0;
};
CoreToCore measure_core_to_core(double seconds = 0.2);

// How each layer's algorithm is chosen where several compute it (each gives the same bytes).
enum class FastRun {
    kOff,     // the first usable in preference order (QTK_CONV_ALGO may pin one by name)
    kUse,     // the cache's winner where it has the layer, else as kOff; nothing is timed
    kSearch,  // like kUse, but layers the cache lacks are timed on this machine and recorded
};

struct LoadOptions {
    FastRun fast_run = FastRun::kOff;
    // Fast-Run cache file: lines keyed by layer signature, CPU and qtk version. Read when it
    // exists; kSearch rewrites it when it learned something. Empty: an in-memory search only.
    std::string fast_run_cache;
    int fast_run_threads = 1;  // time with the thread count the sessions will use
    // The runtime's graph passes (src/graph_passes.h: residual adds fused into the convs before
    // them, PReLUs and luts into the adds before them, channels-last regions). They change no
    // output byte; off runs the file's nodes one by one, to compare.
    bool optimize_graph = true;
};

class Model {
 public:
    // Maps the file (POSIX mmap, weights used in place; the file must not change while the
    // model lives) or, where that is not possible, reads it into a 64-byte aligned buffer.
    // Errors start with "model file '<path>': ".
    static std::shared_ptr<const Model> load(const std::string& path,
                                             const LoadOptions& options = {});
    // Copies the bytes into a 64-byte aligned buffer, so the caller's buffer may go away.
    static std::shared_ptr<const Model> from_bytes(const void* data, size_t size,
                                                   const LoadOptions& options = {});

    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const std::string& producer() const;
    const std::vector<TensorInfo>& inputs() const;   // graph inputs, int8 or float32
    const std::vector<TensorInfo>& outputs() const;  // graph outputs, int8 or float32
    size_t node_count() const;
    std::vector<std::string> op_names() const;  // node ops in execution order
    // The algorithm serving each node, in execution order ("reference" where an op has one).
    std::vector<std::string> algorithms() const;

    struct Impl;  // internal: the graph, its kernels and the bytes they point into

 private:
    explicit Model(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
    friend class Session;
    friend class DeviceSession;
};

// Activation memory that several sessions use in turn (models run one after another): each run
// takes its arena from here, growing it when a plan needs more, so the models together need the
// largest plan rather than the sum. Runs of sessions that share an Arena must not overlap.
class Arena {
 public:
    Arena();
    ~Arena();
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    size_t bytes() const;  // the size reserved so far

    struct Impl;

 private:
    std::unique_ptr<Impl> impl_;
    friend class Session;
};

struct SessionOptions {
    int threads = 1;  // 1 runs every kernel on the calling thread
    bool profile = false;  // time every node of every run (see Session::profile)
    std::shared_ptr<Arena> arena = nullptr;  // shared activation memory; null: the session's own
    // Debugging: every activation keeps its own arena bytes until the run ends (no reuse), so
    // Session::intermediates() can return each node's output. A larger arena, same results.
    bool keep_intermediates = false;
};

// A part of a node's work in the last run that one thread ran (a range of a parallel loop).
struct ThreadRange {
    int thread = 0;        // 0 the thread that called run, 1.. the session's workers
    double start = 0.0;    // seconds since the session was created (steady clock)
    double seconds = 0.0;
};

// One node's share of the runs since profiling started.
struct NodeProfile {
    std::string name;       // the module path in the torch model
    std::string op;         // "conv2d"
    std::string algorithm;  // the kernel that served it
    double seconds = 0.0;   // summed over the runs
    int64_t runs = 0;
    int64_t macs = 0;  // multiply-accumulates of one run at the current batch (conv2d, linear)
    // The last run only, for timelines: when the node started, in seconds since the session was
    // created (steady clock), and how long it took.
    double last_start = 0.0;
    double last_seconds = 0.0;
    std::vector<ThreadRange> last_ranges;  // the parallel loops' ranges, by thread
};

// A value the last run computed (SessionOptions::keep_intermediates): a graph input or a node's
// output. Value ids are the file's; values a graph pass adds (NHWC twins, named "<name> (NHWC)")
// come after them.
struct Intermediate {
    uint32_t value_id = 0;
    std::string value;  // the value's name
    std::string node;   // the name of the node that produced it; empty for a graph input
    std::string op;     // that node's op; empty for a graph input
    Tensor tensor;
};

class Session {
 public:
    // Plans memory for the file's batch size right away.
    explicit Session(std::shared_ptr<const Model> model, SessionOptions options = {});
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // One pointer and shape per graph input, in the model's order; each pointer holds values of
    // that input's dtype (model().inputs()[i].dtype: int8_t or float). Every input has the same
    // batch N >= 1 and the file's other dims; a new N re-plans memory. Results do not depend on
    // the thread count or on N (each sample is computed alone).
    std::vector<Tensor> run(const std::vector<const void*>& inputs,
                            const std::vector<Shape>& input_shapes);

    // run() for a model whose one graph input is a uint8 image [N, H, W, C] (channels last, as
    // decoders give it), read by the model's image_to_int8 node: resize, crop, channel order and
    // normalize + quantize in the runtime (docs/quantization_spec.md section 23).
    std::vector<Tensor> run_image(const uint8_t* image, const Shape& shape);

    // Of the current plan: the arena's size, and the most bytes that are live at any one step
    // (no placement can use less).
    size_t arena_bytes() const;
    size_t arena_lower_bound() const;
    int64_t batch() const;

    // Float <-> int8 at the graph's edges with that input's or output's (scale, zero_point), by the
    // rules of docs/quantization_spec.md section 1. Only for int8 inputs and outputs: a float32
    // one takes and gives float data as it is (an Error says so).
    void quantize_input(size_t index, const float* x, size_t count, int8_t* q) const;
    void dequantize_output(size_t index, const int8_t* q, size_t count, float* x) const;

    const Model& model() const;

    // Per node, in execution order; empty unless SessionOptions::profile.
    std::vector<NodeProfile> profile() const;

    // Graph inputs, then every node's outputs in execution order, as the last run left them
    // (with a shared Arena, until another session runs); an Error unless
    // SessionOptions::keep_intermediates, or before the first run.
    std::vector<Intermediate> intermediates() const;

 private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace qtk
