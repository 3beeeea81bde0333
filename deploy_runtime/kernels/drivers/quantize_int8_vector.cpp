// quantize (float32 -> int8, docs/quantization_spec.md section 1) on x86: the vectorized
// micro-kernels of int8_quantize.h over chunks of the tensor, bit for bit the reference's bytes.
// The same micro-kernels quantize a session's float inputs (op_registry.h choose_int8_quantizer).
#include "beside_reference.h"
#include "int8_quantize.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_quantize_reference(const NodeView& node);

namespace {

class QuantizeInt8Vector final : public BesideReference {
 public:
    QuantizeInt8Vector(const NodeView& node, const Int8QuantizeUkernel& ukernel)
        : BesideReference(node, make_quantize_reference),
          ukernel_(ukernel),
          inv_scale_(arith::inverse_scale(node.output(0, DType::kInt8).scale)),
          zero_point_(node.output(0, DType::kInt8).zero_point) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const float* x = io.input<float>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            ukernel_.run(x + begin, end - begin, inv_scale_, zero_point_, y + begin);
        });
    }

 private:
    const Int8QuantizeUkernel& ukernel_;
    const float inv_scale_;
    const int32_t zero_point_;
};

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const OpAlgo kQuantizeInt8Avx512 = {"quantize_int8_avx512", IsaLevel::kAvx512Vnni,
                                           make_kernel<QuantizeInt8Vector, kInt8QuantizeAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kQuantizeInt8Avx2 = {"quantize_int8_avx2", IsaLevel::kAvx2,
                                         make_kernel<QuantizeInt8Vector, kInt8QuantizeAvx2>};
#endif

}  // namespace detail
}  // namespace qtk
