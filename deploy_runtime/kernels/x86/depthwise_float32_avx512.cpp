// float32 depthwise conv2d micro-kernels, AVX-512 (depthwise_float32.h). Rows: 128 outputs per
// pass in eight accumulators, so each tap's pointer and weight are loaded once per eight vectors
// and the fused multiply-adds of a tap do not wait on each other; the last pass with only as many
// vectors as it has outputs, the last of them masked. 3x3 blocks (stride 1 or 2): 4 rows x 64
// outputs in 16 accumulators and the 9 weights in registers, the same masking.
#include "avx512_intrinsics.h"

#include "depthwise_float32.h"

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

// 3x3 at stride S, output rows [0, R) x outputs [j, j + count), 16 (V - 1) < count <= 16 V, in
// R V sums (unrolled: sums and weights stay in registers). Output row r's tap ky reads padded row
// u = S r + ky; each padded row's three column vectors are loaded once for all the sums reading
// it, and as u grows each sum still takes its taps in (ky, kx) order.
template <int S, int R, int V>
void block3x3(const float* in, int64_t in_pitch, int64_t plane, const float* weights,
              __m512 vbias, __m512 vlo, __m512 vhi, int64_t j, int64_t count, float* out,
              int64_t out_pitch) {
    const __mmask16 mask = first_lanes(count - 16 * (V - 1));
    __m512 vw[9], vacc[R][V];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) {
        vw[t] = _mm512_set1_ps(weights[t]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
            vacc[r][v] = vbias;
        }
    }
#pragma GCC unroll 9
    for (int u = 0; u < S * (R - 1) + 3; ++u) {
#pragma GCC unroll 3
        for (int kx = 0; kx < 3; ++kx) {
            // Padded row u, column kx + j: phase (u % S, kx % S), its row u / S, column kx / S + j.
            const float* x =
                in + (u % S * S + kx % S) * plane + u / S * in_pitch + kx / S + j;
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) {
                const __m512 vx = v < V - 1 ? _mm512_loadu_ps(x + 16 * v)
                                            : _mm512_maskz_loadu_ps(mask, x + 16 * v);
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
    const auto bounded = [&](__m512 v) { return _mm512_min_ps(vhi, _mm512_max_ps(vlo, v)); };
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        float* y = out + r * out_pitch + j;
#pragma GCC unroll 4
        for (int v = 0; v < V - 1; ++v) {
            _mm512_storeu_ps(y + 16 * v, bounded(vacc[r][v]));
        }
        _mm512_mask_storeu_ps(y + 16 * (V - 1), mask, bounded(vacc[r][V - 1]));
    }
}

// R rows of the block, 64 outputs at a time.
template <int S, int R>
void band3x3(const float* in, int64_t in_pitch, int64_t plane, const float* weights,
             __m512 vbias, __m512 vlo, __m512 vhi, int64_t count, float* out, int64_t out_pitch) {
    for (int64_t j = 0; j < count; j += 64) {
        const int64_t n = count - j < 64 ? count - j : 64;
        switch ((n + 15) / 16) {
            case 1:
                block3x3<S, R, 1>(in, in_pitch, plane, weights, vbias, vlo, vhi, j, n, out,
                                  out_pitch);
                break;
            case 2:
                block3x3<S, R, 2>(in, in_pitch, plane, weights, vbias, vlo, vhi, j, n, out,
                                  out_pitch);
                break;
            case 3:
                block3x3<S, R, 3>(in, in_pitch, plane, weights, vbias, vlo, vhi, j, n, out,
                                  out_pitch);
                break;
            default:
                block3x3<S, R, 4>(in, in_pitch, plane, weights, vbias, vlo, vhi, j, n, out,
                                  out_pitch);
                break;
        }
    }
}

// Bands of 4 rows, then the rest.
template <int S>
void plane3x3(const float* in, int64_t in_pitch, int64_t plane, const float* weights,
              __m512 vbias, __m512 vlo, __m512 vhi, int64_t count, int64_t rows, float* out,
              int64_t out_pitch) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        band3x3<S, 4>(in + r * in_pitch, in_pitch, plane, weights, vbias, vlo, vhi, count,
                      out + r * out_pitch, out_pitch);
    }
    const float* x = in + r * in_pitch;
    float* y = out + r * out_pitch;
    switch (rows - r) {
        case 1:
            band3x3<S, 1>(x, in_pitch, plane, weights, vbias, vlo, vhi, count, y, out_pitch);
            break;
        case 2:
            band3x3<S, 2>(x, in_pitch, plane, weights, vbias, vlo, vhi, count, y, out_pitch);
            break;
        case 3:
            band3x3<S, 3>(x, in_pitch, plane, weights, vbias, vlo, vhi, count, y, out_pitch);
            break;
        default:
            break;  // none left
    }
}

void depthwise3x3_avx512(const float* in, int64_t in_pitch, int64_t plane, int64_t stride,
                         const float* weights, float bias, float lo, float hi, int64_t count,
                         int64_t rows, float* out, int64_t out_pitch) {
    const __m512 vbias = _mm512_set1_ps(bias);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    if (stride == 1) {
        plane3x3<1>(in, in_pitch, plane, weights, vbias, vlo, vhi, count, rows, out, out_pitch);
    } else {
        plane3x3<2>(in, in_pitch, plane, weights, vbias, vlo, vhi, count, rows, out, out_pitch);
    }
}

}  // namespace

extern const Float32DepthwiseRowFn kFloat32DepthwiseRowAvx512 = depthwise_row_avx512;
extern const Float32Depthwise3x3Fn kFloat32Depthwise3x3Avx512 = depthwise3x3_avx512;

}  // namespace detail
}  // namespace qtk
