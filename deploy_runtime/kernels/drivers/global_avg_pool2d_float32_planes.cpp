// global_avg_pool2d, float32, NCHW: each plane's sum from 0 in the reference's order (pixel 0
// first, one float add each), then divided by H W as the reference does, so its bits. Eight planes
// are summed together, their adds interleaved: one plane's sum is a chain of dependent adds, which
// left the reference at a fraction of the adders' rate (mobilenet_v2's 1280 planes of 7x7: 33 us,
// then 10; Zen 4). Threads split planes. Channels-last, which the layout pass gives only int8
// activations, goes to the reference.
#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_global_avg_pool2d_float32_reference(const NodeView& node);

namespace {

constexpr int64_t kPlanes = 8;  // summed together: more than an add's latency times the adders

// y[p] = (sum over i < size of x[p size + i], from 0 in the order of i) / size, for p < P.
template <int P>
void average_planes(const float* x, int64_t size, float* y) {
    float sums[P] = {};
    for (int64_t i = 0; i < size; ++i) {
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
            sums[p] += x[p * size + i];
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
        y[p] = sums[p] / static_cast<float>(size);
    }
}

class GlobalAvgPool2dFloat32Planes final : public BesideReference {
 public:
    explicit GlobalAvgPool2dFloat32Planes(const NodeView& node)
        : BesideReference(node, make_global_avg_pool2d_float32_reference),
          nhwc_(node.channels_last()) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        if (nhwc_) {
            reference_->run(io, pool);
            return;
        }
        const Shape& xs = *io.input_shapes[0];
        const int64_t size = xs[2] * xs[3];
        const float* x = io.input<float>(0);
        float* y = io.output<float>(0);
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            int64_t plane = begin;
            for (; plane + kPlanes <= end; plane += kPlanes) {
                average_planes<kPlanes>(x + plane * size, size, y + plane);
            }
            for (; plane < end; ++plane) {
                average_planes<1>(x + plane * size, size, y + plane);
            }
        });
    }

 private:
    const bool nhwc_;
};

std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<GlobalAvgPool2dFloat32Planes>(node);
}

}  // namespace

extern const OpAlgo kGlobalAvgPool2dFloat32Planes = {"global_avg_pool2d_float32_planes",
                                                     IsaLevel::kScalar, make};

}  // namespace detail
}  // namespace qtk
