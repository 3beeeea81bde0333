// prelu int8 by table: spec 22's two requantizations take one of 256 values per slope, so the
// reference's own function fills a table per slope at load (prelu_int8_tables) and each channel
// plane is looked up by lut_int8.h's vector kernels, threads splitting the planes. Built with the
// baseline flags.
#include <algorithm>
#include <vector>

#include "../contracts/lut_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_prelu_int8_reference(const NodeView& node);
// [slopes][256]: y for x = -128 .. 127 of each slope (kernels/reference/prelu.cpp).
std::vector<int8_t> prelu_int8_tables(const NodeView& node);

namespace {

class PReLUInt8Table final : public BesideReference {
 public:
    PReLUInt8Table(const NodeView& node, const Int8LutUkernel& ukernel)
        : BesideReference(node, make_prelu_int8_reference),
          ukernel_(ukernel),
          tables_(prelu_int8_tables(node)) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& shape = *io.input_shapes[0];
        const int64_t slopes = static_cast<int64_t>(tables_.size() / 256);
        // One slope: the tensor is one plane. Per channel: x [N, C, ...], a plane per (n, c).
        const int64_t planes = slopes == 1 ? 1 : shape[0] * shape[1];
        const int64_t plane = element_count(shape) / planes;
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        // Ranges of elements, cut at plane boundaries so each piece has one table.
        pool.parallel_for(planes * plane, [&](int64_t begin, int64_t end) {
            while (begin < end) {
                const int64_t p = begin / plane;
                const int64_t stop = std::min(end, (p + 1) * plane);
                ukernel_.run(x + begin, stop - begin, &tables_[size_t(p % slopes * 256)],
                             y + begin);
                begin = stop;
            }
        });
    }

 private:
    const Int8LutUkernel& ukernel_;
    const std::vector<int8_t> tables_;
};

}  // namespace

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
