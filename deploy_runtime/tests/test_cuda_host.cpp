// The CUDA kernels' indexing and arithmetic on the CPU (kernels/cuda/, docs/cuda.md): each kernel's
// phases run for every thread of every block, in the order __syncthreads gives them on the GPU
// (an mma for a whole warp at once), and their bytes are held against the CPU reference conv's
// over a sweep of shapes around the tile edges (channels either side of the 4-channel quads and of
// the tiles, pixels either side of the 64-pixel tile, every stride, padding and dilation, batch 1
// and 3). No GPU is needed, so CI runs it wherever the runtime builds.
//
// Built with QTK_TEST_ON_GPU (the ctest test_cuda_device, where QTK_CUDA is on), the same sweep
// also launches each kernel on the GPU and holds its bytes against the reference too; without a
// CUDA device it exits 77, which ctest reports as skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../kernels/cuda/add_int8.h"
#include "../kernels/cuda/concat_int8.h"
#include "../kernels/cuda/conv2d_int8_depthwise.h"
#include "../kernels/cuda/conv2d_int8_dp4a.h"
#include "../kernels/cuda/conv2d_int8_mma.h"
#include "../kernels/cuda/gather_channels_int8.h"
#include "../kernels/cuda/layout_int8.h"
#include "../kernels/cuda/lut_int8.h"
#include "../kernels/cuda/mul_int8.h"
#include "../kernels/cuda/pool2d_int8.h"
#include "check.h"
#include "conv_geometry.h"
#include "model_builder.h"
#include "qtk/runtime.h"

#if QTK_TEST_ON_GPU
#include <cuda_runtime_api.h>
#endif

namespace {

using qtk::cuda::AddParams;
using qtk::cuda::ConcatParams;
using qtk::cuda::GatherChannelsParams;
using qtk::cuda::LutParams;
using qtk::cuda::MulParams;
using qtk::cuda::Conv2dNchw4Params;
using qtk::cuda::DepthwiseNchw4Params;
using qtk::cuda::Pool2dNchw4Params;
using qtk_test::AttrSpec;
using qtk_test::ConvGeometry;
using qtk_test::ModelBuilder;
using qtk_test::Rng;

struct Case {
    ConvGeometry g;
    int64_t batch = 1;
    bool extreme = false;  // weights +-127, input -128 or 127, the largest bias the check allows
};

// NCHW int8 -> NCHW4 bytes by the device's layout kernel (its host twin), then the bytes past the
// channels set to 0x5a: the kernels must read them against nothing.
std::vector<int8_t> nchw4_bytes(const std::vector<int8_t>& x, int64_t n, int64_t c, int64_t h,
                                int64_t w) {
    qtk::cuda::LayoutParams p{x.data(), nullptr, int32_t(n), int32_t(c), int32_t(h * w)};
    std::vector<int8_t> bytes(size_t(p.nchw4_bytes()));
    p.y = bytes.data();
    qtk::cuda::run_to_nchw4_on_host(p);
    for (size_t e = 0; e < bytes.size(); ++e) {
        if (qtk::cuda::nchw4_position(int64_t(e), int32_t((c + 3) / 4), int32_t(h * w)).c >= c) {
            bytes[e] = 0x5a;
        }
    }
    return bytes;
}

// NCHW4 bytes -> NCHW int8 [n][c][h][w] by the device's layout kernel (its host twin).
std::vector<int8_t> nchw_bytes(const std::vector<int8_t>& y4, const std::vector<int64_t>& nchw) {
    qtk::cuda::LayoutParams p{y4.data(), nullptr, int32_t(nchw[0]), int32_t(nchw[1]),
                              int32_t(nchw[2] * nchw[3])};
    std::vector<int8_t> out(size_t(p.nchw_bytes()));
    p.y = out.data();
    qtk::cuda::run_from_nchw4_on_host(p);
    return out;
}

// The runtime's output of a one-node model on `inputs`, by its reference conv and its portable
// kernels of the other ops (QTK_ISA=scalar), chosen as the model loads.
std::vector<int8_t> run_reference(const ModelBuilder& b, const std::vector<const int8_t*>& inputs,
                                  const std::vector<std::vector<int64_t>>& shapes) {
    const std::vector<uint8_t> bytes = b.build();
    qtk_test::set_env("QTK_ISA", "scalar");
    qtk_test::set_env("QTK_CONV_ALGO", "conv2d_int8_reference");
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    qtk_test::set_env("QTK_ISA", nullptr);
    qtk_test::set_env("QTK_CONV_ALGO", nullptr);
    qtk::Session session(model, {1});
    std::vector<const void*> pointers(inputs.begin(), inputs.end());
    std::vector<qtk::Shape> input_shapes(shapes.begin(), shapes.end());
    return session.run(pointers, input_shapes)[0].data;
}

// One conv2d node with random data, and the reference conv's output on it (NCHW).
struct Reference {
    std::vector<int8_t> weights, x, want;
    std::vector<int32_t> bias, multipliers, shifts;
    int32_t zx, zy, lo;
};

int g_cases = 0;

Reference reference(const Case& c) {
    const ConvGeometry& g = c.g;
    ++g_cases;
    Rng rng(7000 + uint64_t(g_cases));
    Reference r;
    const int64_t k_count = g.k_count();
    r.weights = qtk_test::random_weights(rng, size_t(g.out * k_count));
    r.bias = qtk_test::random_bias(rng, size_t(g.out));
    double typical = std::sqrt(double(k_count)) * 75 * 73;
    r.zx = static_cast<int32_t>(rng.uniform(-128, 127));
    r.zy = static_cast<int32_t>(rng.uniform(-128, 127));
    r.x = rng.int8s(size_t(c.batch * g.in * g.height * g.width));
    if (c.extreme) {
        const int64_t largest_bias = (int64_t{1} << 31) - 1 - k_count * 255 * 127;
        for (int8_t& w : r.weights) {
            w = static_cast<int8_t>(rng.uniform(0, 1) == 0 ? -127 : 127);
        }
        for (int32_t& b : r.bias) {
            b = static_cast<int32_t>(rng.uniform(0, 1) == 0 ? -largest_bias : largest_bias);
        }
        std::fill(r.x.begin(), r.x.end(),
                  static_cast<int8_t>(rng.uniform(0, 1) == 0 ? -128 : 127));
        typical = double(int64_t{1} << 31);
    }
    r.lo = rng.uniform(0, 2) == 0 ? r.zy : -128;  // a third of the cases with a ReLU

    ModelBuilder b;
    const uint32_t xv = b.activation("x", {1, g.in, g.height, g.width}, 0.05f, r.zx);
    const uint32_t wv =
        b.weight("conv.weight", {g.out, g.in / g.groups, g.kh, g.kw}, r.weights);
    const uint32_t bv = b.bias("conv.bias", {g.out}, r.bias);
    const uint32_t yv = b.activation("y", {1, g.out, g.out_h(), g.out_w()}, 0.1f, r.zy);
    std::vector<AttrSpec> attrs =
        qtk_test::requant_attrs(size_t(g.out), 1.0, 90.0 / typical, 1.0, r.lo, 127);
    r.multipliers.assign(attrs[0].ints.begin(), attrs[0].ints.end());
    r.shifts.assign(attrs[1].ints.begin(), attrs[1].ints.end());
    attrs.insert(attrs.begin(),
                 {AttrSpec("stride", {g.sh, g.sw}), AttrSpec("padding", {g.ph, g.pw}),
                  AttrSpec("dilation", {g.dh, g.dw}), AttrSpec("groups", {g.groups})});
    b.node("conv2d", "conv", {xv, wv, bv}, {yv}, attrs);
    b.inputs = {xv};
    b.outputs = {yv};
    r.want = run_reference(b, {r.x.data()}, {{c.batch, g.in, g.height, g.width}});
    return r;
}

#if QTK_TEST_ON_GPU
int g_compute_capability = 0;  // major * 10 + minor of device 0

// Device copies of host buffers, freed with it; a CUDA error fails the test, naming the call.
class DeviceBuffers {
 public:
    ~DeviceBuffers() {
        for (void* buffer : buffers_) {
            cudaFree(buffer);
        }
    }
    template <typename T>
    T* upload(const T* host, size_t count) {
        void* device = nullptr;
        if (!check(cudaMalloc(&device, count * sizeof(T)), "cudaMalloc")) {
            return nullptr;
        }
        buffers_.push_back(device);
        check(cudaMemcpy(device, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
        return static_cast<T*>(device);
    }
    // Waits for a kernel whose launch returned `error` and copies `count` bytes of its output back.
    void launch_and_download(int error, int8_t* host, const int8_t* device, size_t count) {
        if (check(static_cast<cudaError_t>(error), "the kernel's launch") &&
            check(cudaDeviceSynchronize(), "the kernel")) {
            check(cudaMemcpy(host, device, count, cudaMemcpyDeviceToHost), "cudaMemcpy");
        }
    }

 private:
    static bool check(cudaError_t error, const char* what) {
        if (error != cudaSuccess) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     std::string(what) + ": " + cudaGetErrorString(error));
        }
        return error == cudaSuccess;
    }
    std::vector<void*> buffers_;
};

template <int (*kLaunch)(const Conv2dNchw4Params&, void*)>
void conv2d_on_gpu(const Conv2dNchw4Params& p) {
    DeviceBuffers buffers;
    const size_t channels = size_t(p.out_channels);
    const size_t y_bytes = size_t(p.pixels()) * size_t((p.out_channels + 3) / 4) * 4;
    Conv2dNchw4Params d = p;
    d.x = buffers.upload(p.x, size_t(p.batch) * size_t(p.c_quads) * size_t(p.height) *
                                  size_t(p.width));
    d.w = buffers.upload(p.w, size_t(p.quads()) * channels);
    d.folded_bias = buffers.upload(p.folded_bias, channels);
    d.multiplier = buffers.upload(p.multiplier, channels);
    d.shift = buffers.upload(p.shift, channels);
    d.y = buffers.upload(p.y, y_bytes);
    if (d.x && d.w && d.folded_bias && d.multiplier && d.shift && d.y) {
        buffers.launch_and_download(kLaunch(d, nullptr), p.y, d.y, y_bytes);
    }
}

void depthwise_on_gpu(const DepthwiseNchw4Params& p) {
    DeviceBuffers buffers;
    const size_t channels = size_t(p.channels), quads = size_t((p.channels + 3) / 4);
    DepthwiseNchw4Params d = p;
    d.x = buffers.upload(p.x, size_t(p.batch) * quads * size_t(p.height) * size_t(p.width) * 4);
    d.w = buffers.upload(p.w, channels * size_t(p.window.kernel_h) * size_t(p.window.kernel_w));
    d.bias = buffers.upload(p.bias, channels);
    d.multiplier = buffers.upload(p.multiplier, channels);
    d.shift = buffers.upload(p.shift, channels);
    d.y = buffers.upload(p.y, size_t(p.output_bytes()));
    if (d.x && d.w && d.bias && d.multiplier && d.shift && d.y) {
        buffers.launch_and_download(qtk::cuda::launch_depthwise(d, nullptr), p.y, d.y,
                                    size_t(p.output_bytes()));
    }
}

void pool2d_on_gpu(const Pool2dNchw4Params& p) {
    DeviceBuffers buffers;
    const size_t quads = size_t((p.channels + 3) / 4);
    Pool2dNchw4Params d = p;
    d.x = buffers.upload(p.x, size_t(p.batch) * quads * size_t(p.height) * size_t(p.width) * 4);
    d.y = buffers.upload(p.y, size_t(p.output_bytes()));
    if (d.x && d.y) {
        buffers.launch_and_download(qtk::cuda::launch_pool2d(d, nullptr), p.y, d.y,
                                    size_t(p.output_bytes()));
    }
}

void add_on_gpu(const AddParams& p) {
    DeviceBuffers buffers;
    AddParams d = p;
    d.a = buffers.upload(p.a, size_t(p.count));
    d.b = buffers.upload(p.b, size_t(p.count));
    d.y = buffers.upload(p.y, size_t(p.count));
    if (d.a && d.b && d.y) {
        buffers.launch_and_download(qtk::cuda::launch_add(d, nullptr), p.y, d.y, size_t(p.count));
    }
}

void concat_on_gpu(const ConcatParams& p) {
    DeviceBuffers buffers;
    ConcatParams d = p;
    bool uploaded = true;
    for (int32_t i = 0; i < p.input_count; ++i) {
        d.inputs[i].x = buffers.upload(p.inputs[i].x, size_t(p.batch) *
                                                          size_t((p.inputs[i].channels + 3) / 4) *
                                                          size_t(p.plane) * 4);
        uploaded = uploaded && d.inputs[i].x != nullptr;
    }
    d.y = buffers.upload(p.y, size_t(p.output_bytes()));
    if (uploaded && d.y) {
        buffers.launch_and_download(qtk::cuda::launch_concat(d, nullptr), p.y, d.y,
                                    size_t(p.output_bytes()));
    }
}

void gather_channels_on_gpu(const GatherChannelsParams& p) {
    DeviceBuffers buffers;
    GatherChannelsParams d = p;
    d.x = buffers.upload(p.x, size_t(p.batch) * size_t((p.x_channels + 3) / 4) * size_t(p.plane) *
                                  4);
    d.channel_of = buffers.upload(p.channel_of, size_t(p.y_channels));
    d.y = buffers.upload(p.y, size_t(p.output_bytes()));
    if (d.x && d.channel_of && d.y) {
        buffers.launch_and_download(qtk::cuda::launch_gather_channels(d, nullptr), p.y, d.y,
                                    size_t(p.output_bytes()));
    }
}

void lut_on_gpu(const LutParams& p) {
    DeviceBuffers buffers;
    LutParams d = p;
    d.x = buffers.upload(p.x, size_t(p.count));
    d.tables = buffers.upload(p.tables, size_t(p.tables_count) * 256);
    d.y = buffers.upload(p.y, size_t(p.count));
    if (d.x && d.tables && d.y) {
        buffers.launch_and_download(qtk::cuda::launch_lut(d, nullptr), p.y, d.y, size_t(p.count));
    }
}

void mul_on_gpu(const MulParams& p) {
    DeviceBuffers buffers;
    MulParams d = p;
    const size_t per_channel = size_t(p.count / p.plane);
    d.a = buffers.upload(p.a, p.a_per_channel ? per_channel : size_t(p.count));
    d.b = buffers.upload(p.b, p.b_per_channel ? per_channel : size_t(p.count));
    d.y = buffers.upload(p.y, size_t(p.count));
    if (d.a && d.b && d.y) {
        buffers.launch_and_download(qtk::cuda::launch_mul(d, nullptr), p.y, d.y, size_t(p.count));
    }
}
#endif

// A kernel on the CPU or the GPU, with the compute capability its GPU run needs.
template <typename Params>
struct Kernel {
    const char* name;
    void (*run)(const Params&);
    int min_compute_capability;
};

template <typename Params>
bool runs_here(const Kernel<Params>& kernel) {
#if QTK_TEST_ON_GPU
    return g_compute_capability >= kernel.min_compute_capability;
#else
    return kernel.min_compute_capability == 0;
#endif
}

// Each kernel of `kernels` run on p (its output at p.y, `bytes` long, NCHW4 of [n, c, h, w]
// unless `flat`) against `want` (NCHW).
template <typename Params>
void check_outputs(const std::vector<Kernel<Params>>& kernels, Params p, size_t bytes,
                   const std::vector<int64_t>& nchw, bool flat, const std::vector<int8_t>& want,
                   const std::string& what) {
    for (const Kernel<Params>& kernel : kernels) {
        if (!runs_here(kernel)) {
            continue;
        }
        std::vector<int8_t> y(bytes, 0x33);
        p.y = y.data();
        kernel.run(p);
        const std::vector<int8_t> got =
            flat ? y : nchw_bytes(y, nchw);
        if (got != want) {
            qtk_test::report_failure(__FILE__, __LINE__,
                                     std::string(kernel.name) + " differs from the reference on " +
                                         what);
        }
    }
}


// The convolution kernels' outputs on case c against the reference's.
template <typename Params>
void check_kernels(const std::vector<Kernel<Params>>& kernels, const Params& p, const Case& c,
                   const Reference& r) {
    const ConvGeometry& g = c.g;
    check_outputs(kernels, p, size_t(c.batch * ((g.out + 3) / 4) * g.out_h() * g.out_w() * 4),
                  {c.batch, g.out, g.out_h(), g.out_w()}, false, r.want,
                  g.describe() + ", batch " + std::to_string(c.batch) +
                      (c.extreme ? ", extreme" : ""));
}

const std::vector<Kernel<Conv2dNchw4Params>> kConv2dKernels = {
    {"conv2d_int8_dp4a (on the CPU)", qtk::cuda::run_conv2d_dp4a_on_host, 0},
    {"conv2d_int8_mma (on the CPU)", qtk::cuda::run_conv2d_mma_on_host, 0},
#if QTK_TEST_ON_GPU
    {"conv2d_int8_dp4a (on the GPU)", conv2d_on_gpu<qtk::cuda::launch_conv2d_dp4a>, 61},
    {"conv2d_int8_mma (on the GPU)", conv2d_on_gpu<qtk::cuda::launch_conv2d_mma>, 80},
#endif
};

const std::vector<Kernel<DepthwiseNchw4Params>> kDepthwiseKernels = {
    {"conv2d_int8_depthwise (on the CPU)", qtk::cuda::run_depthwise_on_host, 0},
#if QTK_TEST_ON_GPU
    {"conv2d_int8_depthwise (on the GPU)", depthwise_on_gpu, 1},
#endif
};

qtk::cuda::Window2d window_of(const ConvGeometry& g) {
    return {int32_t(g.kh), int32_t(g.kw), int32_t(g.sh), int32_t(g.sw),
            int32_t(g.ph), int32_t(g.pw), int32_t(g.dh), int32_t(g.dw)};
}

// The implicit-GEMM convolutions (groups 1) on one case.
void check_conv2d(const Case& c) {
    const ConvGeometry& g = c.g;
    if (!g.window_fits()) {
        return;
    }
    const Reference r = reference(c);
    const std::vector<int8_t> x4_bytes = nchw4_bytes(r.x, c.batch, g.in, g.height, g.width);
    std::vector<int32_t> x4(x4_bytes.size() / 4);  // little-endian words, as pack_quad packs
    std::memcpy(x4.data(), x4_bytes.data(), x4_bytes.size());
    const std::vector<int32_t> w4 =
        qtk::cuda::pack_nchw4_weights(r.weights.data(), g.out, g.in, g.kh, g.kw);
    const std::vector<int32_t> folded =
        qtk::cuda::fold_nchw4_bias(r.bias.data(), r.weights.data(), g.out, g.k_count(), r.zx);
    const int8_t zx = static_cast<int8_t>(r.zx);
    const int8_t padding_bytes[4] = {zx, zx, zx, zx};
    Conv2dNchw4Params p{};
    p.x = x4.data();
    p.w = w4.data();
    p.folded_bias = folded.data();
    p.multiplier = r.multipliers.data();
    p.shift = r.shifts.data();
    p.padding_word = qtk::cuda::pack_quad(padding_bytes);
    p.y_zero_point = r.zy;
    p.lo = r.lo;
    p.hi = 127;
    p.batch = int32_t(c.batch);
    p.c_quads = int32_t((g.in + 3) / 4);
    p.height = int32_t(g.height);
    p.width = int32_t(g.width);
    p.out_channels = int32_t(g.out);
    p.out_h = int32_t(g.out_h());
    p.out_w = int32_t(g.out_w());
    p.window = window_of(g);
    check_kernels(kConv2dKernels, p, c, r);
}

// The depthwise convolution (groups = in = out channels) on one case.
void check_depthwise(Case c) {
    ConvGeometry& g = c.g;
    g.out = g.groups = g.in;
    if (!g.window_fits()) {
        return;
    }
    const Reference r = reference(c);
    const std::vector<int8_t> x4 = nchw4_bytes(r.x, c.batch, g.in, g.height, g.width);
    DepthwiseNchw4Params p{};
    p.x = x4.data();
    p.w = r.weights.data();
    p.bias = r.bias.data();
    p.multiplier = r.multipliers.data();
    p.shift = r.shifts.data();
    p.x_zero_point = r.zx;
    p.y_zero_point = r.zy;
    p.lo = r.lo;
    p.hi = 127;
    p.batch = int32_t(c.batch);
    p.channels = int32_t(g.in);
    p.height = int32_t(g.height);
    p.width = int32_t(g.width);
    p.out_h = int32_t(g.out_h());
    p.out_w = int32_t(g.out_w());
    p.window = window_of(g);
    check_kernels(kDepthwiseKernels, p, c, r);
}

// Geometry: kernel x stride x padding x dilation x size, pixels either side of the 64-pixel tile
// (8x8 = 64, 9x7 = 63, 13x11 = 143), batch 1 and 3, for `check` with `channels` in and out.
void sweep_geometry(void (*check)(Case), int64_t in, int64_t out) {
    const int64_t kernels[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 3}, {7, 7}};
    const int64_t sizes[][2] = {{1, 1}, {8, 8}, {9, 7}, {13, 11}};
    for (const auto& k : kernels) {
        for (int64_t stride : {1, 2}) {
            for (int64_t pad : {0, 1, 3}) {
                for (int64_t dilation : {1, 2}) {
                    for (const auto& size : sizes) {
                        Case c;
                        c.g.in = in;
                        c.g.out = out;
                        c.g.kh = k[0];
                        c.g.kw = k[1];
                        c.g.sh = c.g.sw = stride;
                        c.g.ph = c.g.pw = pad;
                        c.g.dh = c.g.dw = dilation;
                        c.g.height = size[0];
                        c.g.width = size[1];
                        c.batch = 1 + 2 * (g_cases % 2);
                        check(c);
                    }
                }
            }
        }
    }
}

// Windows whose two axes differ in every attribute, for `check` with `in` and `out` channels.
void sweep_asymmetric(void (*check)(Case), int64_t in, int64_t out) {
    const int64_t windows[][8] = {{3, 5, 1, 2, 1, 2, 2, 1}, {5, 3, 2, 1, 2, 0, 1, 2},
                                  {1, 3, 2, 1, 0, 1, 1, 3}};  // kh kw sh sw ph pw dh dw
    for (const auto& v : windows) {
        Case c;
        c.g = ConvGeometry{in, out, 13, 11, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], 1};
        c.batch = 3;
        check(c);
    }
}

void test_conv2d_against_reference() {
    const int before = g_cases;
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
    sweep_geometry([](Case c) { check_conv2d(c); }, 6, 9);
    sweep_asymmetric([](Case c) { check_conv2d(c); }, 6, 9);
    // The accumulator at its bounds: wrapping int32 sums still give the reference's bytes.
    for (int64_t in : {3, 64}) {
        Case c;
        c.g.in = in;
        c.g.out = 33;
        c.g.height = c.g.width = 9;
        c.extreme = true;
        check_conv2d(c);
    }
    std::printf("conv2d_int8_dp4a, conv2d_int8_mma: %d cases\n", g_cases - before);
}

void test_depthwise_against_reference() {
    const int before = g_cases;
    for (int64_t channels : {1, 3, 4, 5, 8, 17, 32, 33}) {
        Case c;
        c.g.in = channels;
        check_depthwise(c);
    }
    sweep_geometry(check_depthwise, 7, 7);
    sweep_asymmetric(check_depthwise, 7, 7);
    Case c;
    c.g.in = 5;
    c.g.height = c.g.width = 9;
    c.extreme = true;
    check_depthwise(c);
    std::printf("conv2d_int8_depthwise: %d cases\n", g_cases - before);
}

const std::vector<Kernel<Pool2dNchw4Params>> kPool2dKernels = {
    {"pool2d_int8 (on the CPU)", qtk::cuda::run_pool2d_on_host, 0},
#if QTK_TEST_ON_GPU
    {"pool2d_int8 (on the GPU)", pool2d_on_gpu, 1},
#endif
};
const std::vector<Kernel<AddParams>> kAddKernels = {
    {"add_int8 (on the CPU)", qtk::cuda::run_add_on_host, 0},
#if QTK_TEST_ON_GPU
    {"add_int8 (on the GPU)", add_on_gpu, 1},
#endif
};
const std::vector<Kernel<ConcatParams>> kConcatKernels = {
    {"concat_int8 (on the CPU)", qtk::cuda::run_concat_on_host, 0},
#if QTK_TEST_ON_GPU
    {"concat_int8 (on the GPU)", concat_on_gpu, 1},
#endif
};

const std::vector<Kernel<GatherChannelsParams>> kGatherChannelsKernels = {
    {"gather_channels_int8 (on the CPU)", qtk::cuda::run_gather_channels_on_host, 0},
#if QTK_TEST_ON_GPU
    {"gather_channels_int8 (on the GPU)", gather_channels_on_gpu, 1},
#endif
};
const std::vector<Kernel<LutParams>> kLutKernels = {
    {"lut_int8 (on the CPU)", qtk::cuda::run_lut_on_host, 0},
#if QTK_TEST_ON_GPU
    {"lut_int8 (on the GPU)", lut_on_gpu, 1},
#endif
};
const std::vector<Kernel<MulParams>> kMulKernels = {
    {"mul_int8 (on the CPU)", qtk::cuda::run_mul_on_host, 0},
#if QTK_TEST_ON_GPU
    {"mul_int8 (on the GPU)", mul_on_gpu, 1},
#endif
};

// PyTorch's pooling output size along one axis (spec 6), ceil_mode's included.
int64_t pool_output_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
    const int64_t span = in + 2 * p - d * (k - 1) - 1;
    if (span < 0) {
        return 0;
    }
    int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (out - 1) * s >= in + p) {
        --out;
    }
    return out;
}

struct PoolCase {
    bool average = false, ceil_mode = false, count_include_pad = false;
    int64_t channels = 5, height = 9, width = 7, kh = 3, kw = 3, stride = 2, pad = 1;
    int64_t dilation = 1, divisor_override = 0, batch = 1;
};

void check_pool2d(const PoolCase& c) {
    const int64_t oh = pool_output_size(c.height, c.kh, c.stride, c.pad, c.dilation, c.ceil_mode);
    const int64_t ow = pool_output_size(c.width, c.kw, c.stride, c.pad, c.dilation, c.ceil_mode);
    if (oh <= 0 || ow <= 0 || c.pad > ((std::min(c.kh, c.kw) - 1) * c.dilation + 1) / 2) {
        return;
    }
    ++g_cases;
    Rng rng(9000 + uint64_t(g_cases));
    const int32_t z = static_cast<int32_t>(rng.uniform(-128, 127));
    const std::vector<int8_t> x = rng.int8s(size_t(c.batch * c.channels * c.height * c.width));
    ModelBuilder b;
    const uint32_t xv = b.activation("x", {1, c.channels, c.height, c.width}, 0.1f, z);
    const uint32_t yv = b.activation("y", {1, c.channels, oh, ow}, 0.1f, z);
    std::vector<AttrSpec> attrs = {AttrSpec("kernel", {c.kh, c.kw}),
                                   AttrSpec("stride", {c.stride, c.stride}),
                                   AttrSpec("padding", {c.pad, c.pad}),
                                   AttrSpec("ceil_mode", {c.ceil_mode ? 1 : 0})};
    if (c.average) {
        attrs.push_back(AttrSpec("count_include_pad", {c.count_include_pad ? 1 : 0}));
        if (c.divisor_override != 0) {
            attrs.push_back(AttrSpec("divisor_override", {c.divisor_override}));
        }
    } else {
        attrs.push_back(AttrSpec("dilation", {c.dilation, c.dilation}));
    }
    b.node(c.average ? "avg_pool2d" : "max_pool2d", "pool", {xv}, {yv}, attrs);
    b.inputs = {xv};
    b.outputs = {yv};
    const std::vector<int8_t> want =
        run_reference(b, {x.data()}, {{c.batch, c.channels, c.height, c.width}});
    const std::vector<int8_t> x4 = nchw4_bytes(x, c.batch, c.channels, c.height, c.width);
    Pool2dNchw4Params p{};
    p.x = x4.data();
    p.batch = int32_t(c.batch);
    p.channels = int32_t(c.channels);
    p.height = int32_t(c.height);
    p.width = int32_t(c.width);
    p.out_h = int32_t(oh);
    p.out_w = int32_t(ow);
    const int32_t stride = int32_t(c.stride), pad = int32_t(c.pad), dilation = int32_t(c.dilation);
    p.window = {int32_t(c.kh), int32_t(c.kw), stride, stride, pad, pad, dilation, dilation};
    p.average = c.average;
    p.count_include_pad = c.count_include_pad;
    p.divisor_override = c.divisor_override;
    p.zero_point = z;
    check_outputs(kPool2dKernels, p, size_t(p.output_bytes()), {c.batch, c.channels, oh, ow},
                  false, want,
                  std::string(c.average ? "avg" : "max") + " pool k" + std::to_string(c.kh) +
                      "x" + std::to_string(c.kw) + " s" + std::to_string(c.stride) + " p" +
                      std::to_string(c.pad) + " d" + std::to_string(c.dilation) +
                      (c.ceil_mode ? " ceil" : "") + (c.count_include_pad ? " include_pad" : "") +
                      " divisor " + std::to_string(c.divisor_override));
}

void test_pool2d_against_reference() {
    const int before = g_cases;
    const int64_t kernels[][2] = {{2, 2}, {3, 3}, {3, 2}};
    for (bool average : {false, true}) {
        for (const auto& k : kernels) {
            for (int64_t stride : {1, 2}) {
                for (int64_t pad : {0, 1}) {
                    for (bool ceil_mode : {false, true}) {
                        for (int variant = 0; variant < 4; ++variant) {
                            PoolCase c;
                            c.average = average;
                            c.kh = k[0];
                            c.kw = k[1];
                            c.stride = stride;
                            c.pad = pad;
                            c.ceil_mode = ceil_mode;
                            c.dilation = average ? 1 : 1 + variant % 2;
                            c.count_include_pad = average && variant % 2 == 1;
                            c.divisor_override = average && variant >= 2 ? 5 : 0;
                            c.batch = 1 + 2 * (g_cases % 2);
                            check_pool2d(c);
                        }
                    }
                }
            }
        }
    }
    std::printf("pool2d_int8: %d cases\n", g_cases - before);
}

void test_add_against_reference() {
    const int before = g_cases;
    const std::vector<int64_t> shapes[] = {{1, 1, 1, 1}, {3, 5, 7, 9}, {1, 4, 8, 8}, {2, 3, 1, 33}};
    for (const std::vector<int64_t>& shape : shapes) {
        for (double b_scale : {0.07, 0.1, 0.31}) {
            ++g_cases;
            Rng rng(11000 + uint64_t(g_cases));
            const size_t count = size_t(shape[0] * shape[1] * shape[2] * shape[3]);
            const std::vector<int8_t> a = rng.int8s(count), bv = rng.int8s(count);
            const int32_t za = static_cast<int32_t>(rng.uniform(-128, 127));
            const int32_t zb = static_cast<int32_t>(rng.uniform(-128, 127));
            const int32_t zy = static_cast<int32_t>(rng.uniform(-128, 127));
            const int32_t lo = rng.uniform(0, 1) == 0 ? zy : -128;
            const auto m = qtk_test::rescale_multipliers({0.1, b_scale}, 0.13);
            ModelBuilder b;
            const std::vector<int64_t> one = {1, shape[1], shape[2], shape[3]};
            const uint32_t av_ = b.activation("a", one, 0.1f, za);
            const uint32_t bv_ = b.activation("b", one, float(b_scale), zb);
            const uint32_t yv = b.activation("y", one, 0.13f, zy);
            b.node("add", "add", {av_, bv_}, {yv},
                   {AttrSpec("multiplier", m.first), AttrSpec("shift", {m.second}),
                    AttrSpec("clamp", {lo, 127})});
            b.inputs = {av_, bv_};
            b.outputs = {yv};
            const std::vector<int8_t> want =
                run_reference(b, {a.data(), bv.data()}, {shape, shape});
            AddParams p{};
            p.a = a.data();
            p.b = bv.data();
            p.count = int64_t(count);
            p.a_zero_point = za;
            p.a_multiplier = int32_t(m.first[0]);
            p.b_zero_point = zb;
            p.b_multiplier = int32_t(m.first[1]);
            p.shift = m.second;
            p.zero_point = zy;
            p.lo = lo;
            p.hi = 127;
            check_outputs(kAddKernels, p, count, shape, true, want,
                          "add of " + std::to_string(count) + " bytes");
        }
    }
    std::printf("add_int8: %d cases\n", g_cases - before);
}

void test_concat_against_reference() {
    const int before = g_cases;
    const std::vector<int64_t> splits[] = {{1, 3}, {4, 4}, {5, 2, 3}, {3, 3, 3, 3}, {7}};
    for (const std::vector<int64_t>& channels : splits) {
        for (int64_t batch : {1, 3}) {
            ++g_cases;
            Rng rng(12000 + uint64_t(g_cases));
            const int64_t h = 3, w = 5;
            const int32_t zy = static_cast<int32_t>(rng.uniform(-128, 127));
            const float sy = 0.15f;
            ModelBuilder b;
            std::vector<uint32_t> values;
            std::vector<int64_t> multipliers, shifts;
            std::vector<std::vector<int8_t>> xs, x4s;
            std::vector<std::vector<int64_t>> shapes;
            std::vector<const int8_t*> inputs;
            ConcatParams p{};
            int64_t total = 0;
            for (size_t i = 0; i < channels.size(); ++i) {
                const bool same = i == 0;  // the first input has the output's parameters
                const float scale = same ? sy : 0.05f * float(i + 1);
                const int32_t z = same ? zy : static_cast<int32_t>(rng.uniform(-128, 127));
                values.push_back(b.activation("x" + std::to_string(i), {1, channels[i], h, w},
                                              scale, z));
                const qtk_test::Requant r = same ? qtk_test::Requant{1 << 30, 30}
                                                 : qtk_test::quantize_multiplier(scale / sy);
                multipliers.push_back(r.multiplier);
                shifts.push_back(r.shift);
                xs.push_back(rng.int8s(size_t(batch * channels[i] * h * w)));
                shapes.push_back({batch, channels[i], h, w});
                p.inputs[i] = {nullptr, int32_t(channels[i]), z, r.multiplier, r.shift};
                total += channels[i];
            }
            for (size_t i = 0; i < channels.size(); ++i) {
                inputs.push_back(xs[i].data());
                x4s.push_back(nchw4_bytes(xs[i], batch, channels[i], h, w));
                p.inputs[i].x = x4s[i].data();
            }
            const uint32_t yv = b.activation("y", {1, total, h, w}, sy, zy);
            b.node("concat", "cat", values, {yv},
                   {AttrSpec("axis", {1}), AttrSpec("multiplier", multipliers),
                    AttrSpec("shift", shifts)});
            b.inputs = values;
            b.outputs = {yv};
            const std::vector<int8_t> want = run_reference(b, inputs, shapes);
            p.input_count = int32_t(channels.size());
            p.batch = int32_t(batch);
            p.plane = int32_t(h * w);
            p.zero_point = zy;
            check_outputs(kConcatKernels, p, size_t(p.output_bytes()), {batch, total, h, w}, false,
                          want, "concat of " + std::to_string(channels.size()) + " inputs");
        }
    }
    std::printf("concat_int8: %d cases\n", g_cases - before);
}

// Splits along channels (parts that do and do not fill quads) and channel shuffles (the permute
// (0, 2, 1, 3, 4) of an [N, A, B, H, W] view, NCHW4 as [N, A B, H, W]) against the reference.
void test_gather_channels_against_reference() {
    const int before = g_cases;
    const std::vector<int64_t> splits[] = {{1, 3}, {4, 4}, {5, 2, 6}, {24, 24}, {7}};
    for (const std::vector<int64_t>& sizes : splits) {
        for (int64_t batch : {1, 3}) {
            ++g_cases;
            Rng rng(15000 + uint64_t(g_cases));
            const int64_t h = 3, w = 5;
            int64_t channels = 0;
            for (int64_t size : sizes) {
                channels += size;
            }
            const std::vector<int8_t> x = rng.int8s(size_t(batch * channels * h * w));
            const std::vector<int8_t> x4 = nchw4_bytes(x, batch, channels, h, w);
            ModelBuilder b;
            const uint32_t xv = b.activation("x", {1, channels, h, w}, 0.1f, 2);
            std::vector<uint32_t> outputs;
            for (size_t k = 0; k < sizes.size(); ++k) {
                outputs.push_back(
                    b.activation("y" + std::to_string(k), {1, sizes[k], h, w}, 0.1f, 2));
            }
            b.node("split", "split", {xv}, outputs,
                   {AttrSpec("axis", {1}), AttrSpec("sizes", sizes)});
            b.inputs = {xv};
            int64_t first = 0;
            for (size_t k = 0; k < sizes.size(); ++k) {
                b.outputs = {outputs[k]};
                const std::vector<int8_t> want =
                    run_reference(b, {x.data()}, {{batch, channels, h, w}});
                std::vector<int32_t> channel_of(static_cast<size_t>(sizes[k]));
                for (int64_t c = 0; c < sizes[k]; ++c) {
                    channel_of[size_t(c)] = int32_t(first + c);
                }
                GatherChannelsParams p{x4.data(), nullptr, channel_of.data(), int32_t(batch),
                                       int32_t(channels), int32_t(sizes[k]), int32_t(h * w)};
                check_outputs(kGatherChannelsKernels, p, size_t(p.output_bytes()),
                              {batch, sizes[k], h, w}, false, want,
                              "split part " + std::to_string(k) + " of " +
                                  std::to_string(sizes.size()));
                first += sizes[k];
            }
        }
    }
    const int64_t shuffles[][2] = {{2, 12}, {2, 3}, {3, 5}, {4, 1}};
    for (const auto& ab : shuffles) {
        ++g_cases;
        Rng rng(15500 + uint64_t(g_cases));
        const int64_t a = ab[0], bb = ab[1], batch = 2, h = 2, w = 3;
        const std::vector<int8_t> x = rng.int8s(size_t(batch * a * bb * h * w));
        ModelBuilder b;
        const uint32_t xv = b.activation("x", {1, a, bb, h, w}, 0.1f, 2);
        const uint32_t yv = b.activation("y", {1, bb, a, h, w}, 0.1f, 2);
        b.node("permute", "shuffle", {xv}, {yv}, {AttrSpec("perm", {0, 2, 1, 3, 4})});
        b.inputs = {xv};
        b.outputs = {yv};
        const std::vector<int8_t> want = run_reference(b, {x.data()}, {{batch, a, bb, h, w}});
        std::vector<int32_t> channel_of(size_t(a * bb));
        for (int64_t j = 0; j < bb; ++j) {
            for (int64_t i = 0; i < a; ++i) {
                channel_of[size_t(j * a + i)] = int32_t(i * bb + j);
            }
        }
        const std::vector<int8_t> x4 = nchw4_bytes(x, batch, a * bb, h, w);
        GatherChannelsParams p{x4.data(), nullptr, channel_of.data(), int32_t(batch),
                               int32_t(a * bb), int32_t(a * bb), int32_t(h * w)};
        check_outputs(kGatherChannelsKernels, p, size_t(p.output_bytes()), {batch, a * bb, h, w},
                      false, want,
                      "channel shuffle of " + std::to_string(a) + " x " + std::to_string(bb));
    }
    std::printf("gather_channels_int8: %d cases\n", g_cases - before);
}

// One table, or one per channel, over NCHW4 inputs whose channels do and do not fill whole quads.
void test_lut_against_reference() {
    const int before = g_cases;
    const std::vector<int64_t> shapes[] = {{1, 1, 1, 1}, {2, 5, 3, 7}, {1, 8, 4, 4}, {3, 6, 1, 1}};
    for (const std::vector<int64_t>& shape : shapes) {
        for (bool per_channel : {false, true}) {
            ++g_cases;
            Rng rng(13000 + uint64_t(g_cases));
            const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
            const int64_t tables = per_channel ? c : 1;
            const std::vector<int8_t> x = rng.int8s(size_t(n * c * h * w));
            const std::vector<int8_t> entries = rng.int8s(size_t(tables * 256));
            ModelBuilder b;
            const uint32_t xv = b.activation("x", {1, c, h, w}, 0.1f, 3);
            const uint32_t table = b.weight("table", per_channel ? std::vector<int64_t>{c, 256}
                                                                 : std::vector<int64_t>{256},
                                            entries);
            const uint32_t yv = b.activation("y", {1, c, h, w}, 0.05f, -7);
            b.node("lut", "lut", {xv, table}, {yv});
            b.inputs = {xv};
            b.outputs = {yv};
            const std::vector<int8_t> want = run_reference(b, {x.data()}, {shape});
            const std::vector<int8_t> x4 = nchw4_bytes(x, n, c, h, w);
            LutParams p{};
            p.x = x4.data();
            p.tables = entries.data();
            p.count = int64_t(x4.size());
            p.tables_count = int32_t(tables);
            p.channel_quads = int32_t((c + 3) / 4);
            p.plane = int32_t(h * w);
            check_outputs(kLutKernels, p, x4.size(), shape, false, want,
                          std::string(per_channel ? "per-channel " : "") + "lut of " +
                              std::to_string(x.size()) + " bytes");
        }
    }
    std::printf("lut_int8: %d cases\n", g_cases - before);
}

// Same shapes, and a [N, C, 1, 1] operand on either side (a squeeze-excite scale).
void test_mul_against_reference() {
    const int before = g_cases;
    const std::vector<int64_t> shapes[] = {{1, 1, 1, 1}, {2, 5, 3, 7}, {1, 8, 4, 4}, {3, 6, 2, 1}};
    for (const std::vector<int64_t>& shape : shapes) {
        for (int broadcast = 0; broadcast < 3; ++broadcast) {  // none, a, b
            ++g_cases;
            Rng rng(14000 + uint64_t(g_cases));
            const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
            const std::vector<int64_t> scale_shape = {n, c, 1, 1};
            const std::vector<int64_t>& a_shape = broadcast == 1 ? scale_shape : shape;
            const std::vector<int64_t>& b_shape = broadcast == 2 ? scale_shape : shape;
            const auto elements = [](const std::vector<int64_t>& s) {
                return size_t(s[0] * s[1] * s[2] * s[3]);
            };
            const std::vector<int8_t> a = rng.int8s(elements(a_shape));
            const std::vector<int8_t> bv = rng.int8s(elements(b_shape));
            const int32_t za = static_cast<int32_t>(rng.uniform(-128, 127));
            const int32_t zb = static_cast<int32_t>(rng.uniform(-128, 127));
            const int32_t zy = static_cast<int32_t>(rng.uniform(-128, 127));
            const int32_t lo = rng.uniform(0, 1) == 0 ? zy : -128;
            const auto m = qtk_test::rescale_multipliers({0.1 * 0.02}, 0.13);
            ModelBuilder b;
            const auto one = [](std::vector<int64_t> s) {
                s[0] = 1;
                return s;
            };
            const uint32_t av_ = b.activation("a", one(a_shape), 0.1f, za);
            const uint32_t bv_ = b.activation("b", one(b_shape), 0.02f, zb);
            const uint32_t yv = b.activation("y", one(shape), 0.13f, zy);
            b.node("mul", "mul", {av_, bv_}, {yv},
                   {AttrSpec("multiplier", m.first), AttrSpec("shift", {m.second}),
                    AttrSpec("clamp", {lo, 127})});
            b.inputs = {av_, bv_};
            b.outputs = {yv};
            const std::vector<int8_t> want =
                run_reference(b, {a.data(), bv.data()}, {a_shape, b_shape});
            const std::vector<int8_t> a4 = nchw4_bytes(a, n, c, a_shape[2], a_shape[3]);
            const std::vector<int8_t> b4 = nchw4_bytes(bv, n, c, b_shape[2], b_shape[3]);
            MulParams p{};
            p.a = a4.data();
            p.b = b4.data();
            p.count = int64_t(n * ((c + 3) / 4) * h * w * 4);
            p.plane = int32_t(h * w);
            p.a_per_channel = broadcast == 1;
            p.b_per_channel = broadcast == 2;
            p.a_zero_point = za;
            p.b_zero_point = zb;
            p.multiplier = int32_t(m.first[0]);
            p.shift = m.second;
            p.zero_point = zy;
            p.lo = lo;
            p.hi = 127;
            check_outputs(kMulKernels, p, size_t(p.count), shape, false, want,
                          "mul of " + std::to_string(elements(shape)) + " bytes, broadcast " +
                              std::to_string(broadcast));
        }
    }
    std::printf("mul_int8: %d cases\n", g_cases - before);
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
    test_conv2d_against_reference();
    test_depthwise_against_reference();
    test_pool2d_against_reference();
    test_add_against_reference();
    test_concat_against_reference();
    test_gather_channels_against_reference();
    test_lut_against_reference();
    test_mul_against_reference();
    return qtk_test::check_report();
}
