// The phase planes of the float convs (conv2d_float32_gemm.cpp, conv2d_float32_depthwise.cpp):
// each input channel plane, zero-padded, split into stride_h x stride_w phases, phase (py, px)
// holding the padded rows py + stride_h r and columns px + stride_w m. Tap (ky, kx) of output
// (oy, ox) reads phase ((ky dil_h) % stride_h, (kx dil_w) % stride_w) at row
// oy + ky dil_h / stride_h, column ox + kx dil_w / stride_w. So in "wide" order, output (oy, ox)
// at oy phase_w + ox, every tap reads one contiguous run of its phase for all outputs of a plane:
// the kernels take their operands in place, with no im2col copy and no bounds checks. Wide order
// has phase_w - out_w columns past each output row, computed and then dropped (copy_wide_range).
//
// A conv with stride 1 and no padding reads its input planes themselves (in_place): phase_w is the
// input width. Built with the baseline flags.
#pragma once

#include <algorithm>
#include <cstring>

#include "conv2d.h"

namespace qtk {
namespace detail {

struct PhasePlanes {
    int64_t phase_h, phase_w;  // the output's rows and columns, plus the window's reach past them
    bool in_place;             // stride 1, no padding: the input planes are the one phase
    // Rows kept per phase: all, or in a ring only those that one output row reads (phase row r
    // at r % rows_held), for a kernel that builds each just before the first output row reading it.
    int64_t rows_held;

    PhasePlanes(const Conv2dParams& p, int64_t out_h, int64_t out_w, bool ring = false)
        : phase_h(out_h + reach(p)),
          phase_w(out_w + (p.kernel_w - 1) * p.dilation_w / p.stride_w),
          in_place(p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0),
          rows_held(ring && !in_place ? std::min(phase_h, reach(p) + 1) : phase_h) {}

    // The phase rows one output row reads past its first.
    static int64_t reach(const Conv2dParams& p) {
        return (p.kernel_h - 1) * p.dilation_h / p.stride_h;
    }
    int64_t phase_floats() const { return rows_held * phase_w; }
    // One channel's phases; 0 in place (nothing is built).
    int64_t channel_floats(const Conv2dParams& p) const {
        return in_place ? 0 : p.stride_h * p.stride_w * phase_floats();
    }
    // A channel's stride in what the kernels read: its phases, or in place its input plane.
    int64_t channel_stride(const Conv2dParams& p) const {
        return in_place ? phase_floats() : channel_floats(p);
    }
    // Where tap (ky, kx) reads output 0's input, from its channel's first phase.
    int64_t tap_offset(const Conv2dParams& p, int64_t ky, int64_t kx) const {
        const int64_t dy = ky * p.dilation_h, dx = kx * p.dilation_w;
        return (dy % p.stride_h * p.stride_w + dx % p.stride_w) * phase_floats() +
               dy / p.stride_h * phase_w + dx / p.stride_w;
    }
    // Outputs of a plane in wide order, from the first to the last real one.
    int64_t wide_count(int64_t out_h, int64_t out_w) const { return (out_h - 1) * phase_w + out_w; }

    // Rows [row_begin, row_end) of every phase of one input plane x (height x width) into dst
    // (channel_floats(p) floats). Phases that no tap reads (a 1x1 conv's stride 2) are left
    // unwritten.
    void build(const float* x, int64_t height, int64_t width, const Conv2dParams& p, float* dst,
               int64_t row_begin, int64_t row_end) const {
        for (int64_t py = 0; py < p.stride_h; ++py) {
            for (int64_t px = 0; px < p.stride_w; ++px, dst += phase_floats()) {
                if ((py > 0 && !read_by_a_tap(py, p.stride_h, p.kernel_h, p.dilation_h)) ||
                    (px > 0 && !read_by_a_tap(px, p.stride_w, p.kernel_w, p.dilation_w))) {
                    continue;  // (phase 0 is always read: by tap 0)
                }
                // Phase column m reads input column px + stride_w m - pad_w: inside for m in
                // [first, end).
                const int64_t first =
                    std::clamp<int64_t>(ceil_div(p.pad_w - px, p.stride_w), 0, phase_w);
                const int64_t end =
                    std::max(first, std::min(phase_w, ceil_div(p.pad_w + width - px, p.stride_w)));
                for (int64_t r = row_begin; r < row_end; ++r) {
                    float* row = dst + (r < rows_held ? r : r % rows_held) * phase_w;
                    const int64_t iy = py + p.stride_h * r - p.pad_h;
                    if (iy < 0 || iy >= height || first == end) {
                        std::fill_n(row, phase_w, 0.0f);
                        continue;
                    }
                    const float* src = x + iy * width + px + p.stride_w * first - p.pad_w;
                    std::fill_n(row, first, 0.0f);
                    if (p.stride_w == 1) {
                        std::memcpy(row + first, src, size_t(end - first) * sizeof(float));
                    } else {
                        for (int64_t m = first; m < end; ++m) {
                            row[m] = src[(m - first) * p.stride_w];
                        }
                    }
                    std::fill_n(row + end, phase_w - end, 0.0f);
                }
            }
        }
    }

 private:
    // Rounded up for any sign; no division at stride 1 (a depthwise builds once per plane or row).
    static int64_t ceil_div(int64_t a, int64_t b) {
        return b == 1 ? a : a <= 0 ? -(-a / b) : (a + b - 1) / b;
    }
    static bool read_by_a_tap(int64_t phase, int64_t stride, int64_t kernel, int64_t dilation) {
        for (int64_t k = 0; k < kernel; ++k) {
            if (k * dilation % stride == phase) {
                return true;
            }
        }
        return false;
    }
};

// Wide outputs [begin, begin + count) of one plane, wide[0] being output `begin`, into the plane
// y (out_w columns a row): the real ones, those in columns below out_w.
inline void copy_wide_range(const float* wide, int64_t begin, int64_t count, int64_t phase_w,
                            int64_t out_w, float* y) {
    const int64_t end = begin + count;
    for (int64_t oy = begin / phase_w, row = oy * phase_w; row < end; ++oy, row += phase_w) {
        const int64_t first = std::max(begin, row), last = std::min(end, row + out_w);
        if (first < last) {
            std::memcpy(y + oy * out_w + (first - row), wide + (first - begin),
                        size_t(last - first) * sizeof(float));
        }
    }
}

}  // namespace detail
}  // namespace qtk
