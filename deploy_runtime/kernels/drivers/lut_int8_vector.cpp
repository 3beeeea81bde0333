// lut int8 (y = table[x + 128]): the vector lookups of lut_int8.h over the flat tensor,
// threads splitting it. Built with the baseline flags.
#include <array>
#include <cstring>

#include "../contracts/lut_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_lut_int8_reference(const NodeView& node);

namespace {

class LutInt8Vector final : public BesideReference {
 public:
    LutInt8Vector(const NodeView& node, const Int8LutUkernel& ukernel)
        : BesideReference(node, make_lut_int8_reference), ukernel_(ukernel) {
        // Checked by the reference: 256 int8 entries.
        std::memcpy(table_.data(), node.constant_input(1, "table", DType::kInt8, 1).data,
                    table_.size());
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(element_count(*io.output_shapes[0]), [&](int64_t begin, int64_t end) {
            ukernel_.run(x + begin, end - begin, table_.data(), y + begin);
        });
    }

 private:
    const Int8LutUkernel& ukernel_;
    std::array<int8_t, 256> table_;
};

}  // namespace

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kLutInt8VectorAvx512Vbmi = {"lut_int8_vector_avx512_vbmi",
                                                IsaLevel::kAvx512Vbmi,
                                                make_kernel<LutInt8Vector, kInt8LutAvx512Vbmi>};
#endif
#if QTK_X86_AVX512_VNNI
extern const OpAlgo kLutInt8VectorAvx512 = {"lut_int8_vector_avx512", IsaLevel::kAvx512Vnni,
                                            make_kernel<LutInt8Vector, kInt8LutAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kLutInt8VectorAvx2 = {"lut_int8_vector_avx2", IsaLevel::kAvx2,
                                          make_kernel<LutInt8Vector, kInt8LutAvx2>};
#endif
#if QTK_ARM_NEON
extern const OpAlgo kLutInt8VectorNeon = {"lut_int8_vector_neon", IsaLevel::kNeon,
                                          make_kernel<LutInt8Vector, kInt8LutNeon>};
#endif

}  // namespace detail
}  // namespace qtk
