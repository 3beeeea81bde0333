// Runs whole .qmodel files on the GPU (DeviceSession, cuda_device()) beside the CPU session on the
// same random int8 inputs: the outputs must be byte-identical; then times the GPU runs, with the
// device's default convolution and with Fast-Run's per-layer choice. One JSON object per line on
// stdout; benchmarks/cuda.py runs it. Exits 1 where any output differs.
//
//     qtk_cuda_models [--batch N]... [--runs N] [--emulated] model.qmodel...
//
// Batches 1 and 32 by default; --emulated runs the kernels' host twins instead of the GPU (a check
// of the plan on the CPU; slow).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "qtk/device_session.h"
#include "qtk/runtime.h"

namespace {

// The number of distinct values in an output: a degenerate model (all outputs alike) would make
// the comparison vacuous, so it is reported beside it.
int distinct_values(const std::vector<int8_t>& data) {
    std::vector<bool> seen(256, false);
    for (int8_t v : data) {
        seen[uint8_t(v)] = true;
    }
    return int(std::count(seen.begin(), seen.end(), true));
}

bool run_model(const std::string& path, const std::vector<int64_t>& batches, int runs,
               const std::shared_ptr<qtk::Device>& device) {
    const auto model = qtk::Model::load(path);
    const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
    qtk::Session cpu(model, {threads});
    qtk::DeviceOptions search;
    search.fast_run = qtk::FastRun::kSearch;
    qtk::DeviceSession default_kernels(model, device), fast_run(model, device, search);
    bool same = true;
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> byte(-128, 127);
    for (int64_t batch : batches) {
        std::vector<std::vector<int8_t>> inputs;
        std::vector<const void*> pointers;
        std::vector<qtk::Shape> shapes;
        for (const qtk::TensorInfo& info : model->inputs()) {
            qtk::Shape shape = info.shape;
            shape[0] = batch;
            int64_t count = 1;
            for (int64_t d : shape) count *= d;
            inputs.emplace_back(size_t(count));
            for (int8_t& v : inputs.back()) v = int8_t(byte(rng));
            pointers.push_back(inputs.back().data());
            shapes.push_back(shape);
        }
        const std::vector<qtk::Tensor> want = cpu.run(pointers, shapes);
        for (qtk::DeviceSession* gpu : {&default_kernels, &fast_run}) {
            const std::vector<qtk::Tensor> got = gpu->run(pointers, shapes);
            bool identical = got.size() == want.size();
            for (size_t i = 0; identical && i < want.size(); ++i) {
                identical = got[i].shape == want[i].shape && got[i].data == want[i].data;
            }
            same = same && identical;
            std::vector<double> seconds = gpu->time_runs(runs);
            std::sort(seconds.begin(), seconds.end());
            const std::vector<std::string> kernels = gpu->kernels();
            std::printf("{\"model\": \"%s\", \"batch\": %lld, \"gpu\": \"%s\", "
                        "\"fast_run\": %s, \"dp4a_layers\": %d, \"mma_layers\": %d, "
                        "\"byte_identical\": %s, \"distinct_output_values\": %d, "
                        "\"median_ms\": %.4f, \"min_ms\": %.4f, \"runs\": %d, "
                        "\"arena_bytes\": %zu, \"cpu_threads\": %d}\n",
                        path.c_str(), (long long)batch, gpu->device_name().c_str(),
                        gpu == &fast_run ? "true" : "false",
                        int(std::count(kernels.begin(), kernels.end(), "conv2d_int8_dp4a")),
                        int(std::count(kernels.begin(), kernels.end(), "conv2d_int8_mma")),
                        identical ? "true" : "false", distinct_values(want[0].data),
                        seconds[seconds.size() / 2] * 1e3, seconds[0] * 1e3, runs,
                        gpu->arena_bytes(), threads);
            std::fflush(stdout);
        }
    }
    return same;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int64_t> batches;
    std::vector<std::string> models;
    int runs = 50;
    bool emulated = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if ((arg == "--batch" || arg == "--runs") && i + 1 < argc) {
            const long v = std::strtol(argv[++i], nullptr, 10);
            if (v < 1 || v > 4096) {
                std::fprintf(stderr, "%s takes 1 to 4096\n", arg.c_str());
                return 2;
            }
            (arg == "--batch" ? void(batches.push_back(v)) : void(runs = int(v)));
        } else if (arg == "--emulated") {
            emulated = true;
        } else {
            models.push_back(arg);
        }
    }
    if (models.empty()) {
        std::fprintf(stderr, "usage: qtk_cuda_models [--batch N]... [--runs N] [--emulated] "
                             "model.qmodel...\n");
        return 2;
    }
    if (batches.empty()) batches = {1, 32};
    bool same = true;
    try {
        const auto device = emulated ? qtk::emulated_cuda_device() : qtk::cuda_device();
        for (const std::string& path : models) {
            same = run_model(path, batches, runs, device) && same;
        }
    } catch (const qtk::Error& e) {
        std::fprintf(stderr, "qtk_cuda_models: %s\n", e.what());
        return 2;
    }
    return same ? 0 : 1;
}
