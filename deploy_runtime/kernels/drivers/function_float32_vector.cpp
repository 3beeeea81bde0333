// hardswish, hardsigmoid, sigmoid and silu in float32 on vectors (function_float32.h): the
// float parts of mobilenet_v3 and efficientnet, whose reference calls std::exp one element at a
// time. hardswish and hardsigmoid give the reference's bits; sigmoid and silu are within the bound
// of docs/design.md. The other float32 functions keep their reference (the registry asks
// has_vector_float32_function). Built with the baseline flags.
#include <algorithm>
#include <iterator>
#include <string>

#include "../contracts/function_float32.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_function_float32_reference(const NodeView& node);

namespace {

// The ops of the micro-kernel tables, in the order of their members.
constexpr const char* kVectorOps[] = {"hardswish", "hardsigmoid", "sigmoid", "silu"};

// A micro-kernel table's function for `op`; nullptr for the ops it lacks.
Float32FunctionFn function_of(const Float32FunctionUkernels& u, const std::string& op) {
    const Float32FunctionFn functions[] = {u.hardswish, u.hardsigmoid, u.sigmoid, u.silu};
    for (size_t i = 0; i < std::size(kVectorOps); ++i) {
        if (op == kVectorOps[i]) {
            return functions[i];
        }
    }
    return nullptr;
}

// Elements per task: a few pages, so two threads split a plane and a task's setup is nothing.
constexpr int64_t kTaskElements = 4096;

class FunctionFloat32Vector final : public BesideReference {
 public:
    FunctionFloat32Vector(const NodeView& node, const Float32FunctionUkernels& ukernels)
        : BesideReference(node, make_function_float32_reference),  // checks the node
          function_(function_of(ukernels, node.op())) {
        if (function_ == nullptr) {  // the registry checks first
            node.fail("op '" + node.op() + "' has no vector float32 kernel");
        }
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        const int64_t count = element_count(*io.output_shapes[0]);
        pool.parallel_for((count + kTaskElements - 1) / kTaskElements,
                          [&](int64_t begin, int64_t end) {
                              const int64_t first = begin * kTaskElements;
                              const int64_t last = std::min(count, end * kTaskElements);
                              function_(x + first, last - first, y + first);
                          });
    }

 private:
    const Float32FunctionFn function_;
};

}  // namespace

bool has_vector_float32_function(const std::string& op) {
    return std::find(std::begin(kVectorOps), std::end(kVectorOps), op) != std::end(kVectorOps);
}

#if QTK_X86_AVX512_VNNI
extern const OpAlgo kFunctionFloat32Avx512 = {
    "function_float32_avx512", IsaLevel::kAvx512Vnni,
    make_kernel<FunctionFloat32Vector, kFloat32FunctionsAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kFunctionFloat32Avx2 = {
    "function_float32_avx2", IsaLevel::kAvx2,
    make_kernel<FunctionFloat32Vector, kFloat32FunctionsAvx2>};
#endif

}  // namespace detail
}  // namespace qtk
