// float32 depthwise conv2d micro-kernels, AVX-512 (depthwise_float32.h). Rows: 128 outputs per
// pass in eight accumulators, so each tap's pointer and weight are loaded once per eight vectors
// and the fused multiply-adds of a tap do not wait on each other; the last pass with only as many
// vectors as it has outputs, the last of them masked. 3x3 blocks: 4 rows x 64 outputs in 16
// accumulators and the 9 weights in registers, the same masking; at stride 2 each row's columns
// split into even and odd ones in registers, once for its three taps (SplitColumns: a permute per
// tap from two loads of its own took 1.4x the time at 112x112, and 32 outputs a block 1.1x; Zen 4).
#include "avx512_intrinsics.h"

#include "../contracts/depthwise_float32.h"

namespace qtk {
namespace detail {
namespace {

__mmask16 first_lanes(int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF)
           : count <= 0 ? __mmask16(0)
                        : __mmask16((1u << count) - 1);
}

// Outputs [j, j + count), 16 (V - 1) < count <= 16 V, in V independent sums (unrolled, so that
// they stay in registers); only the last vector is masked.
template <int V>
void pass(const float* const* rows, const float* weights, int64_t taps, __m512 vbias, __m512 vlo,
          __m512 vhi, int64_t j, int64_t count, float* out) {
    const __mmask16 mask = first_lanes(count - 16 * (V - 1));
    __m512 vacc[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
        vacc[v] = vbias;
    }
    for (int64_t t = 0; t < taps; ++t) {
        const __m512 vw = _mm512_set1_ps(weights[t]);
        const float* x = rows[t] + j;
#pragma GCC unroll 8
        for (int v = 0; v < V - 1; ++v) {
            vacc[v] = _mm512_fmadd_ps(vw, _mm512_loadu_ps(x + 16 * v), vacc[v]);
        }
        vacc[V - 1] =
            _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(mask, x + 16 * (V - 1)), vacc[V - 1]);
    }
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
    const auto bounded = [&](__m512 v) { return _mm512_min_ps(vhi, _mm512_max_ps(vlo, v)); };
#pragma GCC unroll 8
    for (int v = 0; v < V - 1; ++v) {
        _mm512_storeu_ps(out + j + 16 * v, bounded(vacc[v]));
    }
    _mm512_mask_storeu_ps(out + j + 16 * (V - 1), mask, bounded(vacc[V - 1]));
}

void depthwise_row_avx512(const float* const* rows, const float* weights, int64_t taps, float bias,
                          float lo, float hi, int64_t count, float* out) {
    const __m512 vbias = _mm512_set1_ps(bias);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    int64_t j = 0;
    for (; j + 128 <= count; j += 128) {
        pass<8>(rows, weights, taps, vbias, vlo, vhi, j, 128, out);
    }
    const int64_t left = count - j;
    switch ((left + 15) / 16) {
        case 0: break;
        case 1: pass<1>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 2: pass<2>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 3: pass<3>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 4: pass<4>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 5: pass<5>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 6: pass<6>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        case 7: pass<7>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
        default: pass<8>(rows, weights, taps, vbias, vlo, vhi, j, left, out); break;
    }
}

// Lanes i with 0 <= c + i < width: the columns of a load at column c that lie in the row.
__mmask16 inside(int64_t c, int64_t width) {
    return __mmask16(first_lanes(width - c) & ~first_lanes(-c));
}

// Stride 2: tap kx of outputs j + i reads input column c + 2 i + kx, c = 2 j - pad_w. Each row's
// 32 columns from c + 32 v are loaded once (two loads) and split by two permutes into the even
// columns, tap 0's, and the odd, tap 1's; tap 2's, the even ones a column on, are the even vector
// moved down a lane with the next one's first (the next vector's, or the last one's column
// c + 32 V, loaded alone). Which lanes lie in the row is worked out once per block, so that the
// unrolled loop holds no branch (branches there grew the kernel past the instruction cache: 2.4x
// the time on Zen 4). Left of the row (c < 0, pad_w <= 2: the first vector's low half) columns 0
// on move up by pad_w lanes, so that no address before the row is formed.
template <int S, int V, bool kLeft>
struct SplitColumns {
    int64_t c;
    __mmask16 in_row[V][2];  // [vector][low or high 16 columns]
    __mmask16 next_in_row;   // column c + 32 V
    // kLeft: the first vector starts left of the row. Its lanes in the row, the row's first 16
    // columns' lanes, and lane i <- column i - pad_w.
    __mmask16 left_lanes = 0, row_lanes = 0;
    __m512i left_shift;

    SplitColumns(int64_t j, int64_t pad_w, int64_t width) : c(2 * j - pad_w) {
        for (int v = 0; v < V; ++v) {
            in_row[v][0] = inside(c + 32 * v, width);
            in_row[v][1] = inside(c + 32 * v + 16, width);
        }
        next_in_row = inside(c + 32 * V, width) & 1;
        if constexpr (kLeft) {
            left_lanes = in_row[0][0];
            row_lanes = inside(0, width);
            const __m512i lane =
                _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
            left_shift = _mm512_sub_epi32(lane, _mm512_set1_epi32(int32_t(pad_w)));
        }
    }

    // taps[v][kx]: the 16 columns that tap kx of vector v's outputs reads in `row`.
    [[gnu::always_inline]] inline void load(const float* row, __m512i even, __m512i odd,
                                             __m512 taps[V][3]) const {
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
            const __m512 low = kLeft && v == 0
                                   ? _mm512_maskz_permutexvar_ps(
                                         left_lanes, left_shift,
                                         _mm512_maskz_loadu_ps(row_lanes, row))
                                   : _mm512_maskz_loadu_ps(in_row[v][0], row + (c + 32 * v));
            const __m512 high = _mm512_maskz_loadu_ps(in_row[v][1], row + (c + 32 * v + 16));
            taps[v][0] = _mm512_permutex2var_ps(low, even, high);
            taps[v][1] = _mm512_permutex2var_ps(low, odd, high);
        }
        const __m512 next = _mm512_maskz_loadu_ps(next_in_row, row + c + 32 * V);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
            const __m512 after = v + 1 < V ? taps[v + 1][0] : next;
            taps[v][2] = _mm512_castsi512_ps(_mm512_alignr_epi32(
                _mm512_castps_si512(after), _mm512_castps_si512(taps[v][0]), 1));
        }
    }
};

template <int V, bool kLeft>
struct SplitColumns<1, V, kLeft> {  // stride 1: the rows are read as they lie
    SplitColumns(int64_t, int64_t, int64_t) {}
};

// The block kernel's per-call constants, in registers.
struct Block3x3 {
    const Float32Depthwise3x3Args& a;
    __m512 vbias, vlo, vhi;
    __m512i even, odd;  // lanes 0, 2, .., 30 and 1, 3, .., 31 of two vectors
};

// 3x3 at stride S, output rows [0, R) x outputs [j, j + count), 16 (V - 1) < count <= 16 V, in
// R V sums (unrolled: sums and weights in registers, a few spilled at stride 2 with 64 outputs,
// which still beat 32 by 1.1x). Output row r's tap ky reads padded row
// u = S r + ky, held by rows[u]; each padded row's three column vectors are loaded once for all
// the sums reading it, and as u grows each sum still takes its taps in (ky, kx) order. P: the
// columns of padding left of column 0 (stride 1 only), read as zeros by masks (right of the last
// one too); `last`: the row's last outputs. At stride 2 the rows are the input's own, split by
// SplitColumns.
template <int S, int P, int R, int V, bool kLeft>
void block3x3(const Block3x3& b, const float* const* rows, int64_t j, int64_t count, bool last,
              float* out) {
    const __mmask16 mask = first_lanes(count - 16 * (V - 1));
    // Padding: tap kx = 2 of the row's last output reads column width, right of the input.
    const __mmask16 mask_right = P > 0 && last ? first_lanes(count - 16 * (V - 1) - 1) : mask;
    const SplitColumns<S, V, kLeft> split(j, b.a.pad_w, b.a.width);
    __m512 vw[9], vacc[R][V];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) {
        vw[t] = _mm512_set1_ps(b.a.weights[t]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
            vacc[r][v] = b.vbias;
        }
    }
#pragma GCC unroll 9
    for (int u = 0; u < S * (R - 1) + 3; ++u) {
        const float* row = rows[u];
        [[maybe_unused]] __m512 taps[V][3];  // stride 2: this row's columns, per tap
        if constexpr (S == 2) {
            split.load(row, b.even, b.odd, taps);
        }
#pragma GCC unroll 3
        for (int kx = 0; kx < 3; ++kx) {
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) {
                __m512 vx;
                if constexpr (S == 2) {
                    vx = taps[v][kx];
                } else if (P > 0 && kx == 0 && v == 0 && j == 0) {
                    // Columns -1 .. 14: 0 .. 14 loaded into lanes 1 .. 15, zero in lane 0.
                    const __mmask16 m = first_lanes((V == 1 ? count : 16) - 1);
                    vx = _mm512_castsi512_ps(_mm512_alignr_epi32(
                        _mm512_castps_si512(_mm512_maskz_loadu_ps(m, row)),
                        _mm512_setzero_si512(), 15));
                } else {  // padded column j + kx, P left of the input's
                    const float* x = row + j + kx - P + 16 * v;
                    vx = v < V - 1 ? _mm512_loadu_ps(x)
                                   : _mm512_maskz_loadu_ps(kx == 2 ? mask_right : mask, x);
                }
#pragma GCC unroll 3
                for (int ky = 2; ky >= 0; --ky) {  // r = (u - ky) / S: the lowest row first
                    const int r = (u - ky) / S;
                    if (u >= ky && (u - ky) % S == 0 && r < R) {
                        vacc[r][v] = _mm512_fmadd_ps(vw[3 * ky + kx], vx, vacc[r][v]);
                    }
                }
            }
        }
    }
    const auto bounded = [&](__m512 v) { return _mm512_min_ps(b.vhi, _mm512_max_ps(b.vlo, v)); };
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        float* y = out + r * b.a.out_w + j;
#pragma GCC unroll 4
        for (int v = 0; v < V - 1; ++v) {
            _mm512_storeu_ps(y + 16 * v, bounded(vacc[r][v]));
        }
        _mm512_mask_storeu_ps(y + 16 * (V - 1), mask, bounded(vacc[r][V - 1]));
    }
}

// block3x3 for n outputs, 64 at most.
template <int S, int P, int R, bool kLeft>
void block3x3_columns(const Block3x3& b, const float* const* rows, int64_t j, int64_t n, bool last,
                      float* out) {
    switch ((n + 15) / 16) {
        case 1: block3x3<S, P, R, 1, kLeft>(b, rows, j, n, last, out); break;
        case 2: block3x3<S, P, R, 2, kLeft>(b, rows, j, n, last, out); break;
        case 3: block3x3<S, P, R, 3, kLeft>(b, rows, j, n, last, out); break;
        default: block3x3<S, P, R, 4, kLeft>(b, rows, j, n, last, out); break;
    }
}

// Output rows [r0, r0 + R), 64 outputs at a time: the rows they read, a zero row for padding.
template <int S, int P, int R>
void band3x3(const Block3x3& b, int64_t r0) {
    const Float32Depthwise3x3Args& a = b.a;
    const float* rows[S * (R - 1) + 3];
#pragma GCC unroll 9
    for (int u = 0; u < S * (R - 1) + 3; ++u) {
        const int64_t row = S * r0 + u - a.pad_h;
        rows[u] = row >= 0 && row < a.height ? a.in + row * a.in_pitch : a.zeros;
    }
    float* out = a.out + r0 * a.out_w;
    for (int64_t j = 0; j < a.out_w; j += 64) {
        const int64_t n = a.out_w - j < 64 ? a.out_w - j : 64;
        const bool last = j + n == a.out_w;
        bool left = false;  // (stride 1 reads its left padding by masks of its own)
        if constexpr (S == 2) {
            left = j == 0 && a.pad_w > 0;
        }
        if (left) {
            block3x3_columns<S, P, R, S == 2>(b, rows, j, n, last, out);
        } else {
            block3x3_columns<S, P, R, false>(b, rows, j, n, last, out);
        }
    }
}

// Bands of 4 rows, then the rest.
template <int S, int P>
void plane3x3(const Block3x3& b) {
    int64_t r = 0;
    for (; r + 4 <= b.a.out_h; r += 4) {
        band3x3<S, P, 4>(b, r);
    }
    switch (b.a.out_h - r) {
        case 1: band3x3<S, P, 1>(b, r); break;
        case 2: band3x3<S, P, 2>(b, r); break;
        case 3: band3x3<S, P, 3>(b, r); break;
        default: break;  // none left
    }
}

void depthwise3x3_avx512(const Float32Depthwise3x3Args& a) {
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const Block3x3 b{a,    _mm512_set1_ps(a.bias), _mm512_set1_ps(a.lo), _mm512_set1_ps(a.hi),
                     even, _mm512_add_epi32(even, _mm512_set1_epi32(1))};
    if (a.stride == 2) {
        plane3x3<2, 0>(b);
    } else if (a.pad_w == 1) {
        plane3x3<1, 1>(b);
    } else {
        plane3x3<1, 0>(b);
    }
}

}  // namespace

extern const Float32DepthwiseRowFn kFloat32DepthwiseRowAvx512 = depthwise_row_avx512;
extern const Float32Depthwise3x3Fn kFloat32Depthwise3x3Avx512 = depthwise3x3_avx512;

}  // namespace detail
}  // namespace qtk
