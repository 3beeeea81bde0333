// add int8, vectorized (docs/quantization_spec.md section 3, same shapes): the vectorized rescaled
// sum of vadd_int8.h over the flat tensors, threads splitting them; where the graph pass fused the
// lookup that read the sum (graph_passes.h), each chunk of sums is then looked up, a piece of a
// channel plane at a time in that channel's table, by lut_int8.h while it is in L1. The
// avx512_vbmi descriptor differs from the avx512 one in its lookups alone. Built with the
// baseline flags.
#include <algorithm>

#include "../contracts/lut_int8.h"
#include "../contracts/vadd_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "table_lookup_planes.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_add_int8_reference(const NodeView& node);
// The fused lookup's tables, [channels][256], or none (kernels/reference/elementwise.cpp).
std::vector<int8_t> add_int8_tables(const NodeView& node);

namespace {

constexpr int64_t kChunkBytes = 16 * 1024;  // of sums looked up before the next are added

class AddInt8Vadd final : public BesideReference {
 public:
    AddInt8Vadd(const NodeView& node, const Int8VaddUkernel& ukernel, const Int8LutUkernel& lut)
        : BesideReference(node, make_add_int8_reference),
          ukernel_(ukernel),
          lut_(lut),
          tables_(add_int8_tables(node)) {
        // Checked by the reference.
        const std::vector<int32_t> multipliers = node.multipliers("multiplier", 2);
        const ClampRange clamp = node.clamp("clamp");
        const int32_t sum_zero_point =
            tables_.empty() ? node.output(0, DType::kInt8).zero_point
                            : static_cast<int32_t>(node.int_scalar("sum_zero_point", -128, 127));
        params_ = {node.activation_input(0, DType::kInt8).zero_point,
                   multipliers[0],
                   node.activation_input(1, DType::kInt8).zero_point,
                   multipliers[1],
                   node.shifts("shift", 1)[0],
                   sum_zero_point,
                   clamp.lo,
                   clamp.hi};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& shape = *io.output_shapes[0];
        const int8_t* a = io.input<int8_t>(0);
        const int8_t* b = io.input<int8_t>(1);
        int8_t* y = io.output<int8_t>(0);
        const int64_t plane = table_plane(shape, static_cast<int64_t>(tables_.size() / 256));
        pool.parallel_for(element_count(shape), [&](int64_t begin, int64_t end) {
            // A chunk's sums, then their lookups (if any) while they are in L1.
            for (int64_t chunk = begin; chunk < end; chunk += kChunkBytes) {
                const int64_t stop = std::min(end, chunk + kChunkBytes);
                ukernel_.run(a + chunk, b + chunk, stop - chunk, params_, y + chunk);
                if (!tables_.empty()) {
                    for_each_table_run(chunk, stop, plane, tables_,
                                       [&](int64_t first, int64_t last, const int8_t* table) {
                                           lut_.run(y + first, last - first, table, y + first);
                                       });
                }
            }
        });
    }

 private:
    const Int8VaddUkernel& ukernel_;
    const Int8LutUkernel& lut_;
    const std::vector<int8_t> tables_;
    Int8AddParams params_;
};

}  // namespace

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kAddInt8VaddAvx512Vbmi = {
    "add_int8_vadd_avx512_vbmi", IsaLevel::kAvx512Vbmi,
    make_kernel<AddInt8Vadd, kInt8VaddAvx512, kInt8LutAvx512Vbmi>};
#endif
#if QTK_X86_AVX512_VNNI
extern const OpAlgo kAddInt8VaddAvx512 = {
    "add_int8_vadd_avx512", IsaLevel::kAvx512Vnni,
    make_kernel<AddInt8Vadd, kInt8VaddAvx512, kInt8LutAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kAddInt8VaddAvx2 = {"add_int8_vadd_avx2", IsaLevel::kAvx2,
                                        make_kernel<AddInt8Vadd, kInt8VaddAvx2, kInt8LutAvx2>};
#endif
#if QTK_ARM_NEON
extern const OpAlgo kAddInt8VaddNeon = {"add_int8_vadd_neon", IsaLevel::kNeon,
                                        make_kernel<AddInt8Vadd, kInt8VaddNeon, kInt8LutNeon>};
#endif

}  // namespace detail
}  // namespace qtk
