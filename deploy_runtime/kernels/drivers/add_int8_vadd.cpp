// add int8, vectorized (docs/quantization_spec.md section 3, same shapes): the vectorized rescaled sum
// of vadd_int8.h over the flat tensors, threads splitting them. Built with the baseline flags.
#include "../contracts/vadd_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_add_int8_reference(const NodeView& node);

namespace {

class AddInt8Vadd final : public BesideReference {
 public:
    AddInt8Vadd(const NodeView& node, const Int8VaddUkernel& ukernel)
        : BesideReference(node, make_add_int8_reference), ukernel_(ukernel) {
        // Checked by the reference.
        const std::vector<int32_t> multipliers = node.multipliers("multiplier", 2);
        const ClampRange clamp = node.clamp("clamp");
        params_ = {node.activation_input(0, DType::kInt8).zero_point,
                   multipliers[0],
                   node.activation_input(1, DType::kInt8).zero_point,
                   multipliers[1],
                   node.shifts("shift", 1)[0],
                   node.output(0, DType::kInt8).zero_point,
                   clamp.lo,
                   clamp.hi};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* a = io.input<int8_t>(0);
        const int8_t* b = io.input<int8_t>(1);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            ukernel_.run(a + begin, b + begin, end - begin, params_, y + begin);
        });
    }

 private:
    const Int8VaddUkernel& ukernel_;
    Int8AddParams params_;
};

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const OpAlgo kAddInt8VaddAvx512 = {"add_int8_vadd_avx512", IsaLevel::kAvx512Vnni,
                                          make_kernel<AddInt8Vadd, kInt8VaddAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kAddInt8VaddAvx2 = {"add_int8_vadd_avx2", IsaLevel::kAvx2,
                                        make_kernel<AddInt8Vadd, kInt8VaddAvx2>};
#endif
#if QTK_ARM_NEON
extern const OpAlgo kAddInt8VaddNeon = {"add_int8_vadd_neon", IsaLevel::kNeon,
                                        make_kernel<AddInt8Vadd, kInt8VaddNeon>};
#endif

}  // namespace detail
}  // namespace qtk
