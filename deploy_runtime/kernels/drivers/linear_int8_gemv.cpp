// linear int8, any rows (docs/quantization_spec.md section 4 with k over the input
// features, the last dimension; every other dimension, the batch among them, is rows): output
// features across the vector lanes. The GEMV micro-kernels (gemv_int8.h) and the epilogue
// (requantize_int8.h) are per ISA; this file, built with the baseline flags, packs the weights at
// load and cuts the work.
//
// Exact by construction, as the GEMM conv: the micro-kernels multiply u = x + o by the int8
// weights, o their x_offset (x86: 128, u = x ^ 0x80 as uint8; aarch64: 0), and
// sum (x - z) w = sum u w - (o + z) sum w, so one constant per output feature, bias - (o + z) sum w
// (computed at load), turns their sums into the spec's accumulator;
// |sum u w| <= K * 255 * 127 < 2^31 (check_accumulator_range).
//
// Work: one task per (block of nr features, row), block-major, so a thread's consecutive tasks
// reuse one block of packed weights (nr * K bytes) from cache across rows.
#include <algorithm>

#include "../contracts/gemv_int8.h"
#include "../contracts/requantize_int8.h"
#include "linear.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class LinearInt8Gemv final : public LinearKernel {
 public:
    LinearInt8Gemv(const NodeView& node, const Int8GemvUkernel& ukernel,
                   const Int8RequantizeUkernel& requantize)
        : LinearKernel(node, DType::kInt8, DType::kInt32),
          ukernel_(ukernel),
          requantize_(requantize),
          constants_(node, out_features_, in_features_),
          k_padded_(ceil_div(in_features_, 4) * 4),
          blocks_(ceil_div(out_features_, ukernel.nr)) {
        pack_weights();
    }

    // u = x + x_offset per row, zero past K (where the packed weights are zero too).
    size_t workspace_bytes(const std::vector<Shape>& input_shapes, const std::vector<Shape>&,
                           int) const override {
        return size_t(rows(input_shapes[0]) * k_padded_);
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t row_count = rows(*io.input_shapes[0]);
        const int64_t row_bytes = k_padded_;
        const int8_t* x = io.input<int8_t>(0);
        int8_t* y = io.output<int8_t>(0);
        uint8_t* const u = io.workspace;
        const uint8_t flip = ukernel_.x_offset == 128 ? 0x80 : 0;
        for (int64_t n = 0; n < row_count; ++n) {
            uint8_t* u_row = u + n * row_bytes;
            for (int64_t k = 0; k < in_features_; ++k) {
                u_row[k] = static_cast<uint8_t>(x[n * in_features_ + k] ^ flip);
            }
            std::fill(u_row + in_features_, u_row + row_bytes, uint8_t{0});
        }
        const LinearInt8Constants& k = constants_;
        const Int8Output out = {k.output_zero_point, k.clamp.lo, k.clamp.hi};
        const int nr = ukernel_.nr;
        pool.parallel_for(blocks_ * row_count, [&](int64_t begin, int64_t end) {
            std::vector<int32_t> c(static_cast<size_t>(nr));
            for (int64_t task = begin; task < end; ++task) {
                const int64_t block = task / row_count, n = task % row_count;
                const int64_t first = block * nr;
                const int8_t* w = packed_weights_.data() + block * k_padded_ * nr;
                ukernel_.run(k_padded_ / ukernel_.kr, w, u + n * row_bytes, c.data());
                requantize_.channels(c.data(), 0, 1, std::min<int64_t>(nr, out_features_ - first),
                                     acc_init_.data() + first, k.multiplier.data() + first,
                                     k.shift.data() + first, out,
                                     y + n * out_features_ + first, 0);
            }
        });
    }

 private:
    // Weights [O, K] -> per block of nr features, [K / kr][nr][kr] with zeros past K and past O;
    // and the per-feature constant of the header comment.
    void pack_weights() {
        const int nr = ukernel_.nr, kr = ukernel_.kr;
        packed_weights_.assign(size_t(blocks_ * k_padded_ * nr), 0);
        acc_init_.resize(size_t(out_features_));
        for (int64_t o = 0; o < out_features_; ++o) {
            int8_t* dst = packed_weights_.data() + o / nr * k_padded_ * nr + o % nr * kr;
            const int8_t* w = constants_.weight + o * in_features_;
            int64_t sum = 0;
            for (int64_t k = 0; k < in_features_; ++k) {
                dst[k / kr * nr * kr + k % kr] = w[k];
                sum += w[k];
            }
            // In int32: |bias| + 255 * 127 * K < 2^31 (check_accumulator_range).
            acc_init_[size_t(o)] = static_cast<int32_t>(
                constants_.bias[size_t(o)] -
                (int64_t{ukernel_.x_offset} + constants_.input_zero_point) * sum);
        }
    }

    const Int8GemvUkernel& ukernel_;
    const Int8RequantizeUkernel& requantize_;
    const LinearInt8Constants constants_;
    const int64_t k_padded_;  // K rounded up to 4, a multiple of every kr
    const int64_t blocks_;    // blocks of nr output features
    std::vector<int8_t> packed_weights_;
    std::vector<int32_t> acc_init_;  // per output feature: bias - (x_offset + z) * sum(w)
};

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const LinearAlgo kLinearInt8Gemv64c4Avx512Vnni = {
    "linear_int8_gemv_64c4_avx512_vnni", IsaLevel::kAvx512Vnni,
    make_kernel<LinearInt8Gemv, kInt8Gemv64c4Avx512Vnni, kInt8RequantizeAvx512>};
#endif
#if QTK_X86_AVX2
extern const LinearAlgo kLinearInt8Gemv32c2Avx2 = {
    "linear_int8_gemv_32c2_avx2", IsaLevel::kAvx2,
    make_kernel<LinearInt8Gemv, kInt8Gemv32c2Avx2, kInt8RequantizeAvx2>};
#endif
#if QTK_ARM_DOTPROD
extern const LinearAlgo kLinearInt8Gemv16c4Dotprod = {
    "linear_int8_gemv_16c4_dotprod", IsaLevel::kDotprod,
    make_kernel<LinearInt8Gemv, kInt8Gemv16c4Dotprod, kInt8RequantizeNeon>};
#endif
#if QTK_ARM_NEON
extern const LinearAlgo kLinearInt8Gemv16c4Neon = {
    "linear_int8_gemv_16c4_neon", IsaLevel::kNeon,
    make_kernel<LinearInt8Gemv, kInt8Gemv16c4Neon, kInt8RequantizeNeon>};
#endif

}  // namespace detail
}  // namespace qtk
