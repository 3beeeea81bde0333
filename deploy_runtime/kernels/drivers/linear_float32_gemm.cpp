// linear float32 on x86, any rows, by the float32 GEMM micro-kernels of the conv (gemm_float32.h):
// output features are the micro-kernel's rows (its A operand, packed at load, mr features a tile),
// the input's rows (every dimension but the last, N of them) its columns (x transposed once per run
// into the workspace as B, K rows of N), and the [O][N] result is transposed into y [N][O]. Each
// output is its bias plus its K products in the order of k, one fused multiply-add each: within
// docs/design.md's float bound of the reference (which rounds each product), and the same bits for
// every batch, shape of the leading dimensions and thread count.
#include <algorithm>

#include "../x86/gemm_float32.h"
#include "linear.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class LinearFloat32Gemm final : public LinearKernel {
 public:
    LinearFloat32Gemm(const NodeView& node, const Float32GemmUkernel& ukernel)
        : LinearKernel(node, DType::kFloat32, DType::kFloat32),
          ukernel_(ukernel),
          tiles_(ceil_div(out_features_, ukernel.mr)) {
        node.expect_attrs({}, {"bounds"});
        bounds_ = node.optional_float_bounds("bounds");
        const std::vector<float> weight =
            float32_values(node.constant_input(1, "weight", DType::kFloat32, 2));
        const std::vector<float> bias =
            float32_values(node.constant_input(2, "bias", DType::kFloat32, 1));
        // Tile t: [K][mr] of features t mr .. t mr + mr - 1, zeros past the last feature.
        const int64_t mr = ukernel.mr;
        packed_weight_.assign(size_t(tiles_ * in_features_ * mr), 0.0f);
        packed_bias_.assign(size_t(tiles_ * mr), 0.0f);
        for (int64_t o = 0; o < out_features_; ++o) {
            float* tile = packed_weight_.data() + o / mr * in_features_ * mr + o % mr;
            for (int64_t k = 0; k < in_features_; ++k) {
                tile[k * mr] = weight[size_t(o * in_features_ + k)];
            }
            packed_bias_[size_t(o)] = bias[size_t(o)];
        }
    }

    // x transposed [K][N], then the result [O][N].
    size_t workspace_bytes(const std::vector<Shape>& input_shapes, const std::vector<Shape>&,
                           int threads) const override {
        const int64_t row_count = rows(input_shapes[0]);
        const size_t floats = size_t((in_features_ + out_features_) * row_count);
        return WorkspaceLayout{floats * sizeof(float), 0, threads}.bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t row_count = rows(*io.input_shapes[0]), k_count = in_features_;
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        float* xt = reinterpret_cast<float*>(io.workspace);
        float* yt = xt + k_count * row_count;
        for (int64_t n = 0; n < row_count; ++n) {
            for (int64_t k = 0; k < k_count; ++k) {
                xt[k * row_count + n] = x[n * k_count + k];
            }
        }
        const int64_t mr = ukernel_.mr, nr = ukernel_.nr, column_tiles = ceil_div(row_count, nr);
        pool.parallel_for(tiles_ * column_tiles, [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
                const int64_t tile = task / column_tiles, j0 = task % column_tiles * nr;
                ukernel_.run(k_count, packed_weight_.data() + tile * k_count * mr, xt + j0,
                             row_count, packed_bias_.data() + tile * mr, bounds_.lo, bounds_.hi,
                             std::min(mr, out_features_ - tile * mr), std::min(nr, row_count - j0),
                             yt + tile * mr * row_count + j0, row_count);
            }
        });
        for (int64_t n = 0; n < row_count; ++n) {
            for (int64_t o = 0; o < out_features_; ++o) {
                y[n * out_features_ + o] = yt[o * row_count + n];
            }
        }
    }

 private:
    const Float32GemmUkernel& ukernel_;
    const int64_t tiles_;  // of mr output features
    FloatBounds bounds_;
    std::vector<float> packed_weight_, packed_bias_;  // [tiles][K][mr], [tiles][mr]
};

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const LinearAlgo kLinearFloat32Gemm8x32Avx512 = {
    "linear_float32_gemm_8x32_avx512", IsaLevel::kAvx512Vnni,
    make_kernel<LinearFloat32Gemm, kFloat32Gemm8x32Avx512>};
#endif
#if QTK_X86_AVX2
extern const LinearAlgo kLinearFloat32Gemm6x16Avx2 = {
    "linear_float32_gemm_6x16_avx2", IsaLevel::kAvx2,
    make_kernel<LinearFloat32Gemm, kFloat32Gemm6x16Avx2>};
#endif

}  // namespace detail
}  // namespace qtk
