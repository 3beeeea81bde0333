#include "op_registry.h"

#include <cstdlib>
#include <iterator>
#include <string>

#include "../kernels/x86/int8_quantize.h"
#include "algo_policy.h"
#include "linear.h"
#include "qtk/arithmetic.h"

namespace qtk {
namespace detail {

using KernelFactory = std::unique_ptr<OpKernel> (*)(const NodeView& node);

// Kernel factories, defined in kernels/reference/<family>.cpp. The dtype in a name is that of the
// node's first input; factories without one serve both dtypes (pure data movement).
std::unique_ptr<OpKernel> make_linear_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_add_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_add_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_mul_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_mul_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_clamp_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_clamp_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_lut_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_hardswish_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_hardsigmoid_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_sigmoid_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_concat_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_concat_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_max_pool2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_max_pool2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_avg_pool2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_avg_pool2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_global_avg_pool2d_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_global_avg_pool2d_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_resize_bilinear_int8_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_quantize_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_dequantize_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_flatten_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_reshape_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_permute_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_split_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_pad_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_resize_nearest_reference(const NodeView& node);

// int8 conv2d algorithms, defined beside their kernels: kernels/reference/conv2d.cpp and
// kernels/x86/conv2d_int8_{depthwise,depthwise_channels,gemm,gemm_nhwc,direct,winograd}.cpp
// (built where the compiler targets x86-64 and takes the ISA's flags; CMakeLists.txt defines
// QTK_X86_<ISA> for each).
extern const Conv2dAlgo kConv2dInt8Reference;
extern const Conv2dAlgo kConv2dInt8Gemm32x32c4Amx;
extern const Conv2dAlgo kConv2dInt8Direct32x32c4Amx;
extern const Conv2dAlgo kConv2dInt8DepthwiseW16Avx512Vnni;
extern const Conv2dAlgo kConv2dInt8DepthwiseW8Avx2;
extern const Conv2dAlgo kConv2dInt8DepthwiseC16Avx512Vnni;
extern const Conv2dAlgo kConv2dInt8DepthwiseNhwcC16Avx512Vnni;
extern const Conv2dAlgo kConv2dInt8GemmNhwc32x32Amx;
extern const Conv2dAlgo kConv2dInt8GemmNhwc12x32Avx512Vnni;
extern const Conv2dAlgo kConv2dInt8DepthwiseC8Avx2;
extern const Conv2dAlgo kConv2dInt8Gemm8x32c4Avx512Vnni;
extern const Conv2dAlgo kConv2dInt8Gemm4x16c4AvxVnni;
extern const Conv2dAlgo kConv2dInt8Gemm2x16c4Avx2;
extern const Conv2dAlgo kConv2dInt8Direct8x32c4Avx512Vnni;
extern const Conv2dAlgo kConv2dInt8Direct4x16c4AvxVnni;
extern const Conv2dAlgo kConv2dInt8Direct2x16c4Avx2;
extern const Conv2dAlgo kConv2dInt8WinogradF2x3Avx512;
extern const Conv2dAlgo kConv2dInt8WinogradF2x3Avx2;
extern const Conv2dAlgo kConv2dInt8WinogradF2x3L1Avx512;
extern const Conv2dAlgo kConv2dInt8WinogradF2x3L1Avx2;

// float32 conv2d algorithms: kernels/reference/conv2d.cpp and
// kernels/x86/conv2d_float32_{depthwise,gemm,winograd}.cpp.
extern const Conv2dAlgo kConv2dFloat32Reference;
extern const Conv2dAlgo kConv2dFloat32Gemm8x32Avx512;
extern const Conv2dAlgo kConv2dFloat32Gemm6x16Avx2;
extern const Conv2dAlgo kConv2dFloat32DepthwiseAvx512;
extern const Conv2dAlgo kConv2dFloat32DepthwiseAvx2;
extern const Conv2dAlgo kConv2dFloat32WinogradF4x3Avx512;
extern const Conv2dAlgo kConv2dFloat32WinogradF4x3Avx2;

// int8 linear algorithms: kernels/reference/linear.cpp and kernels/x86/linear_int8_gemv.cpp.
extern const LinearAlgo kLinearInt8Reference;
extern const LinearAlgo kLinearInt8Gemv64c4Avx512Vnni;
extern const LinearAlgo kLinearInt8Gemv32c2Avx2;
extern const LinearAlgo kLinearFloat32Gemm8x32Avx512;
extern const LinearAlgo kLinearFloat32Gemm6x16Avx2;

// Data movement and elementwise algorithms: kernels/fast/ (portable) and kernels/x86/.
extern const OpAlgo kAddInt8VaddAvx512;
extern const OpAlgo kAddInt8VaddAvx2;
extern const OpAlgo kConcatInt8Table;
extern const OpAlgo kMaxPool2dInt8RowsAvx512;
extern const OpAlgo kMaxPool2dInt8RowsAvx2;
extern const OpAlgo kMaxPool2dInt8Rows;
extern const OpAlgo kMaxPool2dFloat32RowsAvx512;
extern const OpAlgo kMaxPool2dFloat32RowsAvx2;
extern const OpAlgo kMaxPool2dFloat32Rows;
extern const OpAlgo kAddFloat32Flat;
extern const OpAlgo kQuantizeInt8Avx512;
extern const OpAlgo kQuantizeInt8Avx2;
extern const OpAlgo kMulFloat32Flat;
extern const OpAlgo kPermuteRuns;
extern const OpAlgo kGlobalAvgPool2dInt8Sums;

namespace {

// The one hand-edited list of int8 conv2d algorithms, in preference order.
const Conv2dAlgo* const kConv2dInt8Algos[] = {
// Channels-last (NHWC) only, so they never compete with the rest: the layout pass (graph_passes.h)
// puts a conv in NHWC where one of these serves it and a neighbour. AMX's implicit GEMM takes any
// window without groups at K > 32 (resnet18's 3x3 layers ran at twice the NCHW direct conv's rate).
#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
    &kConv2dInt8GemmNhwc32x32Amx,
#endif
#if QTK_X86_AVX512_VNNI
    &kConv2dInt8GemmNhwc12x32Avx512Vnni,
    &kConv2dInt8DepthwiseNhwcC16Avx512Vnni,
#endif
// Depthwise only: before every GEMM, which wastes most of its tile on one channel per group.
// On mobilenet_v2's 3x3 layers (1 thread, an AMD EPYC, noisy), c16 took 0.4-0.75x w16's time up
// to 28x28 but 1.0-1.3x at 112x112 (0.9-1.1x at 56x56): c16 first, as Fast-Run chose on 15 of
// the 17 layers on an Intel Xeon too. At AVX2 the pixel-vectorized w8 first: c8 took 0.7-0.9x its
// time on 14x14 and 7x7 but 1.1-1.3x from 28x28 on. Fast-Run times both per layer.
#if QTK_X86_AVX512_VNNI
    &kConv2dInt8DepthwiseC16Avx512Vnni,
    &kConv2dInt8DepthwiseW16Avx512Vnni,
#endif
#if QTK_X86_AVX2
    &kConv2dInt8DepthwiseW8Avx2,
    &kConv2dInt8DepthwiseC8Avx2,
#endif
// Direct (every kernel but 1x1, stride 1 or 2) before the GEMM of its ISA: faster on resnet18's
// 3x3 layers with AVX-512 VNNI (benchmarks/README.md, Winograd section). At AVX2 the measurements
// disagree (GEMM led in that benchmark); AVX-VNNI is placed alike, unmeasured.
// Winograd F(2x2, 3x3) (3x3 stride 1, float products, exact: docs/winograd.md) after the int8
// kernels of its ISA: 2.5-4x slower than the VNNI direct conv on resnet18's 3x3 layers on an EPYC;
// capped at AVX2 there it beat the AVX2 direct conv (1.05-1.6x), unconfirmed on AVX2-only CPUs.
// Fast-Run times it per layer, with blocks of an L2 share and of L1 (two descriptors).
// AMX first where the CPU has it (an Intel Xeon with AMX-INT8, 1 thread): the direct conv on its
// tiles ran resnet18's 16 layers of 64 channels or more at 530 GMAC/s, against 270 for the VNNI
// direct conv (resnet18 7.1 -> 4.3 ms). Its GEMM only matched the VNNI direct conv on resnet18
// (im2col and packing take half its time), so it comes after it; on 1x1 layers, which need no
// im2col, Fast-Run took it over the VNNI GEMM on 28 of mobilenet_v2's 34 (not where K is below
// its 64-deep tiles).
#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
    &kConv2dInt8Direct32x32c4Amx,
#endif
#if QTK_X86_AVX512_VNNI
    &kConv2dInt8Direct8x32c4Avx512Vnni,
#endif
#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
    &kConv2dInt8Gemm32x32c4Amx,
#endif
#if QTK_X86_AVX512_VNNI
    &kConv2dInt8Gemm8x32c4Avx512Vnni,
    &kConv2dInt8WinogradF2x3Avx512,
    &kConv2dInt8WinogradF2x3L1Avx512,
#endif
#if QTK_X86_AVX_VNNI
    &kConv2dInt8Direct4x16c4AvxVnni,
    &kConv2dInt8Gemm4x16c4AvxVnni,
#endif
#if QTK_X86_AVX2
    &kConv2dInt8Direct2x16c4Avx2,
    &kConv2dInt8Gemm2x16c4Avx2,
    &kConv2dInt8WinogradF2x3Avx2,
    &kConv2dInt8WinogradF2x3L1Avx2,
#endif
    &kConv2dInt8Reference,
};

// The one hand-edited list of float32 conv2d algorithms, in preference order. They agree with the
// reference within the bound of docs/design.md (Winograd: docs/winograd.md), not to the bit.
const Conv2dAlgo* const kConv2dFloat32Algos[] = {
// Depthwise only: before the GEMMs, which would spend most of their tile on one channel per group.
#if QTK_X86_AVX512_VNNI
    &kConv2dFloat32DepthwiseAvx512,
#endif
#if QTK_X86_AVX2
    &kConv2dFloat32DepthwiseAvx2,
#endif
#if QTK_X86_AVX512_VNNI
    &kConv2dFloat32Gemm8x32Avx512,
#endif
#if QTK_X86_AVX2
    &kConv2dFloat32Gemm6x16Avx2,
#endif
// Winograd F(4x4, 3x3) (3x3 stride 1; 4x fewer products, a wider error bound than the GEMM's:
// docs/winograd.md) after the GEMMs, so the default stays the GEMM; Fast-Run times it per layer.
#if QTK_X86_AVX512_VNNI
    &kConv2dFloat32WinogradF4x3Avx512,
#endif
#if QTK_X86_AVX2
    &kConv2dFloat32WinogradF4x3Avx2,
#endif
    &kConv2dFloat32Reference,
};

// The one hand-edited list of algorithms per op whose algorithms all fit every node, in preference
// order, the reference last (described here, from the factories above).
const OpAlgo kAddInt8Reference = {"add_int8_reference", IsaLevel::kScalar,
                                  make_add_int8_reference};
const OpAlgo kConcatInt8Reference = {"concat_int8_reference", IsaLevel::kScalar,
                                     make_concat_int8_reference};
const OpAlgo kMaxPool2dInt8Reference = {"max_pool2d_int8_reference", IsaLevel::kScalar,
                                        make_max_pool2d_int8_reference};
const OpAlgo kMaxPool2dFloat32Reference = {"max_pool2d_float32_reference", IsaLevel::kScalar,
                                           make_max_pool2d_float32_reference};
const OpAlgo kLinearFloat32Reference = {"linear_float32_reference", IsaLevel::kScalar,
                                        make_linear_float32_reference};
const OpAlgo kQuantizeInt8Reference = {"quantize_int8_reference", IsaLevel::kScalar,
                                      make_quantize_reference};
const OpAlgo kAddFloat32Reference = {"add_float32_reference", IsaLevel::kScalar,
                                     make_add_float32_reference};
const OpAlgo kMulFloat32Reference = {"mul_float32_reference", IsaLevel::kScalar,
                                     make_mul_float32_reference};
const OpAlgo kPermuteReference = {"permute_reference", IsaLevel::kScalar, make_permute_reference};
const OpAlgo kGlobalAvgPool2dInt8Reference = {"global_avg_pool2d_int8_reference",
                                              IsaLevel::kScalar,
                                              make_global_avg_pool2d_int8_reference};

const OpAlgo* const kLinearInt8Algos[] = {
#if QTK_X86_AVX512_VNNI
    &kLinearInt8Gemv64c4Avx512Vnni,
#endif
#if QTK_X86_AVX2
    &kLinearInt8Gemv32c2Avx2,
#endif
    &kLinearInt8Reference,
};
const OpAlgo* const kLinearFloat32Algos[] = {
#if QTK_X86_AVX512_VNNI
    &kLinearFloat32Gemm8x32Avx512,
#endif
#if QTK_X86_AVX2
    &kLinearFloat32Gemm6x16Avx2,
#endif
    &kLinearFloat32Reference,
};
const OpAlgo* const kAddInt8Algos[] = {
#if QTK_X86_AVX512_VNNI
    &kAddInt8VaddAvx512,
#endif
#if QTK_X86_AVX2
    &kAddInt8VaddAvx2,
#endif
    &kAddInt8Reference,
};
const OpAlgo* const kConcatInt8Algos[] = {&kConcatInt8Table, &kConcatInt8Reference};
const OpAlgo* const kMaxPool2dInt8Algos[] = {
#if QTK_X86_AVX512_VNNI
    &kMaxPool2dInt8RowsAvx512,
#endif
#if QTK_X86_AVX2
    &kMaxPool2dInt8RowsAvx2,
#endif
    &kMaxPool2dInt8Rows,
    &kMaxPool2dInt8Reference,
};
const OpAlgo* const kMaxPool2dFloat32Algos[] = {
#if QTK_X86_AVX512_VNNI
    &kMaxPool2dFloat32RowsAvx512,
#endif
#if QTK_X86_AVX2
    &kMaxPool2dFloat32RowsAvx2,
#endif
    &kMaxPool2dFloat32Rows,
    &kMaxPool2dFloat32Reference,
};
const OpAlgo* const kQuantizeAlgos[] = {  // float32 in, int8 out
#if QTK_X86_AVX512_VNNI
    &kQuantizeInt8Avx512,
#endif
#if QTK_X86_AVX2
    &kQuantizeInt8Avx2,
#endif
    &kQuantizeInt8Reference,
};
const OpAlgo* const kAddFloat32Algos[] = {&kAddFloat32Flat, &kAddFloat32Reference};
const OpAlgo* const kMulFloat32Algos[] = {&kMulFloat32Flat, &kMulFloat32Reference};
const OpAlgo* const kPermuteAlgos[] = {&kPermuteRuns, &kPermuteReference};  // int8 and float32
const OpAlgo* const kGlobalAvgPool2dInt8Algos[] = {&kGlobalAvgPool2dInt8Sums,
                                                   &kGlobalAvgPool2dInt8Reference};

// A list's candidates (algo_policy.h), the list bound at compile time for kMultiAlgorithmOps.
template <const auto& kAlgos>
std::vector<KernelCandidate> list_candidates(const NodeView& node) {
    return usable_candidates(node, std::begin(kAlgos), std::end(kAlgos));
}

// Ops with several algorithms for one dtype; every other op has one kernel per dtype (kOps).
struct MultiAlgorithmOp {
    const char* op;
    DType dtype;
    std::vector<KernelCandidate> (*candidates)(const NodeView& node);
};

}  // namespace

namespace {

void quantize_int8_scalar(const float* x, int64_t count, float inv_scale, int32_t zero_point,
                          int8_t* y) {
    for (int64_t i = 0; i < count; ++i) {
        y[i] = arith::quantize(x[i], inv_scale, zero_point);
    }
}

}  // namespace

// kQuantizeAlgos' order, on the micro-kernels behind its vector algorithms.
Int8QuantizeFn choose_int8_quantizer() {
    const IsaLevel cap = isa_cap();
#if QTK_X86_AVX512_VNNI
    if (kQuantizeInt8Avx512.usable(cap)) {
        return kInt8QuantizeAvx512.run;
    }
#endif
#if QTK_X86_AVX2
    if (kQuantizeInt8Avx2.usable(cap)) {
        return kInt8QuantizeAvx2.run;
    }
#endif
    (void)cap;
    return quantize_int8_scalar;
}

namespace {

const MultiAlgorithmOp kMultiAlgorithmOps[] = {
    {"conv2d", DType::kInt8, [](const NodeView& n) { return conv2d_candidates(n, DType::kInt8); }},
    {"conv2d", DType::kFloat32,
     [](const NodeView& n) { return conv2d_candidates(n, DType::kFloat32); }},
    {"linear", DType::kInt8, list_candidates<kLinearInt8Algos>},
    {"linear", DType::kFloat32, list_candidates<kLinearFloat32Algos>},
    {"add", DType::kInt8, list_candidates<kAddInt8Algos>},
    {"add", DType::kFloat32, list_candidates<kAddFloat32Algos>},
    {"mul", DType::kFloat32, list_candidates<kMulFloat32Algos>},
    {"concat", DType::kInt8, list_candidates<kConcatInt8Algos>},
    {"max_pool2d", DType::kInt8, list_candidates<kMaxPool2dInt8Algos>},
    {"max_pool2d", DType::kFloat32, list_candidates<kMaxPool2dFloat32Algos>},
    {"quantize", DType::kFloat32, list_candidates<kQuantizeAlgos>},
    {"permute", DType::kInt8, list_candidates<kPermuteAlgos>},
    {"permute", DType::kFloat32, list_candidates<kPermuteAlgos>},
    {"global_avg_pool2d", DType::kInt8, list_candidates<kGlobalAvgPool2dInt8Algos>},
};

struct OpEntry {
    const char* op;
    KernelFactory int8;     // first input int8; nullptr: no int8 form
    KernelFactory float32;  // first input float32; nullptr: no float32 form
};

// The one hand-edited list of the ops this runtime runs: the op table and the "Float32 ops" table
// of docs/qmodel_format.md. Adding an op: write its kernel file, declare its factories above, add
// its line here.
constexpr OpEntry kOps[] = {
    {"conv2d", nullptr, nullptr},  // kMultiAlgorithmOps
    {"linear", nullptr, nullptr},  // kMultiAlgorithmOps
    {"add", nullptr, nullptr},  // kMultiAlgorithmOps
    {"mul", make_mul_int8_reference, nullptr},  // float32: kMultiAlgorithmOps
    {"clamp", make_clamp_int8_reference, make_clamp_float32_reference},
    {"lut", make_lut_int8_reference, nullptr},
    {"hardswish", nullptr, make_hardswish_float32_reference},
    {"hardsigmoid", nullptr, make_hardsigmoid_float32_reference},
    {"sigmoid", nullptr, make_sigmoid_float32_reference},
    {"concat", nullptr, make_concat_float32_reference},  // int8: kMultiAlgorithmOps
    {"max_pool2d", nullptr, nullptr},  // kMultiAlgorithmOps
    {"avg_pool2d", make_avg_pool2d_int8_reference, make_avg_pool2d_float32_reference},
    {"global_avg_pool2d", nullptr,
     make_global_avg_pool2d_float32_reference},  // int8: kMultiAlgorithmOps
    {"resize_bilinear", make_resize_bilinear_int8_reference, nullptr},
    {"quantize", nullptr, nullptr},  // kMultiAlgorithmOps
    {"dequantize", make_dequantize_reference, nullptr},
    {"flatten", make_flatten_reference, make_flatten_reference},
    {"reshape", make_reshape_reference, make_reshape_reference},
    {"permute", nullptr, nullptr},  // kMultiAlgorithmOps
    {"split", make_split_reference, make_split_reference},
    {"pad", make_pad_reference, make_pad_reference},
    {"resize_nearest", make_resize_nearest_reference, make_resize_nearest_reference},
};

}  // namespace

const std::vector<const Conv2dAlgo*>& conv2d_algos(DType dtype) {
    static const std::vector<const Conv2dAlgo*> int8(std::begin(kConv2dInt8Algos),
                                                     std::end(kConv2dInt8Algos));
    static const std::vector<const Conv2dAlgo*> float32(std::begin(kConv2dFloat32Algos),
                                                        std::end(kConv2dFloat32Algos));
    return dtype == DType::kInt8 ? int8 : float32;
}

CreatedKernel create_kernel(const Graph& graph, const Node& node, const KernelPicker& pick) {
    for (const OpEntry& entry : kOps) {
        if (node.op != entry.op) {
            continue;
        }
        const NodeView view(graph, node);
        const DType dtype = view.dtype();
        for (const MultiAlgorithmOp& multi : kMultiAlgorithmOps) {
            if (node.op == multi.op && dtype == multi.dtype) {
                const std::vector<KernelCandidate> candidates = multi.candidates(view);
                const size_t chosen =
                    candidates.size() > 1 && pick ? pick(graph, node, candidates) : 0;
                return {candidates.at(chosen).make(), candidates[chosen].algorithm};
            }
        }
        const KernelFactory make = dtype == DType::kInt8      ? entry.int8
                                   : dtype == DType::kFloat32 ? entry.float32
                                                              : nullptr;
        if (make == nullptr) {
            view.fail("op '" + node.op + "' has no " + dtype_name(dtype) + " kernel (input 0 '" +
                      graph.values[node.inputs[0]].name + "' is " + dtype_name(dtype) + ")");
        }
        return {make(view), "reference"};
    }
    throw Error("node '" + node.name + "' uses op '" + node.op +
                "' which this runtime does not know; re-export with a matching qtk version");
}

}  // namespace detail
}  // namespace qtk
