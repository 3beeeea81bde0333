// linear float32 on x86, any rows, by the float32 GEMM micro-kernels of the conv (gemm_float32.h),
// in the orientation that writes y [N][O] as it is: the micro-kernel's rows are the input's rows
// (every dimension but the last, N of them: x packed per run into [K][mr] tiles, its A operand),
// its columns the output features (the weights packed at load into [K][nr] panels, its B operand,
// each read once per tile of mr rows: at batch 1, once). y is first filled with the bias and the
// micro-kernel sums onto it, so each output is its bias plus its K products in the order of k, one
// fused multiply-add each: within docs/design.md's float bound of the reference (which rounds each
// product), and the same bits for every batch, shape of the leading dimensions and thread count.
#include <algorithm>

#include "../contracts/gemm_float32.h"
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
          panels_(ceil_div(out_features_, ukernel.nr)) {
        node.expect_attrs({}, {"bounds"});
        bounds_ = node.optional_float_bounds("bounds");
        const std::vector<float> weight =
            float32_values(node.constant_input(1, "weight", DType::kFloat32, 2));
        bias_ = float32_values(node.constant_input(2, "bias", DType::kFloat32, 1));
        // Panel j: [K][nr] of features j nr .. j nr + nr - 1, zeros past the last feature.
        const int64_t nr = ukernel.nr;
        packed_weight_.assign(size_t(panels_ * in_features_ * nr), 0.0f);
        for (int64_t o = 0; o < out_features_; ++o) {
            float* panel = packed_weight_.data() + o / nr * in_features_ * nr + o % nr;
            for (int64_t k = 0; k < in_features_; ++k) {
                panel[k * nr] = weight[size_t(o * in_features_ + k)];
            }
        }
    }

    // x packed into [row tiles][K][mr].
    size_t workspace_bytes(const std::vector<Shape>& input_shapes, const std::vector<Shape>&,
                           int threads) const override {
        const size_t floats = size_t(row_tiles(rows(input_shapes[0])) * in_features_ * ukernel_.mr);
        return WorkspaceLayout{floats * sizeof(float), 0, threads}.bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t row_count = rows(*io.input_shapes[0]), k_count = in_features_;
        const int64_t mr = ukernel_.mr, nr = ukernel_.nr, tiles = row_tiles(row_count);
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        float* packed_x = reinterpret_cast<float*>(io.workspace);
        for (int64_t tile = 0; tile < tiles; ++tile) {
            float* a = packed_x + tile * k_count * mr;
            for (int64_t r = 0; r < mr; ++r) {
                const int64_t n = tile * mr + r;
                for (int64_t k = 0; k < k_count; ++k) {
                    a[k * mr + r] = n < row_count ? x[n * k_count + k] : 0.0f;
                }
            }
        }
        // Panels outermost: at batch 1 the threads split the weights.
        pool.parallel_for(panels_ * tiles, [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
                const int64_t panel = task / tiles, tile = task % tiles;
                const int64_t o0 = panel * nr, n0 = tile * mr;
                const int64_t cols = std::min(nr, out_features_ - o0);
                const int64_t tile_rows = std::min(mr, row_count - n0);
                float* c = y + n0 * out_features_ + o0;
                for (int64_t r = 0; r < tile_rows; ++r) {
                    std::copy_n(bias_.data() + o0, cols, c + r * out_features_);
                }
                ukernel_.run_strided(k_count, packed_x + tile * k_count * mr,
                                     packed_weight_.data() + panel * k_count * nr, nr, nullptr,
                                     bounds_.lo, bounds_.hi, tile_rows, cols, c, out_features_);
            }
        });
    }

 private:
    int64_t row_tiles(int64_t row_count) const { return ceil_div(row_count, ukernel_.mr); }

    const Float32GemmUkernel& ukernel_;
    const int64_t panels_;  // of nr output features
    FloatBounds bounds_;
    std::vector<float> bias_, packed_weight_;  // [O], [panels][K][nr]
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
