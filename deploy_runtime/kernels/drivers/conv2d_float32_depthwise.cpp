// conv2d float32, depthwise (one input and one output channel per group), 3x3 or 5x5, stride 1 or
// 2, any padding and dilation, NCHW, on x86: the float part of a mixed-precision model. The row
// micro-kernels are per ISA (depthwise_float32.h); this file, built with the baseline flags, lays
// out their input rows and cuts the work.
//
// Each output is its bias plus its k*k products in the order (ky, kx), one fused multiply-add
// each: not the reference's bits (it rounds each product), within the bound of docs/design.md,
// and the same for every thread count and batch.
//
// Work: one (sample, channel) plane is one thread-pool task. Its zero-padded input rows are built
// once each into a ring of as many rows as a window spans, split into stride_w column phases (the
// columns c with c % stride_w = q, in order), so that every tap of an output row reads a
// contiguous run: tap (ky, kx) of output column ox is phase (kx d) % s at ox + (kx d) / s.
#include <algorithm>
#include <cstring>

#include "../x86/depthwise_float32.h"
#include "conv2d.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxTaps = 25;  // 5x5

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool fits_depthwise(const Conv2dParams& p) {
    return p.group_in_channels == 1 && p.out_channels == p.groups && p.kernel_h == p.kernel_w &&
           (p.kernel_h == 3 || p.kernel_h == 5) && (p.stride_h == 1 || p.stride_h == 2) &&
           (p.stride_w == 1 || p.stride_w == 2);
}

// The ring of padded input rows of one plane, each row in stride_w phases of phase_w floats.
struct RowRing {
    int64_t rows;     // the rows one window spans: (kernel_h - 1) * dilation_h + 1
    int64_t phase_w;  // ceil(padded width / stride_w)

    RowRing(const Conv2dParams& p, int64_t padded_w)
        : rows((p.kernel_h - 1) * p.dilation_h + 1), phase_w(ceil_div(padded_w, p.stride_w)) {}

    int64_t row_floats(const Conv2dParams& p) const { return p.stride_w * phase_w; }
    size_t bytes(const Conv2dParams& p) const {
        return size_t(rows * row_floats(p)) * sizeof(float);
    }
};

class Conv2dFloat32Depthwise final : public Conv2dKernel {
 public:
    Conv2dFloat32Depthwise(const NodeView& node, Float32DepthwiseRowFn row)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kFloat32, DType::kFloat32)),
          row_(row),
          constants_(node) {
        if (!fits_depthwise(params_)) {  // the registry checks first
            node.fail("the depthwise kernel does not fit this conv2d");
        }
    }

    size_t workspace_bytes(const std::vector<Shape>& input_shapes, const std::vector<Shape>&,
                           int threads) const override {
        return WorkspaceLayout{0, ring(input_shapes[0]).bytes(params_), threads}.bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const RowRing layout = ring(xs);
        const WorkspaceLayout workspace{0, layout.bytes(params_), pool.threads()};
        pool.parallel_for_slots(xs[0] * xs[1], [&](int64_t slot, int64_t begin, int64_t end) {
            float* rows = reinterpret_cast<float*>(workspace.slot(io.workspace, slot));
            for (int64_t plane = begin; plane < end; ++plane) {
                run_plane(io, layout, plane, rows);
            }
        });
    }

 private:
    RowRing ring(const Shape& x_shape) const {
        return RowRing(params_, x_shape[3] + 2 * params_.pad_w);
    }

    // Padded row r of the plane x (height x width) into its phases at dst.
    void build_row(const float* x, int64_t height, int64_t width, const RowRing& layout, int64_t r,
                   float* dst) const {
        const Conv2dParams& p = params_;
        const int64_t iy = r - p.pad_h;
        if (iy < 0 || iy >= height) {
            std::fill_n(dst, layout.row_floats(p), 0.0f);
            return;
        }
        const float* src = x + iy * width;
        if (p.stride_w == 1) {
            std::fill_n(dst, p.pad_w, 0.0f);
            std::memcpy(dst + p.pad_w, src, size_t(width) * sizeof(float));
            std::fill_n(dst + p.pad_w + width, layout.phase_w - p.pad_w - width, 0.0f);
            return;
        }
        for (int64_t q = 0; q < 2; ++q) {  // padded column q + 2 m reads x at q + 2 m - pad_w
            float* phase = dst + q * layout.phase_w;
            const int64_t first =
                std::min(layout.phase_w, std::max<int64_t>(0, ceil_div(p.pad_w - q, 2)));
            const int64_t end =
                std::min(layout.phase_w, std::max(first, ceil_div(p.pad_w + width - q, 2)));
            std::fill_n(phase, first, 0.0f);
            for (int64_t m = first; m < end; ++m) {
                phase[m] = src[q + 2 * m - p.pad_w];
            }
            std::fill_n(phase + end, layout.phase_w - end, 0.0f);
        }
    }

    void run_plane(const NodeIO& io, const RowRing& layout, int64_t plane, float* ring) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t channel = plane % xs[1];
        const int64_t out_h = ys[2], out_w = ys[3];
        const float* x = io.input<float>(0) + plane * xs[2] * xs[3];
        float* y = io.output<float>(0) + plane * out_h * out_w;
        const float* weights = constants_.weight.data() + channel * p.kernel_h * p.kernel_w;
        const float bias = constants_.bias[size_t(channel)];
        const int64_t row_floats = layout.row_floats(p);
        const float* taps[kMaxTaps];
        int64_t next_row = 0;  // padded rows below it are in the ring, at slot r % layout.rows
        for (int64_t oy = 0; oy < out_h; ++oy, y += out_w) {
            for (; next_row <= oy * p.stride_h + (p.kernel_h - 1) * p.dilation_h; ++next_row) {
                build_row(x, xs[2], xs[3], layout, next_row,
                          ring + next_row % layout.rows * row_floats);
            }
            for (int64_t ky = 0, t = 0; ky < p.kernel_h; ++ky) {
                const float* row =
                    ring + (oy * p.stride_h + ky * p.dilation_h) % layout.rows * row_floats;
                for (int64_t kx = 0; kx < p.kernel_w; ++kx, ++t) {
                    const int64_t column = kx * p.dilation_w;
                    taps[t] =
                        row + column % p.stride_w * layout.phase_w + column / p.stride_w;
                }
            }
            row_(taps, weights, p.kernel_h * p.kernel_w, bias, constants_.bounds.lo,
                 constants_.bounds.hi, out_w, y);
        }
    }

    const Float32DepthwiseRowFn row_;
    const Conv2dFloat32Constants constants_;
};

}  // namespace

// AVX-512 F is all it needs; the lowest AVX-512 level this runtime detects is AVX-512 VNNI.
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dFloat32DepthwiseAvx512 = {
    "conv2d_float32_depthwise_avx512", IsaLevel::kAvx512Vnni, fits_depthwise,
    make_kernel<Conv2dFloat32Depthwise, kFloat32DepthwiseRowAvx512>};
#endif
#if QTK_X86_AVX2
extern const Conv2dAlgo kConv2dFloat32DepthwiseAvx2 = {
    "conv2d_float32_depthwise_avx2", IsaLevel::kAvx2, fits_depthwise,
    make_kernel<Conv2dFloat32Depthwise, kFloat32DepthwiseRowAvx2>};
#endif

}  // namespace detail
}  // namespace qtk
