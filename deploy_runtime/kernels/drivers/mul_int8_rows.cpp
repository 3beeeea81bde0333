// mul int8 on x86 (docs/quantization_spec.md: y = requantize((a - z_a)(b - z_b)), the products
// below 2^16 in magnitude): the products in int32 (mul_int8.h) a chunk at a time, then the
// vectorized requantization of requantize_int8.h over them. Runs: the whole tensor where both
// inputs have the output's shape; where one input is broadcast over a stretch of the other's dims
// (squeeze-excitation: [N, C, H, W] * [N, C, 1, 1], channels-last [N, H, W, C] * [N, 1, 1, C]),
// each stretch of the other over which it is one value, or which meets one run of its values.
// Other broadcasts take the reference's walk. Built with the baseline flags.
#include <algorithm>

#include "../contracts/mul_int8.h"
#include "../contracts/requantize_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_mul_int8_reference(const NodeView& node);

namespace {

constexpr int64_t kChunk = 1024;  // products requantized per call: 4 KB of int32 on the stack

// How `small` broadcasts over `big` (ranks equal) where it is big with one stretch of dims,
// [first, last), set to 1: big's elements are [outer][middle][inner] (middle: the product of that
// stretch) and small's [outer][inner]. Equal shapes: middle 1. Any other broadcast: not found.
struct MiddleBroadcast {
    bool found = false;
    int64_t middle = 1, inner = 1;

    MiddleBroadcast(const Shape& big, const Shape& small) {
        if (big.size() != small.size()) {
            return;
        }
        size_t first = 0, last = big.size();
        while (first < last && small[first] == big[first]) {
            ++first;
        }
        while (last > first && small[last - 1] == big[last - 1]) {
            --last;
        }
        for (size_t d = first; d < last; ++d) {
            if (small[d] != 1) {
                return;
            }
            middle *= big[d];
        }
        for (size_t d = first == last ? 0 : last; d < big.size(); ++d) {  // equal: one run
            inner *= big[d];
        }
        found = true;
    }
};

class MulInt8Rows final : public BesideReference {
 public:
    MulInt8Rows(const NodeView& node, const Int8ProductsUkernel& products,
                const Int8RequantizeUkernel& requantize)
        : BesideReference(node, make_mul_int8_reference),
          products_(products),
          requantize_(requantize),
          zero_points_{node.activation_input(0, DType::kInt8).zero_point,
                       node.activation_input(1, DType::kInt8).zero_point},
          multiplier_(node.multipliers("multiplier", 1)[0]),  // checked by the reference
          shift_(node.shifts("shift", 1)[0]),
          out_(node.output(0, DType::kInt8).zero_point, node.clamp("clamp").lo,
               node.clamp("clamp").hi) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& ys = *io.output_shapes[0];
        const int64_t count = element_count(ys);
        // x: an input of the output's shape; s: the other, one value per run of x (inner 1) or a
        // run of values beside one (inner > 1).
        for (int x = 0; x < 2; ++x) {
            const MiddleBroadcast b(ys, *io.input_shapes[size_t(1 - x)]);
            if (*io.input_shapes[size_t(x)] != ys || !b.found) {
                continue;
            }
            const int8_t* xs = io.input<int8_t>(size_t(x));
            const int8_t* s = io.input<int8_t>(size_t(1 - x));
            const int32_t zx = zero_points_[x], zs = zero_points_[1 - x];
            int8_t* y = io.output<int8_t>(0);
            const int64_t block = b.middle * b.inner;  // x's elements per outer index
            pool.parallel_for(count, [&](int64_t begin, int64_t end) {
                int32_t products[kChunk];
                for (int64_t i = begin; i < end;) {
                    const int64_t outer = i / block, j = i % block % b.inner;
                    const int64_t run = b.inner == 1 ? block - i % block : b.inner - j;
                    const int64_t n = std::min({end - i, run, kChunk});
                    const int8_t* factors = s + outer * b.inner + j;
                    products_.run(xs + i, zx, factors, b.inner == 1 ? 0 : 1, zs, n, products);
                    requantize_.channel(products, 0, 1, n, 0, multiplier_, shift_, out_, y + i);
                    i += n;
                }
            });
            return;
        }
        reference_->run(io, pool);
    }

 private:
    const Int8ProductsUkernel& products_;
    const Int8RequantizeUkernel& requantize_;
    const int32_t zero_points_[2];
    const int32_t multiplier_, shift_;
    const Int8Output out_;
};

}  // namespace

#if QTK_X86_AVX512_VNNI
extern const OpAlgo kMulInt8RowsAvx512 = {"mul_int8_rows_avx512", IsaLevel::kAvx512Vnni,
                                          make_kernel<MulInt8Rows, kInt8ProductsAvx512,
                                                      kInt8RequantizeAvx512>};
#endif
#if QTK_X86_AVX2
extern const OpAlgo kMulInt8RowsAvx2 = {"mul_int8_rows_avx2", IsaLevel::kAvx2,
                                        make_kernel<MulInt8Rows, kInt8ProductsAvx2,
                                                    kInt8RequantizeAvx2>};
#endif

}  // namespace detail
}  // namespace qtk
