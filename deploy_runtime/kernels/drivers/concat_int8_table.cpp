// concat int8 (docs/quantization_spec.md section 3, one input per rescaled sum) by table: each
// input's rescale is a function of one int8 value, so 256 entries computed at load with
// arith::rescale give its bytes exactly. An input whose table is the identity (the output's
// (scale, zero_point), M = 2^30, n = 30; decided by the table, not by the parameters) is copied;
// the others are looked up by a table micro-kernel: x86's vector lookups (lut_int8.h, 4 times a
// byte loop's speed and more: shufflenet_v2's 16 concats took 14% of it), or the portable loop
// below.
// Threads split the outer index (the dims before the axis) as in the reference.
#include <array>
#include <cstring>

#include "../contracts/lut_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_concat_int8_reference(const NodeView& node);

namespace {

class ConcatInt8Table final : public BesideReference {
 public:
    ConcatInt8Table(const NodeView& node, const Int8LutUkernel& lookup)
        : BesideReference(node, make_concat_int8_reference),
          lookup_(lookup),
          axis_(node.int_scalar("axis", 1, 7)) {
        const size_t count = node.input_count();
        const std::vector<int32_t> multiplier = node.multipliers("multiplier", count);
        const std::vector<int32_t> shift = node.shifts("shift", count);
        const int32_t output_zero_point = node.output(0, DType::kInt8).zero_point;
        tables_.resize(count);
        identity_.resize(count);
        for (size_t i = 0; i < count; ++i) {
            const int32_t zero_point = node.activation_input(i, DType::kInt8).zero_point;
            bool identity = true;
            for (int32_t q = arith::kInt8Min; q <= arith::kInt8Max; ++q) {
                const int8_t y = arith::rescale(static_cast<int8_t>(q), zero_point, multiplier[i],
                                                shift[i], output_zero_point);
                tables_[i][static_cast<size_t>(q + 128)] = y;
                identity = identity && y == q;
            }
            identity_[i] = identity;
        }
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        int64_t outer = 1;
        for (int64_t d = 0; d < axis_; ++d) {
            outer *= ys[static_cast<size_t>(d)];
        }
        const int64_t out_inner = element_count(ys) / outer;
        const size_t count = io.inputs.size();
        std::vector<int64_t> in_inner(count);
        for (size_t i = 0; i < count; ++i) {
            in_inner[i] = element_count(*io.input_shapes[i]) / outer;
        }
        int8_t* y = io.output<int8_t>(0);
        pool.parallel_for(outer, [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o) {
                int8_t* y_block = y + o * out_inner;
                for (size_t i = 0; i < count; ++i) {
                    const int8_t* x = io.input<int8_t>(i) + o * in_inner[i];
                    if (identity_[i]) {
                        std::memcpy(y_block, x, static_cast<size_t>(in_inner[i]));
                    } else {
                        lookup_.run(x, in_inner[i], tables_[i].data(), y_block);
                    }
                    y_block += in_inner[i];
                }
            }
        });
    }

 private:
    const Int8LutUkernel& lookup_;
    const int64_t axis_;  // checked against the rank by the reference
    std::vector<std::array<int8_t, 256>> tables_;  // tables_[i][q + 128]: input i's rescale of q
    std::vector<bool> identity_;
};

void lookup_bytes(const int8_t* x, int64_t count, const int8_t* table, int8_t* y) {
    for (int64_t k = 0; k < count; ++k) {
        y[k] = table[static_cast<size_t>(int32_t{x[k]} + 128)];
    }
}

constexpr Int8LutUkernel kLookupBytes = {lookup_bytes};

}  // namespace

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kConcatInt8TableAvx512Vbmi = {
    "concat_int8_table_avx512_vbmi", IsaLevel::kAvx512Vbmi,
    make_kernel<ConcatInt8Table, kInt8LutAvx512Vbmi>};
#endif
#if QTK_X86_AVX512_VNNI
extern const OpAlgo kConcatInt8TableAvx512 = {"concat_int8_table_avx512", IsaLevel::kAvx512Vnni,
                                              make_kernel<ConcatInt8Table, kInt8LutAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kConcatInt8TableAvx2 = {"concat_int8_table_avx2", IsaLevel::kAvx2,
                                            make_kernel<ConcatInt8Table, kInt8LutAvx2>};
#endif
#if QTK_ARM_NEON
extern const OpAlgo kConcatInt8TableNeon = {"concat_int8_table_neon", IsaLevel::kNeon,
                                            make_kernel<ConcatInt8Table, kInt8LutNeon>};
#endif
extern const OpAlgo kConcatInt8Table = {"concat_int8_table", IsaLevel::kScalar,
                                        make_kernel<ConcatInt8Table, kLookupBytes>};

}  // namespace detail
}  // namespace qtk
