// prelu int8 by table: spec 22's two requantizations take one of 256 values per slope, so the
// reference's own function fills a table per slope at load (prelu_int8_tables), and
// table_lookup_planes.h looks each channel plane up. Built with the baseline flags.
#include "op_algo.h"
#include "table_lookup_planes.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_prelu_int8_reference(const NodeView& node);
// [slopes][256]: y for x = -128 .. 127 of each slope (kernels/reference/prelu.cpp).
std::vector<int8_t> prelu_int8_tables(const NodeView& node);

using PReLUInt8Table = TableLookupPlanes<make_prelu_int8_reference, prelu_int8_tables>;

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kPReLUInt8TableAvx512Vbmi = {"prelu_int8_table_avx512_vbmi",
                                                 IsaLevel::kAvx512Vbmi,
                                                 make_kernel<PReLUInt8Table, kInt8LutAvx512Vbmi>};
#endif
#if QTK_X86_AVX512_VNNI
extern const OpAlgo kPReLUInt8TableAvx512 = {"prelu_int8_table_avx512", IsaLevel::kAvx512Vnni,
                                             make_kernel<PReLUInt8Table, kInt8LutAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kPReLUInt8TableAvx2 = {"prelu_int8_table_avx2", IsaLevel::kAvx2,
                                           make_kernel<PReLUInt8Table, kInt8LutAvx2>};
#endif
#if QTK_ARM_NEON
extern const OpAlgo kPReLUInt8TableNeon = {"prelu_int8_table_neon", IsaLevel::kNeon,
                                           make_kernel<PReLUInt8Table, kInt8LutNeon>};
#endif

}  // namespace detail
}  // namespace qtk
