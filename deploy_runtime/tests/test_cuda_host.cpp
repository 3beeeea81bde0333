// The CUDA kernels' indexing and arithmetic on the CPU (kernels/cuda/, docs/cuda.md): each kernel's
// tile functions run for every thread of every block, phase by phase as __syncthreads orders them
// on the GPU, and their bytes are held against the CPU reference conv's over a sweep of shapes
// around the tile edges (channels either side of the 4-channel quads and of the tiles, pixels
// either side of the 64-pixel tile, every stride, padding and dilation, batch 1 and 3). No GPU is
// needed, so CI runs it wherever the runtime builds.
//
// Built with QTK_TEST_ON_GPU (the ctest test_cuda_device, where QTK_CUDA is on), the same sweep
// also launches each kernel on the GPU and holds its bytes against the reference too; without a
// CUDA device it exits 77, which ctest reports as skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../kernels/cuda/conv2d_int8_dp4a.h"
#include "../kernels/cuda/conv2d_int8_mma.h"
#include "check.h"
#include "conv_geometry.h"
#include "model_builder.h"
#include "qtk/runtime.h"

#if QTK_TEST_ON_GPU
#include <cuda_runtime_api.h>
#endif

namespace {

using qtk_test::AttrSpec;
using qtk_test::ConvGeometry;
using qtk_test::ModelBuilder;
using qtk_test::Rng;

struct Case {
    ConvGeometry g;
    int64_t batch = 1;
    bool extreme = false;  // weights +-127, input -128 or 127, the largest bias the check allows
};

int g_cases = 0;

using Nchw4Params = qtk::cuda::Conv2dNchw4Params;

#if QTK_TEST_ON_GPU
// `launch` on the GPU with device copies of p's buffers; its output copied back to p.y. A CUDA
// error fails the test, naming the call.
void run_on_gpu(int (*launch)(const Nchw4Params&, void*), const Nchw4Params& p) {
    const size_t x_bytes = sizeof(int32_t) * size_t(p.batch) * size_t(p.c_quads) *
                           size_t(p.height) * size_t(p.width);
    const size_t w_bytes = sizeof(int32_t) * size_t(p.quads()) * size_t(p.out_channels);
    const size_t per_channel = sizeof(int32_t) * size_t(p.out_channels);
    const size_t y_bytes = size_t(p.pixels()) * size_t((p.out_channels + 3) / 4) * 4;
    std::vector<void*> buffers;
    const auto check = [](cudaError_t error, const char* what) {
        if (error != cudaSuccess) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     std::string(what) + ": " + cudaGetErrorString(error));
        }
        return error == cudaSuccess;
    };
    const auto upload = [&](const void* host, size_t bytes) -> void* {
        void* device = nullptr;
        if (check(cudaMalloc(&device, bytes), "cudaMalloc")) {
            buffers.push_back(device);
            check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy in");
        }
        return device;
    };
    Nchw4Params d = p;
    d.x = static_cast<const int32_t*>(upload(p.x, x_bytes));
    d.w = static_cast<const int32_t*>(upload(p.w, w_bytes));
    d.folded_bias = static_cast<const int32_t*>(upload(p.folded_bias, per_channel));
    d.multiplier = static_cast<const int32_t*>(upload(p.multiplier, per_channel));
    d.shift = static_cast<const int32_t*>(upload(p.shift, per_channel));
    d.y = static_cast<int8_t*>(upload(p.y, y_bytes));
    if (buffers.size() == 6 &&
        check(static_cast<cudaError_t>(launch(d, nullptr)), "the kernel's launch") &&
        check(cudaDeviceSynchronize(), "the kernel")) {
        check(cudaMemcpy(p.y, d.y, y_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy out");
    }
    for (void* buffer : buffers) {
        cudaFree(buffer);
    }
}

void run_dp4a_on_gpu(const Nchw4Params& p) { run_on_gpu(qtk::cuda::launch_conv2d_dp4a, p); }
void run_mma_on_gpu(const Nchw4Params& p) { run_on_gpu(qtk::cuda::launch_conv2d_mma, p); }

int g_compute_capability = 0;  // major * 10 + minor of device 0
#endif

struct Conv2dKernel {
    const char* name;
    void (*run)(const Nchw4Params&);
    int min_compute_capability;  // for the GPU runs
};

// The kernels on the CPU and, where built for it, on the GPU (the tensor-core one from sm_80).
std::vector<Conv2dKernel> conv2d_kernels() {
    std::vector<Conv2dKernel> kernels = {
        {"conv2d_int8_dp4a (on the CPU)", qtk::cuda::run_conv2d_dp4a_on_host, 0},
        {"conv2d_int8_mma (on the CPU)", qtk::cuda::run_conv2d_mma_on_host, 0}};
#if QTK_TEST_ON_GPU
    kernels.push_back({"conv2d_int8_dp4a (on the GPU)", run_dp4a_on_gpu, 61});
    kernels.push_back({"conv2d_int8_mma (on the GPU)", run_mma_on_gpu, 80});
#endif
    return kernels;
}

// Each CUDA conv2d kernel, run on the CPU, against the reference's bytes on one case.
void check_conv2d(const Case& c) {
    const ConvGeometry& g = c.g;
    if (!g.window_fits() || g.groups != 1) {  // the kernels compute groups 1
        return;
    }
    ++g_cases;
    Rng rng(7000 + uint64_t(g_cases));
    const int64_t k_count = g.k_count();
    std::vector<int8_t> weights = qtk_test::random_weights(rng, size_t(g.out * k_count));
    std::vector<int32_t> bias = qtk_test::random_bias(rng, size_t(g.out));
    double typical = std::sqrt(double(k_count)) * 75 * 73;
    const int32_t zx = static_cast<int32_t>(rng.uniform(-128, 127));
    const int32_t zy = static_cast<int32_t>(rng.uniform(-128, 127));
    const size_t x_count = size_t(c.batch * g.in * g.height * g.width);
    std::vector<int8_t> x = rng.int8s(x_count);
    if (c.extreme) {
        const int64_t largest_bias = (int64_t{1} << 31) - 1 - k_count * 255 * 127;
        for (int8_t& w : weights) {
            w = static_cast<int8_t>(rng.uniform(0, 1) == 0 ? -127 : 127);
        }
        for (int32_t& b : bias) {
            b = static_cast<int32_t>(rng.uniform(0, 1) == 0 ? -largest_bias : largest_bias);
        }
        std::fill(x.begin(), x.end(), static_cast<int8_t>(rng.uniform(0, 1) == 0 ? -128 : 127));
        typical = double(int64_t{1} << 31);
    }
    const bool relu = rng.uniform(0, 2) == 0;

    ModelBuilder b;
    const uint32_t xv = b.activation("x", {1, g.in, g.height, g.width}, 0.05f, zx);
    const uint32_t wv = b.weight("conv.weight", {g.out, g.in, g.kh, g.kw}, weights);
    const uint32_t bv = b.bias("conv.bias", {g.out}, bias);
    const uint32_t yv = b.activation("y", {1, g.out, g.out_h(), g.out_w()}, 0.1f, zy);
    std::vector<AttrSpec> attrs =
        qtk_test::requant_attrs(size_t(g.out), 1.0, 90.0 / typical, 1.0, relu ? zy : -128, 127);
    const std::vector<int64_t> multipliers = attrs[0].ints, shifts = attrs[1].ints;
    attrs.insert(attrs.begin(),
                 {AttrSpec("stride", {g.sh, g.sw}), AttrSpec("padding", {g.ph, g.pw}),
                  AttrSpec("dilation", {g.dh, g.dw}), AttrSpec("groups", {g.groups})});
    b.node("conv2d", "conv", {xv, wv, bv}, {yv}, attrs);
    b.inputs = {xv};
    b.outputs = {yv};
    const std::vector<uint8_t> bytes = b.build();
    qtk_test::set_env("QTK_CONV_ALGO", "conv2d_int8_reference");
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    qtk::Session session(model, {1});
    const std::vector<int8_t> want =
        session.run({x.data()}, {{c.batch, g.in, g.height, g.width}})[0].data;

    const std::vector<int32_t> x4 = qtk::cuda::to_nchw4(x.data(), c.batch, g.in, g.height,
                                                        g.width, int8_t{0x5a});
    const std::vector<int32_t> w4 =
        qtk::cuda::pack_nchw4_weights(weights.data(), g.out, g.in, g.kh, g.kw);
    const std::vector<int32_t> folded =
        qtk::cuda::fold_nchw4_bias(bias.data(), weights.data(), g.out, k_count, zx);
    const std::vector<int32_t> m(multipliers.begin(), multipliers.end()),
        s(shifts.begin(), shifts.end());
    const int8_t zx_byte = static_cast<int8_t>(zx);
    const int8_t padding_bytes[4] = {zx_byte, zx_byte, zx_byte, zx_byte};
    Nchw4Params p{};
    p.x = x4.data();
    p.w = w4.data();
    p.folded_bias = folded.data();
    p.multiplier = m.data();
    p.shift = s.data();
    p.padding_word = qtk::cuda::pack_quad(padding_bytes);
    p.y_zero_point = zy;
    p.lo = relu ? zy : -128;
    p.hi = 127;
    p.batch = int32_t(c.batch);
    p.c_quads = int32_t((g.in + 3) / 4);
    p.height = int32_t(g.height);
    p.width = int32_t(g.width);
    p.out_channels = int32_t(g.out);
    p.out_h = int32_t(g.out_h());
    p.out_w = int32_t(g.out_w());
    p.kernel_h = int32_t(g.kh);
    p.kernel_w = int32_t(g.kw);
    p.stride_h = int32_t(g.sh);
    p.stride_w = int32_t(g.sw);
    p.pad_h = int32_t(g.ph);
    p.pad_w = int32_t(g.pw);
    p.dilation_h = int32_t(g.dh);
    p.dilation_w = int32_t(g.dw);
    const int64_t out_quads = (g.out + 3) / 4;
    for (const Conv2dKernel& kernel : conv2d_kernels()) {
#if QTK_TEST_ON_GPU
        if (g_compute_capability < kernel.min_compute_capability) {
            continue;
        }
#endif
        std::vector<int8_t> y4(size_t(c.batch * out_quads * g.out_h() * g.out_w() * 4), 0x33);
        p.y = y4.data();
        kernel.run(p);
        if (qtk::cuda::from_nchw4(y4.data(), c.batch, g.out, g.out_h(), g.out_w()) != want) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     std::string(kernel.name) + " differs from the reference on " +
                                         g.describe() + ", batch " + std::to_string(c.batch) +
                                         (c.extreme ? ", extreme" : ""));
        }
    }
}

void test_against_reference() {
    // Channels either side of the quads (4), of an mma's K (32 bytes: 8 quads) and of the tiles
    // (16 output channels a warp, 32 a block).
    for (int64_t in : {1, 3, 4, 5, 8, 17, 31, 32, 33}) {
        for (int64_t out : {1, 4, 5, 15, 16, 17, 31, 32, 33, 65}) {
            Case c;
            c.g.in = in;
            c.g.out = out;
            check_conv2d(c);
        }
    }
    // Geometry: kernel x stride x padding x dilation x size, pixels either side of the 64-pixel
    // tile (8x8 = 64, 9x7 = 63, 13x11 = 143), batch 1 and 3.
    const int64_t kernels[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 3}, {7, 7}};
    const int64_t sizes[][2] = {{1, 1}, {8, 8}, {9, 7}, {13, 11}};
    for (const auto& k : kernels) {
        for (int64_t stride : {1, 2}) {
            for (int64_t pad : {0, 1, 3}) {
                for (int64_t dilation : {1, 2}) {
                    for (const auto& size : sizes) {
                        Case c;
                        c.g.in = 6;
                        c.g.out = 9;
                        c.g.kh = k[0];
                        c.g.kw = k[1];
                        c.g.sh = c.g.sw = stride;
                        c.g.ph = c.g.pw = pad;
                        c.g.dh = c.g.dw = dilation;
                        c.g.height = size[0];
                        c.g.width = size[1];
                        c.batch = 1 + 2 * (g_cases % 2);
                        check_conv2d(c);
                    }
                }
            }
        }
    }
    // The accumulator at its bounds: wrapping int32 sums still give the reference's bytes.
    for (int64_t in : {3, 64}) {
        Case c;
        c.g.in = in;
        c.g.out = 33;
        c.g.height = c.g.width = 9;
        c.extreme = true;
        check_conv2d(c);
    }
    std::printf("conv2d_int8_dp4a, conv2d_int8_mma: %d cases\n", g_cases);
}

}  // namespace

int main() {
#if QTK_TEST_ON_GPU
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("no CUDA device: the GPU runs are skipped\n");
        return 77;  // ctest's SKIP_RETURN_CODE
    }
    cudaDeviceProp properties{};
    cudaGetDeviceProperties(&properties, 0);
    g_compute_capability = properties.major * 10 + properties.minor;
    std::printf("GPU: %s, compute capability %d.%d\n", properties.name, properties.major,
                properties.minor);
#endif
    test_against_reference();
    return qtk_test::check_report();
}
