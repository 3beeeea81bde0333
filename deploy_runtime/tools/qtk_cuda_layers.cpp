// Times qtk's CUDA kernels on the conv layers of resnet18 and mobilenet_v2 at 224x224 (random
// int8 data), one JSON object per line on stdout; benchmarks/cuda.py runs it beside PyTorch's
// cuDNN convolutions of the same shapes. Each kernel is launched `repeats` times back to back
// between two CUDA events, after a warm-up, and the median of 7 such rounds is reported per
// launch. The two GEMM kernels (dp4a, mma) must give the same bytes on every layer: a layer where
// they differ is reported, and the tool exits 1.
//
//     qtk_cuda_layers [batch ...]     (default: 1 32)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../kernels/cuda/conv2d_int8_depthwise.h"
#include "../kernels/cuda/conv2d_int8_dp4a.h"
#include "../kernels/cuda/conv2d_int8_mma.h"

namespace {

using qtk::cuda::Conv2dNchw4Params;
using qtk::cuda::DepthwiseNchw4Params;
using qtk::cuda::Window2d;

struct Layer {
    const char* model;
    const char* name;
    int count;  // how many layers of the model have this shape
    int in, out, size, kernel, stride, groups;
};

// resnet18's convolutions (the downsampling 1x1s and the classifier as a 1x1 conv included) and
// mobilenet_v2's, one row per distinct shape.
const Layer kLayers[] = {
    {"resnet18", "conv1 7x7/2", 1, 3, 64, 224, 7, 2, 1},
    {"resnet18", "3x3 64@56", 4, 64, 64, 56, 3, 1, 1},
    {"resnet18", "3x3/2 64->128", 1, 64, 128, 56, 3, 2, 1},
    {"resnet18", "1x1/2 64->128", 1, 64, 128, 56, 1, 2, 1},
    {"resnet18", "3x3 128@28", 3, 128, 128, 28, 3, 1, 1},
    {"resnet18", "3x3/2 128->256", 1, 128, 256, 28, 3, 2, 1},
    {"resnet18", "1x1/2 128->256", 1, 128, 256, 28, 1, 2, 1},
    {"resnet18", "3x3 256@14", 3, 256, 256, 14, 3, 1, 1},
    {"resnet18", "3x3/2 256->512", 1, 256, 512, 14, 3, 2, 1},
    {"resnet18", "1x1/2 256->512", 1, 256, 512, 14, 1, 2, 1},
    {"resnet18", "3x3 512@7", 3, 512, 512, 7, 3, 1, 1},
    {"resnet18", "fc 512->1000", 1, 512, 1000, 1, 1, 1, 1},
    {"mobilenet_v2", "conv 3x3/2 3->32", 1, 3, 32, 224, 3, 2, 1},
    {"mobilenet_v2", "dw 3x3 32@112", 1, 32, 32, 112, 3, 1, 32},
    {"mobilenet_v2", "1x1 32->16@112", 1, 32, 16, 112, 1, 1, 1},
    {"mobilenet_v2", "1x1 16->96@112", 1, 16, 96, 112, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3/2 96@112", 1, 96, 96, 112, 3, 2, 96},
    {"mobilenet_v2", "1x1 96->24@56", 1, 96, 24, 56, 1, 1, 1},
    {"mobilenet_v2", "1x1 24->144@56", 2, 24, 144, 56, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3 144@56", 1, 144, 144, 56, 3, 1, 144},
    {"mobilenet_v2", "1x1 144->24@56", 1, 144, 24, 56, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3/2 144@56", 1, 144, 144, 56, 3, 2, 144},
    {"mobilenet_v2", "1x1 144->32@28", 1, 144, 32, 28, 1, 1, 1},
    {"mobilenet_v2", "1x1 32->192@28", 3, 32, 192, 28, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3 192@28", 2, 192, 192, 28, 3, 1, 192},
    {"mobilenet_v2", "1x1 192->32@28", 2, 192, 32, 28, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3/2 192@28", 1, 192, 192, 28, 3, 2, 192},
    {"mobilenet_v2", "1x1 192->64@14", 1, 192, 64, 14, 1, 1, 1},
    {"mobilenet_v2", "1x1 64->384@14", 4, 64, 384, 14, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3 384@14", 4, 384, 384, 14, 3, 1, 384},
    {"mobilenet_v2", "1x1 384->64@14", 3, 384, 64, 14, 1, 1, 1},
    {"mobilenet_v2", "1x1 384->96@14", 1, 384, 96, 14, 1, 1, 1},
    {"mobilenet_v2", "1x1 96->576@14", 3, 96, 576, 14, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3 576@14", 2, 576, 576, 14, 3, 1, 576},
    {"mobilenet_v2", "1x1 576->96@14", 2, 576, 96, 14, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3/2 576@14", 1, 576, 576, 14, 3, 2, 576},
    {"mobilenet_v2", "1x1 576->160@7", 1, 576, 160, 7, 1, 1, 1},
    {"mobilenet_v2", "1x1 160->960@7", 3, 160, 960, 7, 1, 1, 1},
    {"mobilenet_v2", "dw 3x3 960@7", 3, 960, 960, 7, 3, 1, 960},
    {"mobilenet_v2", "1x1 960->160@7", 2, 960, 160, 7, 1, 1, 1},
    {"mobilenet_v2", "1x1 960->320@7", 1, 960, 320, 7, 1, 1, 1},
    {"mobilenet_v2", "1x1 320->1280@7", 1, 320, 1280, 7, 1, 1, 1},
    {"mobilenet_v2", "fc 1280->1000", 1, 1280, 1000, 1, 1, 1, 1},
};

void check(cudaError_t error, const char* what) {
    if (error != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
        std::exit(2);
    }
}

template <typename T>
T* upload(const std::vector<T>& host) {
    void* device = nullptr;
    check(cudaMalloc(&device, host.size() * sizeof(T)), "cudaMalloc");
    check(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
          "cudaMemcpy");
    return static_cast<T*>(device);
}

// Median milliseconds per launch of `launch` (returning a cudaError_t as int).
template <typename Launch>
double time_launches(const Launch& launch, int repeats) {
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    for (int i = 0; i < 3; ++i) {
        check(static_cast<cudaError_t>(launch()), "launch");
    }
    std::vector<double> rounds;
    for (int round = 0; round < 7; ++round) {
        check(cudaEventRecord(start), "cudaEventRecord");
        for (int i = 0; i < repeats; ++i) {
            check(static_cast<cudaError_t>(launch()), "launch");
        }
        check(cudaEventRecord(stop), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "the kernels");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        rounds.push_back(double(ms) / repeats);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
}

void print(const Layer& l, int batch, const char* kernel, double ms) {
    const int out = (l.size + 2 * (l.kernel / 2) - l.kernel) / l.stride + 1;
    const double macs = double(batch) * out * out * l.out * (double(l.in) / l.groups) * l.kernel *
                        l.kernel;
    std::printf("{\"model\": \"%s\", \"layer\": \"%s\", \"count\": %d, \"batch\": %d, "
                "\"in\": %d, \"out\": %d, \"size\": %d, \"kernel\": %d, \"stride\": %d, "
                "\"groups\": %d, \"qtk_kernel\": \"%s\", \"ms\": %.5f, \"tops\": %.3f}\n",
                l.model, l.name, l.count, batch, l.in, l.out, l.size, l.kernel, l.stride, l.groups,
                kernel, ms, 2 * macs / (ms * 1e-3) / 1e12);
    std::fflush(stdout);
}

// Requantizes an accumulator of `products` random products to about +-50.
int32_t shift_for(int64_t products) {
    return 30 + int32_t(std::lround(std::log2(std::sqrt(double(products)) * 5300 / 50)));
}

bool run_layer(const Layer& l, int batch, std::mt19937& rng) {
    std::uniform_int_distribution<int> byte(-128, 127);
    const int pad = l.kernel / 2, out = (l.size + 2 * pad - l.kernel) / l.stride + 1;
    const Window2d window{l.kernel, l.kernel, l.stride, l.stride, pad, pad, 1, 1};
    const int quads = (l.in + 3) / 4, out_quads = (l.out + 3) / 4;
    const size_t y_bytes = size_t(batch) * out_quads * out * out * 4;
    std::vector<int8_t> x(size_t(batch) * quads * l.size * l.size * 4);
    for (int8_t& v : x) v = int8_t(byte(rng));
    const int per_output = (l.in / l.groups) * l.kernel * l.kernel;
    std::vector<int8_t> w(size_t(l.out) * per_output);
    for (int8_t& v : w) v = int8_t(byte(rng));
    std::vector<int32_t> bias(size_t(l.out), 1000), multiplier(size_t(l.out), 1 << 30),
        shift(size_t(l.out), shift_for(per_output));
    int8_t* y = nullptr;
    check(cudaMalloc(&y, y_bytes), "cudaMalloc");
    const int repeats = batch == 1 ? 200 : 20;
    bool same = true;
    if (l.groups == 1) {
        // x is NCHW4 already (random bytes in every position, the padding bytes too).
        const std::vector<int32_t> x4(reinterpret_cast<const int32_t*>(x.data()),
                                      reinterpret_cast<const int32_t*>(x.data() + x.size()));
        Conv2dNchw4Params p{};
        p.x = upload(x4);
        p.w = upload(qtk::cuda::pack_nchw4_weights(w.data(), l.out, l.in, l.kernel, l.kernel));
        p.folded_bias = upload(qtk::cuda::fold_nchw4_bias(bias.data(), w.data(), l.out,
                                                          per_output, 3));
        p.multiplier = upload(multiplier);
        p.shift = upload(shift);
        p.y = y;
        p.padding_word = 0x03030303;
        p.y_zero_point = 0, p.lo = -128, p.hi = 127;
        p.batch = batch, p.c_quads = quads, p.height = l.size, p.width = l.size;
        p.out_channels = l.out, p.out_h = out, p.out_w = out;
        p.window = window;
        std::vector<int8_t> by_dp4a(y_bytes), by_mma(y_bytes);
        print(l, batch, "conv2d_int8_dp4a",
              time_launches([&] { return qtk::cuda::launch_conv2d_dp4a(p, nullptr); }, repeats));
        check(cudaMemcpy(by_dp4a.data(), y, y_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        print(l, batch, "conv2d_int8_mma",
              time_launches([&] { return qtk::cuda::launch_conv2d_mma(p, nullptr); }, repeats));
        check(cudaMemcpy(by_mma.data(), y, y_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        same = by_dp4a == by_mma;
        for (const void* buffer : {static_cast<const void*>(p.x), static_cast<const void*>(p.w),
                                   static_cast<const void*>(p.folded_bias),
                                   static_cast<const void*>(p.multiplier),
                                   static_cast<const void*>(p.shift)}) {
            cudaFree(const_cast<void*>(buffer));
        }
    } else {
        DepthwiseNchw4Params p{};
        p.x = upload(x);
        p.w = upload(w);
        p.bias = upload(bias);
        p.multiplier = upload(multiplier);
        p.shift = upload(shift);
        p.y = y;
        p.x_zero_point = 3, p.y_zero_point = 0, p.lo = -128, p.hi = 127;
        p.batch = batch, p.channels = l.in, p.height = l.size, p.width = l.size;
        p.out_h = out, p.out_w = out;
        p.window = window;
        print(l, batch, "conv2d_int8_depthwise",
              time_launches([&] { return qtk::cuda::launch_depthwise(p, nullptr); }, repeats));
        for (const void* buffer : {static_cast<const void*>(p.x), static_cast<const void*>(p.w),
                                   static_cast<const void*>(p.bias),
                                   static_cast<const void*>(p.multiplier),
                                   static_cast<const void*>(p.shift)}) {
            cudaFree(const_cast<void*>(buffer));
        }
    }
    cudaFree(y);
    if (!same) {
        std::fprintf(stderr, "%s %s, batch %d: dp4a and mma differ\n", l.model, l.name, batch);
    }
    return same;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int> batches;
    for (int i = 1; i < argc; ++i) batches.push_back(std::atoi(argv[i]));
    if (batches.empty()) batches = {1, 32};
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
    std::printf("{\"gpu\": \"%s\", \"compute_capability\": \"%d.%d\", \"multiprocessors\": %d}\n",
                properties.name, properties.major, properties.minor,
                properties.multiProcessorCount);
    std::mt19937 rng(7);
    bool same = true;
    for (int batch : batches) {
        for (const Layer& l : kLayers) {
            same = run_layer(l, batch, rng) && same;
        }
    }
    return same ? 0 : 1;
}
