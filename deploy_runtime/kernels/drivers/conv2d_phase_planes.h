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
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "conv2d.h"

namespace qtk {
namespace detail {

// n floats from src to dst, inline: a libc call costs more than a 7x7 or 14x14 plane's row.
inline void copy_floats(const float* src, int64_t n, float* dst) {
#if defined(__SSE2__)
    if (n >= 4) {
        for (int64_t i = 0; i + 4 < n; i += 4) {
            _mm_storeu_ps(dst + i, _mm_loadu_ps(src + i));
        }
        _mm_storeu_ps(dst + n - 4, _mm_loadu_ps(src + n - 4));  // the last 4, overlapping
        return;
    }
#endif
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = src[i];
    }
}

// n zeros at dst, inline (copy_floats).
inline void zero_floats(int64_t n, float* dst) {
#if defined(__SSE2__)
    if (n >= 4) {
        for (int64_t i = 0; i + 4 < n; i += 4) {
            _mm_storeu_ps(dst + i, _mm_setzero_ps());
        }
        _mm_storeu_ps(dst + n - 4, _mm_setzero_ps());
        return;
    }
#endif
    std::fill_n(dst, n, 0.0f);
}

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
    // (channel_floats(p) floats). Rows of phases that no tap reads (a 1x1 conv's stride 2) may be
    // left unwritten. Without `zeros`, the padding columns beside the input's are not written: for
    // a dst whose rows still hold those of an earlier build (padding rows are always zeroed).
    void build(const float* x, int64_t height, int64_t width, const Conv2dParams& p, float* dst,
               int64_t row_begin, int64_t row_end, bool zeros = true) const {
        const Columns evens(0, p.pad_w, width, p.stride_w, phase_w);  // stride 1: all columns
        const Columns odds(1, p.pad_w, width, p.stride_w, phase_w);   // stride 2
        for (int64_t py = 0; py < p.stride_h; ++py) {
            if (py > 0 && !read_by_a_tap(py, p.stride_h, p.kernel_h, p.dilation_h)) {
                continue;  // (phase row 0 is always read: by tap 0)
            }
            float* phases = dst + py * p.stride_w * phase_floats();
            for (int64_t r = row_begin; r < row_end; ++r) {
                float* rows = phases + (r < rows_held ? r : r % rows_held) * phase_w;
                const int64_t iy = py + p.stride_h * r - p.pad_h;
                if (iy < 0 || iy >= height) {
                    for (int64_t px = 0; px < p.stride_w; ++px) {
                        zero_floats(phase_w, rows + px * phase_floats());
                    }
                    continue;
                }
                const float* src = x + iy * width;
                if (p.stride_w > 2) {
                    gather(src, width, p.pad_w, p.stride_w, rows);
                    continue;
                }
                if (zeros) {
                    evens.zero_around(rows + evens.phase * phase_floats(), phase_w);
                    if (p.stride_w == 2) {
                        odds.zero_around(rows + odds.phase * phase_floats(), phase_w);
                    }
                }
                if (p.stride_w == 1) {
                    copy_floats(src, evens.count, rows + evens.first);
                } else {
                    deinterleave(src, evens.count, odds.count,
                                 rows + evens.phase * phase_floats() + evens.first,
                                 rows + odds.phase * phase_floats() + odds.first);
                }
            }
        }
    }

 private:
    // Where the input columns q, q + stride_w, q + 2 stride_w, ... of a row land, the same for
    // every row: padded column pad_w + c is in phase (pad_w + c) % stride_w, column
    // (pad_w + c) / stride_w. So they fill phase `phase`'s row from column `first`, `count` of
    // them, zeros around (at stride 2, q = 0 and 1: the even and the odd columns).
    struct Columns {
        int64_t phase, first, count;

        Columns(int64_t q, int64_t pad_w, int64_t width, int64_t stride_w, int64_t phase_w)
            : phase((pad_w + q) % stride_w),
              first(std::min((pad_w + q) / stride_w, phase_w)),
              count(std::max<int64_t>(
                  0, std::min((width - q + stride_w - 1) / stride_w, phase_w - first))) {}

        void zero_around(float* row, int64_t phase_w) const {
            std::fill_n(row, first, 0.0f);
            std::fill_n(row + first + count, phase_w - first - count, 0.0f);
        }
    };

    // A row at any other stride (the GEMM conv's), each phase's columns one at a time.
    void gather(const float* src, int64_t width, int64_t pad_w, int64_t stride_w,
                float* rows) const {
        for (int64_t q = 0; q < stride_w; ++q) {
            const Columns columns(q, pad_w, width, stride_w, phase_w);
            float* row = rows + columns.phase * phase_floats();
            columns.zero_around(row, phase_w);
            for (int64_t m = 0; m < columns.count; ++m) {
                row[columns.first + m] = src[q + stride_w * m];
            }
        }
    }

    // evens[m] = src[2 m] for m < even_count, odds[m] = src[2 m + 1] for m < odd_count: the two
    // column phases of a stride-2 row in one pass. Reads src only up to the last column either
    // holds (the last row of a plane may end its buffer).
    static void deinterleave(const float* src, int64_t even_count, int64_t odd_count,
                             float* evens, float* odds) {
        int64_t i = 0;
#if defined(__SSE2__)
        // 8 input columns a step, the last step overlapping the one before: the last odd column
        // read is 2 i + 7 < 2 odd_count.
        const int64_t both = std::min(even_count, odd_count);
        const auto step = [&](int64_t at) {
            const __m128 vlo = _mm_loadu_ps(src + 2 * at), vhi = _mm_loadu_ps(src + 2 * at + 4);
            _mm_storeu_ps(evens + at, _mm_shuffle_ps(vlo, vhi, _MM_SHUFFLE(2, 0, 2, 0)));
            _mm_storeu_ps(odds + at, _mm_shuffle_ps(vlo, vhi, _MM_SHUFFLE(3, 1, 3, 1)));
        };
        if (both >= 4) {
            for (; i + 4 < both; i += 4) {
                step(i);
            }
            step(both - 4);
            i = both;
        }
#endif
        for (int64_t m = i; m < even_count; ++m) {
            evens[m] = src[2 * m];
        }
        for (int64_t m = i; m < odd_count; ++m) {
            odds[m] = src[2 * m + 1];
        }
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
            copy_floats(wide + (first - begin), last - first, y + oy * out_w + (first - row));
        }
    }
}

}  // namespace detail
}  // namespace qtk
