// conv2d float32, depthwise (one input and one output channel per group), 3x3 or 5x5, stride 1 or
// 2, any padding and dilation, NCHW, on x86: the float part of a mixed-precision model. The row
// micro-kernels are per ISA (depthwise_float32.h); this file, built with the baseline flags, lays
// out their input rows and cuts the work.
//
// Each output is its bias plus its k*k products in the order (ky, kx), one fused multiply-add
// each: not the reference's bits (it rounds each product), within the bound of docs/design.md,
// and the same for every thread count and batch.
//
// Work: one (sample, channel) plane is one thread-pool task. Where the ISA has the 3x3 block kernel
// (AVX-512), 3x3 undilated layers with at most `stride` columns of padding (and any at stride 1)
// go to it: output rows in blocks that load each padded row once for all the rows reading it,
// straight into y (the row kernel, bound by its 9 loads a vector, took 1.5x the time on 112x112
// planes, 1.3x on 14x14, 1.15x on 7x7 and at stride 2; Zen 4). With at most `stride` columns of
// padding it reads the input plane itself, padding as zero rows and masked lanes (copying planes
// first took 1.3x the time at 112x112 and 56x56, 1.4x on 14x14 and 7x7; at stride 2, phase planes
// 1.5x at 112x112 and 56x56). Everything else reads phase planes (conv2d_phase_planes.h:
// zero-padded, split by stride), where every tap of a run of outputs reads a contiguous run; a
// thread writes their padding with its first plane of a run only. Short rows (fewer than
// kWideRowsBelow outputs) are summed in one row-kernel call for the whole plane in wide order,
// into a buffer whose real columns then go to y: per-row calls spent more on their setup than on
// their 9 or 25 vectors (7x7 planes: 1.7x the time; rows of 56: 1.5x). Longer rows are one call
// each, straight into y, their phase rows built into an L1 ring just before the first output row
// that reads them: at 112x112, whole planes and bands of rows in wide order both measured slower
// (Zen 4).
#include <algorithm>
#include <cstring>

#include "../contracts/depthwise_float32.h"
#include "conv2d.h"
#include "conv2d_phase_planes.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxTaps = 25;        // 5x5
constexpr int64_t kWideRowsBelow = 64;  // output rows shorter than this are summed as one plane

constexpr Float32Depthwise3x3Fn kNoDepthwise3x3 = nullptr;  // (AVX2: 16 registers, too few)

bool fits_depthwise(const Conv2dParams& p) {
    return p.group_in_channels == 1 && p.out_channels == p.groups && p.kernel_h == p.kernel_w &&
           (p.kernel_h == 3 || p.kernel_h == 5) && (p.stride_h == 1 || p.stride_h == 2) &&
           (p.stride_w == 1 || p.stride_w == 2);
}

class Conv2dFloat32Depthwise final : public Conv2dKernel {
 public:
    // block3x3: null where the ISA has none.
    Conv2dFloat32Depthwise(const NodeView& node, Float32DepthwiseRowFn row,
                           Float32Depthwise3x3Fn block3x3)
        : Conv2dKernel(node, read_conv2d_params(node, DType::kFloat32, DType::kFloat32)),
          row_(row),
          block3x3_(block3x3),
          constants_(node) {
        if (!fits_depthwise(params_)) {  // the registry checks first
            node.fail("the depthwise kernel does not fit this conv2d");
        }
    }

    size_t workspace_bytes(const std::vector<Shape>& input_shapes,
                           const std::vector<Shape>& output_shapes,
                           int threads) const override {
        return layout(input_shapes[0], output_shapes[0], threads).bytes();
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const PhasePlanes phases(params_, ys[2], ys[3], mode(ys) == Mode::kRing);
        const WorkspaceLayout workspace = layout(xs, ys, pool.threads());
        // Where each tap reads output 0's input from a plane's first phase: the same for every
        // plane, and worth computing once (divisions, against a 7x7 plane's 36 FMAs).
        int64_t offsets[kMaxTaps];
        for (int64_t t = 0; t < params_.kernel_h * params_.kernel_w; ++t) {
            offsets[t] = phases.tap_offset(params_, t / params_.kernel_w, t % params_.kernel_w);
        }
        pool.parallel_for_slots(xs[0] * xs[1], [&](int64_t slot, int64_t begin, int64_t end) {
            float* scratch = reinterpret_cast<float*>(workspace.slot(io.workspace, slot));
            for (int64_t plane = begin; plane < end; ++plane) {
                run_plane(io, phases, offsets, plane, plane == begin, scratch);
            }
        });
    }

 private:
    // kDirect: 3x3 undilated, stride 1 or 2 with at most `stride` columns of padding, where the
    // ISA has the block kernel: it reads the input itself. kBlock: the same at stride 1 with wider
    // padding, on a padded copy. Else kWide: rows shorter than kWideRowsBelow, the plane as one;
    // else kRing: a call per row.
    enum class Mode { kDirect, kBlock, kWide, kRing };
    Mode mode(const Shape& y_shape) const {
        const Conv2dParams& p = params_;
        if (block3x3_ != nullptr && p.kernel_h == 3 && p.stride_h == p.stride_w &&
            p.dilation_h == 1 && p.dilation_w == 1) {
            if (p.pad_w <= p.stride_h) {
                return Mode::kDirect;
            }
            if (p.stride_h == 1) {
                return Mode::kBlock;
            }
        }
        return y_shape[3] < kWideRowsBelow ? Mode::kWide : Mode::kRing;
    }

    // Per thread: one plane's phases or their ring (unless in place), then its wide outputs;
    // kDirect: a row of zeros (the input's width).
    WorkspaceLayout layout(const Shape& x_shape, const Shape& y_shape, int threads) const {
        const Mode m = mode(y_shape);
        const PhasePlanes phases(params_, y_shape[2], y_shape[3], m == Mode::kRing);
        const int64_t floats =
            m == Mode::kDirect ? x_shape[3]
                               : phases.channel_floats(params_) +
                                     (m == Mode::kWide ? phases.wide_count(y_shape[2], y_shape[3])
                                                       : 0);
        return WorkspaceLayout{0, size_t(floats) * sizeof(float), threads};
    }

    // first: the thread's first plane of this run; later ones find its padding columns in scratch
    // (whole phases, or every ring row, are built for each plane).
    void run_plane(const NodeIO& io, const PhasePlanes& phases, const int64_t* offsets,
                   int64_t plane, bool first, float* scratch) const {
        const Conv2dParams& p = params_;
        const Shape& xs = *io.input_shapes[0];
        const Shape& ys = *io.output_shapes[0];
        const int64_t channel = plane % xs[1];
        const int64_t out_h = ys[2], out_w = ys[3], tap_count = p.kernel_h * p.kernel_w;
        const float* input = io.input<float>(0) + plane * xs[2] * xs[3];
        const float* x = phases.in_place ? input : scratch;
        float* y = io.output<float>(0) + plane * out_h * out_w;
        const float* weights = constants_.weight.data() + channel * tap_count;
        const float bias = constants_.bias[size_t(channel)];
        const float lo = constants_.bounds.lo, hi = constants_.bounds.hi;
        const float* taps[kMaxTaps];
        const Mode m = mode(ys);
        if (m == Mode::kDirect) {
            if (first) {
                zero_floats(xs[3], scratch);
            }
            block3x3_({input, xs[3], xs[2], xs[3], p.stride_h, p.pad_h, p.pad_w, scratch, weights,
                       bias, lo, hi, out_h, out_w, y});
            return;
        }
        if (m == Mode::kBlock) {
            if (!phases.in_place) {
                phases.build(input, xs[2], xs[3], p, scratch, 0, phases.phase_h, first);
            }
            block3x3_({x, phases.phase_w, phases.phase_h, phases.phase_w, 1, 0, 0, nullptr, weights,
                       bias, lo, hi, out_h, out_w, y});
            return;
        }
        if (m == Mode::kWide) {
            if (!phases.in_place) {
                phases.build(input, xs[2], xs[3], p, scratch, 0, phases.phase_h, first);
            }
            for (int64_t t = 0; t < tap_count; ++t) {
                taps[t] = x + offsets[t];
            }
            float* wide_out = scratch + phases.channel_floats(p);
            const int64_t count = phases.wide_count(out_h, out_w);
            row_(taps, weights, tap_count, bias, lo, hi, count, wide_out);
            copy_wide_range(wide_out, 0, count, phases.phase_w, out_w, y);
            return;
        }
        // Tap t of output row oy reads phase row oy + rows[t], at ring slot
        // (oy + rows[t]) % rows_held, columns from columns[t].
        const float* columns[kMaxTaps];
        int64_t rows[kMaxTaps];
        for (int64_t t = 0; t < tap_count; ++t) {
            rows[t] = t / p.kernel_w * p.dilation_h / p.stride_h;
            columns[t] = x + offsets[t] - rows[t] * phases.phase_w;
        }
        const int64_t held = phases.rows_held;
        for (int64_t oy = 0, built = 0, slot = 0; oy < out_h; ++oy, y += out_w) {
            if (!phases.in_place) {
                const int64_t needed = oy + 1 + PhasePlanes::reach(p);
                phases.build(input, xs[2], xs[3], p, scratch, built, needed, first);
                built = needed;
            }
            for (int64_t t = 0; t < tap_count; ++t) {
                const int64_t r = slot + rows[t];
                taps[t] = columns[t] + (r < held ? r : r - held) * phases.phase_w;
            }
            row_(taps, weights, tap_count, bias, lo, hi, out_w, y);
            slot = slot + 1 < held ? slot + 1 : 0;
        }
    }

    const Float32DepthwiseRowFn row_;
    const Float32Depthwise3x3Fn block3x3_;
    const Conv2dFloat32Constants constants_;
};

}  // namespace
// AVX-512 F is all it needs; the lowest AVX-512 level this runtime detects is AVX-512 VNNI.
#if QTK_X86_AVX512_VNNI
extern const Conv2dAlgo kConv2dFloat32DepthwiseAvx512 = {
    "conv2d_float32_depthwise_avx512", IsaLevel::kAvx512Vnni, fits_depthwise,
    make_kernel<Conv2dFloat32Depthwise, kFloat32DepthwiseRowAvx512,
                kFloat32Depthwise3x3Avx512>};
#endif
#if QTK_X86_AVX2
extern const Conv2dAlgo kConv2dFloat32DepthwiseAvx2 = {
    "conv2d_float32_depthwise_avx2", IsaLevel::kAvx2, fits_depthwise,
    make_kernel<Conv2dFloat32Depthwise, kFloat32DepthwiseRowAvx2, kNoDepthwise3x3>};
#endif

}  // namespace detail
}  // namespace qtk
