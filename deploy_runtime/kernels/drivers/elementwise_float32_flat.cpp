// add and mul, float32, where both inputs have the output's shape (a residual add, a gate of the
// same size, a constant of the sample's shape at batch 1): one flat loop with no per-element index
// arithmetic; and where one has it and the other only its leading dims, 1 after them (a
// squeeze-excitation gate [N, C, 1, 1] on [N, C, H, W]): one value per run of outputs. Each
// element is the reference's float operation, operands in its order, and bounds, so the same
// bits. The reference's broadcast walk (an index per dimension per element) serves every other
// shape. The loops are written in SSE2 or NEON: at -O2 the compiler keeps them scalar, reloading
// the bounds after every store (a residual add of 75k floats: 42 us, then 10; Zen 4).
#include <algorithm>
#include <functional>
#include <type_traits>
#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_add_float32_reference(const NodeView& node);
std::unique_ptr<OpKernel> make_mul_float32_reference(const NodeView& node);

namespace {

// y[i] = bounds(Op()(a[i kA], b[i kB])) for i < n (kA, kB: 1, or 0 for a gate's one value), four at
// a time: each lane the scalar operation's bits (bounds as FloatBounds::apply: max(lo, v), then
// min(hi, v), each passing a NaN v through and keeping v's zero where v equals the bound).
template <typename Op, int kA, int kB>
void flat(const float* a, const float* b, FloatBounds bounds, int64_t n, float* y) {
    constexpr bool kAdd = std::is_same_v<Op, std::plus<float>>;
    static_assert(kAdd || std::is_same_v<Op, std::multiplies<float>>, "add or mul");
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 vlo = _mm_set1_ps(bounds.lo), vhi = _mm_set1_ps(bounds.hi);
    for (; i + 4 <= n; i += 4) {
        const __m128 va = kA ? _mm_loadu_ps(a + i) : _mm_set1_ps(*a);
        const __m128 vb = kB ? _mm_loadu_ps(b + i) : _mm_set1_ps(*b);
        const __m128 v = kAdd ? _mm_add_ps(va, vb) : _mm_mul_ps(va, vb);
        _mm_storeu_ps(y + i, _mm_min_ps(vhi, _mm_max_ps(vlo, v)));  // (the second operand on NaN)
    }
#elif defined(__ARM_NEON)
    const float32x4_t vlo = vdupq_n_f32(bounds.lo), vhi = vdupq_n_f32(bounds.hi);
    for (; i + 4 <= n; i += 4) {
        const float32x4_t va = kA ? vld1q_f32(a + i) : vdupq_n_f32(*a);
        const float32x4_t vb = kB ? vld1q_f32(b + i) : vdupq_n_f32(*b);
        float32x4_t v = kAdd ? vaddq_f32(va, vb) : vmulq_f32(va, vb);
        v = vbslq_f32(vcltq_f32(v, vlo), vlo, v);  // selects, not vmax: its NaN and zeros differ
        vst1q_f32(y + i, vbslq_f32(vcltq_f32(vhi, v), vhi, v));
    }
#endif
    for (; i < n; ++i) {
        y[i] = bounds.apply(Op()(a[i * kA], b[i * kB]));
    }
}

template <typename Op>
class ElementwiseFloat32Flat final : public BesideReference {
 public:
    ElementwiseFloat32Flat(const NodeView& node,
                           std::unique_ptr<OpKernel> (*make_reference)(const NodeView& node))
        : BesideReference(node, make_reference),  // checks the node
          a_(node, 0),
          b_(node, 1),
          bounds_(node.optional_float_bounds("bounds")) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        const int64_t a_run = run_of(ys, *io.input_shapes[0]);
        const int64_t b_run = run_of(ys, *io.input_shapes[1]);
        const float* a = a_.data(io);
        const float* b = b_.data(io);
        float* y = io.output<float>(0);
        if (a_run == 1 && b_run == 1) {
            pool.parallel_for(element_count(ys), [&](int64_t begin, int64_t end) {
                flat<Op, 1, 1>(a + begin, b + begin, bounds_, end - begin, y + begin);
            });
            return;
        }
        if (a_run == 0 || b_run == 0 || (a_run > 1 && b_run > 1)) {
            reference_->run(io, pool);
            return;
        }
        // One operand has a value per run of `run` outputs (the gate), the other one per output.
        const int64_t run = std::max(a_run, b_run);
        const bool a_gates = a_run > 1;
        const float* gate = a_gates ? a : b;
        const float* full = a_gates ? b : a;
        pool.parallel_for(element_count(ys) / run, [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                if (a_gates) {
                    flat<Op, 0, 1>(gate + r, full + r * run, bounds_, run, y + r * run);
                } else {
                    flat<Op, 1, 0>(full + r * run, gate + r, bounds_, run, y + r * run);
                }
            }
        });
    }

 private:
    // 1 where `x` has the output's shape; where it has the output's first dims and 1 after them,
    // the outputs per value of x (the product of the output's remaining dims); else 0.
    static int64_t run_of(const Shape& y, const Shape& x) {
        if (x.size() != y.size()) {
            return 0;
        }
        size_t leading = 0;
        while (leading < y.size() && x[leading] == y[leading]) {
            ++leading;
        }
        int64_t run = 1;
        for (size_t d = leading; d < y.size(); ++d) {
            if (x[d] != 1) {
                return 0;
            }
            run *= y[d];
        }
        return run;
    }

    const Float32Operand a_, b_;  // either may be a constant
    const FloatBounds bounds_;
};

std::unique_ptr<OpKernel> make_add(const NodeView& node) {
    return std::make_unique<ElementwiseFloat32Flat<std::plus<float>>>(node,
                                                                      make_add_float32_reference);
}

std::unique_ptr<OpKernel> make_mul(const NodeView& node) {
    return std::make_unique<ElementwiseFloat32Flat<std::multiplies<float>>>(
        node, make_mul_float32_reference);
}

}  // namespace

extern const OpAlgo kAddFloat32Flat = {"add_float32_flat", IsaLevel::kScalar, make_add};
extern const OpAlgo kMulFloat32Flat = {"mul_float32_flat", IsaLevel::kScalar, make_mul};

}  // namespace detail
}  // namespace qtk
