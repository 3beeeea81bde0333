// lut int8 (y = table[x + 128]): table_lookup_planes.h over the node's table, or one table per
// channel (spec 25). Built with the baseline flags.
#include "op_algo.h"
#include "table_lookup_planes.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_lut_int8_reference(const NodeView& node);
// [channels][256]: the node's table, one row or one per channel
// (kernels/reference/elementwise.cpp).
std::vector<int8_t> lut_int8_tables(const NodeView& node);

using LutInt8Vector = TableLookupPlanes<make_lut_int8_reference, lut_int8_tables>;

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
