// qtk_run: loads a .qmodel, runs it on random inputs (int8, or float32 for a float graph input) or
// on inputs read from files, reports outputs, memory and latency, and can save the outputs.
//   qtk_run model.qmodel [--threads N] [--batch N] [--iters N] [--input FILE]... [--output FILE]...
// --input FILE (once per graph input, in the model's order) is a .npy file of shape [N, <the
// input's other dims>]: int8 or float32 for an int8 input (float32 is quantized with the input's
// scale and zero point, as qtk.runtime's Session.run does), float32 for a float32 input, uint8
// [N, H, W, C] images for a model exported with image= (its image_to_int8 node preprocesses them,
// as Session.run_image does). A file that is not .npy is read as raw values of the input's dtype
// (int8 or uint8 bytes, or little-endian float32), a whole number N of samples. --output FILE (once per graph output) writes that output
// as .npy: int8 for an int8 output (the runtime's bytes, not dequantized), float32 for a float one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "npy.h"
#include "qtk/runtime.h"

namespace {

struct Options {
    std::string path;
    int threads = 1;
    int64_t batch = 0;  // 0: the file's batch
    int iters = 10;
    std::vector<std::string> inputs;   // --input files, one per graph input
    std::vector<std::string> outputs;  // --output files, one per graph output
};

void usage() {
    std::fprintf(stderr,
                 "usage: qtk_run model.qmodel [--threads N] [--batch N] [--iters N]\n"
                 "               [--input FILE]... [--output FILE]...\n"
                 "  --threads N    worker threads (default 1)\n"
                 "  --batch N      batch size of the random inputs (default: the file's)\n"
                 "  --iters N      timed runs after the first run (default 10; 0: none)\n"
                 "  --input FILE   a graph input, once per input in the model's order: .npy of\n"
                 "                 shape [N, <the input's other dims>], int8 or float32 (float32 is\n"
                 "                 quantized for an int8 input), uint8 images for an image input;\n"
                 "                 or raw values of the input's dtype, little-endian, a whole number\n"
                 "                 of samples\n"
                 "  --output FILE  write a graph output as .npy (int8 for an int8 output, float32\n"
                 "                 for a float one), once per output in the model's order\n");
}

// An integer option value in [low, limit], or false.
bool parse_integer(const char* text, int64_t low, int64_t limit, int64_t* out) {
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < low || v > limit) {
        return false;
    }
    *out = v;
    return true;
}

bool parse_args(int argc, char** argv, Options* o) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--threads" || arg == "--batch" || arg == "--iters") {
            int64_t v = 0;
            const int64_t low = arg == "--iters" ? 0 : 1;
            if (i + 1 >= argc || !parse_integer(argv[i + 1], low, 1 << 20, &v)) {
                std::fprintf(stderr, "qtk_run: %s needs an integer from %d to 1048576\n",
                             arg.c_str(), static_cast<int>(low));
                return false;
            }
            ++i;
            if (arg == "--threads") {
                o->threads = static_cast<int>(v);
            }
            if (arg == "--batch") {
                o->batch = v;
            }
            if (arg == "--iters") {
                o->iters = static_cast<int>(v);
            }
        } else if (arg == "--input" || arg == "--output") {
            if (i + 1 >= argc || argv[i + 1][0] == '\0') {
                std::fprintf(stderr, "qtk_run: %s needs a file name\n", arg.c_str());
                return false;
            }
            (arg == "--input" ? o->inputs : o->outputs).push_back(argv[++i]);
        } else if (!arg.empty() && arg[0] == '-') {
            std::fprintf(stderr, "qtk_run: unknown option %s\n", arg.c_str());
            return false;
        } else if (o->path.empty()) {
            o->path = arg;
        } else {
            std::fprintf(stderr, "qtk_run: more than one model given\n");
            return false;
        }
    }
    if (o->path.empty()) {
        std::fprintf(stderr, "qtk_run: no model given\n");
        return false;
    }
    if (o->batch > 0 && !o->inputs.empty()) {
        std::fprintf(stderr, "qtk_run: --batch is for random inputs; with --input the files' first "
                             "dim is the batch (give one or the other)\n");
        return false;
    }
    return true;
}

// One graph input's values: int8 (or a uint8 image's bytes), or float32 for a float32 input
// (random ones: int8 over its whole range, float32 in [-4, 4]).
struct InputBuffer {
    std::vector<int8_t> int8;
    std::vector<float> float32;
    const void* data() const {
        return float32.empty() ? static_cast<const void*>(int8.data()) : float32.data();
    }
};

void print_tensor(const char* kind, const qtk::TensorInfo& info, const qtk::Shape& shape,
                  const std::vector<int8_t>& int8, const std::vector<float>& float32) {
    if (info.dtype == qtk::DType::kFloat32 || info.dtype == qtk::DType::kUInt8) {
        std::printf("  %s '%s' %s %s:", kind, info.name.c_str(), qtk::to_string(shape).c_str(),
                    qtk::dtype_name(info.dtype));
    } else {
        std::printf("  %s '%s' %s scale %g zero_point %d:", kind, info.name.c_str(),
                    qtk::to_string(shape).c_str(), static_cast<double>(info.scale),
                    info.zero_point);
    }
    const size_t count = std::max(int8.size(), float32.size());
    const size_t shown = std::min<size_t>(count, 16);
    for (size_t i = 0; i < shown; ++i) {
        if (float32.empty()) {  // an image's bytes are uint8
            std::printf(" %d", info.dtype == qtk::DType::kUInt8 ? int{static_cast<uint8_t>(int8[i])}
                                                                : int{int8[i]});
        } else {
            std::printf(" %g", static_cast<double>(float32[i]));
        }
    }
    std::printf("%s\n", count > shown ? " ..." : "");
}

std::string input_label(size_t index, const qtk::TensorInfo& info) {
    return "input " + std::to_string(index) + " ('" + info.name + "')";
}

// Graph input `index` from `path` (see the file's opening comment); sets *shape to its shape.
InputBuffer read_input(const std::string& path, size_t index, const qtk::Session& session,
                       qtk::Shape* shape) {
    const qtk::TensorInfo& info = session.model().inputs()[index];
    const std::string label = input_label(index, info);
    const std::vector<uint8_t> bytes = qtk_tools::read_file_bytes(path);
    InputBuffer buffer;
    int64_t sample = 1;  // elements of one sample
    for (size_t d = 1; d < info.shape.size(); ++d) {
        sample *= info.shape[d];
    }
    if (!qtk_tools::is_npy(bytes)) {
        const size_t sample_bytes = static_cast<size_t>(sample) * qtk::dtype_size(info.dtype);
        if (bytes.empty() || sample_bytes == 0 || bytes.size() % sample_bytes != 0) {
            throw qtk::Error(path + " is not a .npy file, and its " + std::to_string(bytes.size()) +
                             " bytes are not raw " + qtk::dtype_name(info.dtype) + " values of " +
                             label + " " + qtk::batch_shape_pattern(info.shape) + ": those are " +
                             "N >= 1 times " + std::to_string(sample_bytes) +
                             " bytes (save the array with numpy.save instead)");
        }
        *shape = info.shape;
        (*shape)[0] = static_cast<int64_t>(bytes.size() / sample_bytes);
        if (info.dtype == qtk::DType::kFloat32) {
            if (!qtk_tools::host_is_little_endian()) {
                throw qtk::Error("raw float32 input files are read on little-endian hosts only");
            }
            buffer.float32.resize(bytes.size() / sizeof(float));
            std::memcpy(buffer.float32.data(), bytes.data(), bytes.size());
        } else {
            buffer.int8.assign(bytes.begin(), bytes.end());
        }
        return buffer;
    }
    qtk_tools::NpyArray array = qtk_tools::parse_npy(bytes, path);
    bool fits = array.shape.size() == info.shape.size() && !array.shape.empty() &&
                array.shape[0] >= 1;
    for (size_t d = 1; fits && d < info.shape.size(); ++d) {
        fits = array.shape[d] == info.shape[d];
    }
    if (!fits) {
        throw qtk::Error(path + " has shape " + qtk::to_string(array.shape) + " but " + label +
                         " takes " + qtk::batch_shape_pattern(info.shape) +
                         " (N >= 1 samples); reshape the array to that");
    }
    *shape = array.shape;
    const size_t count = array.bytes.size() / qtk::dtype_size(array.dtype);
    // uint8 only for an image input, which takes nothing else: its bytes are pixels, not values
    // of another dtype to convert.
    const bool image = info.dtype == qtk::DType::kUInt8;
    if (image != (array.dtype == qtk::DType::kUInt8)) {
        throw qtk::Error(path + " holds " + qtk::dtype_name(array.dtype) + " values but " + label +
                         (image ? " is a uint8 image; save the pixels as uint8 "
                                  "(x.astype(numpy.uint8))"
                                : " is " + std::string(qtk::dtype_name(info.dtype)) +
                                      "; uint8 is for an image input (a model exported with "
                                      "image=)"));
    }
    if (info.dtype == qtk::DType::kFloat32) {
        if (array.dtype != qtk::DType::kFloat32) {
            throw qtk::Error(path + " holds int8 values but " + label +
                             " is float32; save it as float32 (x.astype(numpy.float32))");
        }
        buffer.float32.resize(count);
        std::memcpy(buffer.float32.data(), array.bytes.data(), array.bytes.size());
    } else if (array.dtype == qtk::DType::kFloat32) {
        std::vector<float> values(count);
        std::memcpy(values.data(), array.bytes.data(), array.bytes.size());
        buffer.int8.resize(count);
        session.quantize_input(index, values.data(), count, buffer.int8.data());
    } else {
        buffer.int8.assign(array.bytes.begin(), array.bytes.end());
    }
    return buffer;
}

// Random values of every graph input at batch `batch`.
std::vector<InputBuffer> random_inputs(const qtk::Model& model, int64_t batch,
                                       std::vector<qtk::Shape>* shapes) {
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int> byte(-128, 127);
    std::uniform_real_distribution<float> real(-4.0f, 4.0f);
    std::vector<InputBuffer> buffers;
    for (const qtk::TensorInfo& info : model.inputs()) {
        qtk::Shape shape = info.shape;
        shape[0] = batch;
        int64_t count = 1;
        for (int64_t d : shape) {
            if (d > qtk::kMaxTensorElements / count) {
                throw qtk::Error("batch " + std::to_string(batch) + " is too large");
            }
            count *= d;
        }
        InputBuffer buffer;
        if (info.dtype == qtk::DType::kFloat32) {
            buffer.float32.resize(static_cast<size_t>(count));
            for (float& v : buffer.float32) {
                v = real(rng);
            }
        } else {
            buffer.int8.resize(static_cast<size_t>(count));
            for (int8_t& v : buffer.int8) {
                v = static_cast<int8_t>(byte(rng));
            }
        }
        buffers.push_back(std::move(buffer));
        shapes->push_back(shape);
    }
    return buffers;
}

int run(const Options& o) {
    const std::shared_ptr<const qtk::Model> model = qtk::Model::load(o.path);
    const size_t n_inputs = model->inputs().size();
    const size_t n_outputs = model->outputs().size();
    if (!o.inputs.empty() && o.inputs.size() != n_inputs) {
        throw qtk::Error("--input given " + std::to_string(o.inputs.size()) + " time(s) but " +
                         o.path + " has " + std::to_string(n_inputs) +
                         " graph input(s); give one --input per input, in order");
    }
    if (!o.outputs.empty() && o.outputs.size() != n_outputs) {
        throw qtk::Error("--output given " + std::to_string(o.outputs.size()) + " time(s) but " +
                         o.path + " has " + std::to_string(n_outputs) +
                         " graph output(s); give one --output per output, in order");
    }
    qtk::Session session(model, {o.threads});
    std::vector<InputBuffer> buffers;
    std::vector<const void*> inputs;
    std::vector<qtk::Shape> shapes;
    if (o.inputs.empty()) {
        const int64_t batch = o.batch > 0 ? o.batch : model->inputs()[0].shape[0];
        buffers = random_inputs(*model, batch, &shapes);
    } else {
        for (size_t i = 0; i < n_inputs; ++i) {
            shapes.emplace_back();
            buffers.push_back(read_input(o.inputs[i], i, session, &shapes.back()));
        }
    }
    std::printf("model %s (producer '%s', %zu nodes), batch %lld, %d thread(s)\n", o.path.c_str(),
                model->producer().c_str(), model->node_count(),
                static_cast<long long>(shapes[0][0]), o.threads);

    for (const InputBuffer& buffer : buffers) {
        inputs.push_back(buffer.data());
    }
    std::vector<qtk::Tensor> outputs =
        session.run(inputs, shapes);  // warm-up, and the outputs shown
    std::vector<double> us;
    for (int i = 0; i < o.iters; ++i) {
        const auto start = std::chrono::steady_clock::now();
        session.run(inputs, shapes);
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
    }
    std::sort(us.begin(), us.end());
    for (size_t i = 0; i < o.outputs.size(); ++i) {
        const qtk::Tensor& t = outputs[i];
        const bool is_float = t.dtype == qtk::DType::kFloat32;
        qtk_tools::write_npy(o.outputs[i], t.dtype, t.shape,
                             is_float ? static_cast<const void*>(t.float_data.data()) : t.data.data(),
                             is_float ? t.float_data.size() : t.data.size());
    }

    for (size_t i = 0; i < inputs.size(); ++i) {
        print_tensor("input", model->inputs()[i], shapes[i], buffers[i].int8, buffers[i].float32);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
        print_tensor("output", model->outputs()[i], outputs[i].shape, outputs[i].data,
                     outputs[i].float_data);
    }
    std::printf("arena %zu bytes, lower bound %zu bytes (%.2fx)\n", session.arena_bytes(),
                session.arena_lower_bound(),
                static_cast<double>(session.arena_bytes()) /
                    static_cast<double>(std::max<size_t>(1, session.arena_lower_bound())));
    if (!us.empty()) {
        std::printf("latency over %d runs: min %.1f us, median %.1f us, max %.1f us\n", o.iters,
                    us.front(), us[us.size() / 2], us.back());
    }
    for (size_t i = 0; i < o.outputs.size(); ++i) {
        std::printf("output %zu written to %s\n", i, o.outputs[i].c_str());
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (!parse_args(argc, argv, &options)) {
        usage();
        return 1;
    }
    try {
        return run(options);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "qtk_run: %s\n", e.what());
        return 1;
    }
}
