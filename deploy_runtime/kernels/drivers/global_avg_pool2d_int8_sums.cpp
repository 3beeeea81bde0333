// global_avg_pool2d, int8 (docs/quantization_spec.md section 6, d = H * W): each plane's sum of
// x - z, then arith::average, as the reference; the sum taken 16 bytes at a time. psadbw adds the
// unsigned bytes u = x ^ 0x80 = x + 128 into 64-bit lanes, so sum x = sum u - 128 n, exactly, for
// any plane size (SSE2, in every x86-64's baseline; a plain loop elsewhere). Threads split planes.
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "beside_reference.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_global_avg_pool2d_int8_reference(const NodeView& node);

namespace {

int64_t sum_bytes(const int8_t* x, int64_t count) {
    int64_t sum = 0, i = 0;
#if defined(__SSE2__)
    const __m128i vsign = _mm_set1_epi8(static_cast<char>(0x80)), vzero = _mm_setzero_si128();
    __m128i vsum = vzero;
    for (; i + 16 <= count; i += 16) {
        const __m128i vu =
            _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)), vsign);
        vsum = _mm_add_epi64(vsum, _mm_sad_epu8(vu, vzero));
    }
    sum = _mm_cvtsi128_si64(vsum) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(vsum, vsum)) - 128 * i;
#endif
    for (; i < count; ++i) {
        sum += x[i];
    }
    return sum;
}

class GlobalAvgPool2dInt8Sums final : public BesideReference {
 public:
    explicit GlobalAvgPool2dInt8Sums(const NodeView& node)
        : BesideReference(node, make_global_avg_pool2d_int8_reference),
          zero_point_(node.activation_input(0, DType::kInt8).zero_point) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const int64_t plane_size = xs[2] * xs[3];
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t sum = sum_bytes(io.input<int8_t>(0) + plane * plane_size, plane_size);
                io.output<int8_t>(0)[plane] =
                    arith::average(sum - int64_t{zero_point_} * plane_size, plane_size,
                                   zero_point_);
            }
        });
    }

 private:
    const int32_t zero_point_;
};

std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<GlobalAvgPool2dInt8Sums>(node);
}

}  // namespace

extern const OpAlgo kGlobalAvgPool2dInt8Sums = {"global_avg_pool2d_int8_sums", IsaLevel::kScalar,
                                                make};

}  // namespace detail
}  // namespace qtk
