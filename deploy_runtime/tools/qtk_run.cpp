// qtk_run: loads a .qmodel, runs it on random inputs (int8, or float32 for a float graph input) and
// reports outputs, memory and latency.
//   qtk_run model.qmodel [--threads N] [--batch N] [--iters N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "qtk/runtime.h"

namespace {

struct Options {
    std::string path;
    int threads = 1;
    int64_t batch = 0;  // 0: the file's batch
    int iters = 10;
};

void usage() {
    std::fprintf(stderr,
                 "usage: qtk_run model.qmodel [--threads N] [--batch N] [--iters N]\n"
                 "  --threads N  worker threads (default 1)\n"
                 "  --batch N    batch size (default: the file's)\n"
                 "  --iters N    timed runs after one warm-up (default 10)\n");
}

// A positive integer option value, or false.
bool parse_positive(const char* text, int64_t limit, int64_t* out) {
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < 1 || v > limit) {
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
            if (i + 1 >= argc || !parse_positive(argv[i + 1], 1 << 20, &v)) {
                std::fprintf(stderr, "qtk_run: %s needs a positive integer (at most 1048576)\n",
                             arg.c_str());
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
    }
    return !o->path.empty();
}

// Random values of one graph input's dtype: int8 (or a uint8 image's bytes) over its whole range,
// float32 in [-4, 4].
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

int run(const Options& o) {
    const std::shared_ptr<const qtk::Model> model = qtk::Model::load(o.path);
    qtk::Session session(model, {o.threads});
    const int64_t batch = o.batch > 0 ? o.batch : model->inputs()[0].shape[0];
    std::printf("model %s (producer '%s', %zu nodes), batch %lld, %d thread(s)\n", o.path.c_str(),
                model->producer().c_str(), model->node_count(), static_cast<long long>(batch),
                o.threads);

    std::mt19937 rng(1234);
    std::uniform_int_distribution<int> byte(-128, 127);
    std::uniform_real_distribution<float> real(-4.0f, 4.0f);
    std::vector<InputBuffer> buffers;
    std::vector<const void*> inputs;
    std::vector<qtk::Shape> shapes;
    for (const qtk::TensorInfo& info : model->inputs()) {
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
        shapes.push_back(shape);
    }

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
    std::printf("latency over %d runs: min %.1f us, median %.1f us, max %.1f us\n", o.iters,
                us.front(), us[us.size() / 2], us.back());
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
