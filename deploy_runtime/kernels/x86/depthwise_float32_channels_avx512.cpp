// float32 depthwise conv2d, 16 channels in the lanes, AVX-512 (depthwise_float32_channels.h): the
// band's padded input rows are transposed into a channels-last copy, each run of up to 8 output
// pixels sums its taps in 8 independent accumulators (one weight vector a tap, loaded once for
// the 8), and the outputs are transposed back into the channel planes.
#include "avx512_intrinsics.h"

#include "../contracts/depthwise_float32_channels.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kLanes = kDepthwiseFloat32Lanes;
constexpr int kPixels = 8;  // output pixels summed together

__mmask16 first_lanes(int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF)
           : count <= 0 ? __mmask16(0)
                        : __mmask16((1u << count) - 1);
}

__m512 unpacklo_pd(__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
__m512 unpackhi_pd(__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// r[i][j] -> r[j][i] for a 16 x 16 tile: pairs of rows interleaved by floats, then by pairs of
// floats, so that 128-bit lane L of u[4 i + j] holds column 4 L + j of rows 4 i .. 4 i + 3; then
// the lanes are gathered in two rounds of shuffle_f32x4.
void transpose16(__m512* r) {
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        u[4 * i] = unpacklo_pd(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = unpackhi_pd(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = unpacklo_pd(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = unpackhi_pd(t[4 * i + 1], t[4 * i + 3]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        const __m512 p0 = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 p1 = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
        const __m512 q0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 q1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
        r[j] = _mm512_shuffle_f32x4(p0, q0, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + j] = _mm512_shuffle_f32x4(p1, q1, _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + j] = _mm512_shuffle_f32x4(p0, q0, _MM_SHUFFLE(3, 1, 3, 1));
        r[12 + j] = _mm512_shuffle_f32x4(p1, q1, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

// Copy row r: padded input row stride_h first_row + r, its pad_w zero columns either side.
void copy_in(const Float32DepthwiseChannelsBand& a, float* copy) {
    const int64_t width = a.padded_w();
    const __m512 vzero = _mm512_setzero_ps();
    for (int64_t r = 0; r < a.copy_rows(); ++r) {
        float* out = copy + r * width * kLanes;
        const int64_t iy = a.stride_h * a.first_row + r - a.pad_h;
        if (iy < 0 || iy >= a.in_h) {
            for (int64_t j = 0; j < width; ++j) {
                _mm512_storeu_ps(out + j * kLanes, vzero);
            }
            continue;
        }
        for (int64_t j = 0; j < a.pad_w; ++j) {
            _mm512_storeu_ps(out + j * kLanes, vzero);
            _mm512_storeu_ps(out + (width - 1 - j) * kLanes, vzero);
        }
        const float* in = a.x + iy * a.in_w;
        for (int64_t j0 = 0; j0 < a.in_w; j0 += 16) {
            const int64_t count = a.in_w - j0 < 16 ? a.in_w - j0 : 16;
            const __mmask16 mask = first_lanes(count);
            __m512 v[16];
#pragma GCC unroll 16
            for (int c = 0; c < 16; ++c) {
                v[c] = c < a.channels ? _mm512_maskz_loadu_ps(mask, in + c * a.x_plane + j0)
                                      : vzero;
            }
            transpose16(v);
            float* column = out + (a.pad_w + j0) * kLanes;
#pragma GCC unroll 16
            for (int j = 0; j < 16; ++j) {
                if (j < count) {
                    _mm512_storeu_ps(column + j * kLanes, v[j]);
                }
            }
        }
    }
}

// Output pixels [ox, ox + P) of the band's row oy (from its first), into sums (channels-last).
template <int P>
void pixels(const Float32DepthwiseChannelsBand& a, const float* copy, int64_t oy, int64_t ox,
            __m512 vlo, __m512 vhi, float* sums) {
    const int64_t width = a.padded_w();
    __m512 vacc[P];
    const __m512 vbias = _mm512_loadu_ps(a.bias);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
        vacc[p] = vbias;
    }
    const float* weights = a.weights;
    for (int64_t ky = 0; ky < a.kernel_h; ++ky) {
        const float* row = copy + ((a.stride_h * oy + a.dilation_h * ky) * width +
                                   a.stride_w * ox) * kLanes;
        for (int64_t kx = 0; kx < a.kernel_w; ++kx, weights += kLanes) {
            const __m512 vw = _mm512_loadu_ps(weights);
            const float* x = row + a.dilation_w * kx * kLanes;
#pragma GCC unroll 8
            for (int p = 0; p < P; ++p) {
                vacc[p] = _mm512_fmadd_ps(vw, _mm512_loadu_ps(x + p * a.stride_w * kLanes),
                                          vacc[p]);
            }
        }
    }
    float* out = sums + (oy * a.out_w + ox) * kLanes;
    // max(lo, v) then min(hi, v): each returns v where v is NaN, as FloatBounds::apply does.
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
        _mm512_storeu_ps(out + p * kLanes, _mm512_min_ps(vhi, _mm512_max_ps(vlo, vacc[p])));
    }
}

void sum_rows(const Float32DepthwiseChannelsBand& a, const float* copy, float* sums) {
    const __m512 vlo = _mm512_set1_ps(a.lo), vhi = _mm512_set1_ps(a.hi);
    for (int64_t oy = 0; oy < a.rows; ++oy) {
        int64_t ox = 0;
        for (; ox + kPixels <= a.out_w; ox += kPixels) {
            pixels<kPixels>(a, copy, oy, ox, vlo, vhi, sums);
        }
        switch (a.out_w - ox) {
            case 0: break;
            case 1: pixels<1>(a, copy, oy, ox, vlo, vhi, sums); break;
            case 2: pixels<2>(a, copy, oy, ox, vlo, vhi, sums); break;
            case 3: pixels<3>(a, copy, oy, ox, vlo, vhi, sums); break;
            case 4: pixels<4>(a, copy, oy, ox, vlo, vhi, sums); break;
            case 5: pixels<5>(a, copy, oy, ox, vlo, vhi, sums); break;
            case 6: pixels<6>(a, copy, oy, ox, vlo, vhi, sums); break;
            default: pixels<7>(a, copy, oy, ox, vlo, vhi, sums); break;
        }
    }
}

// The band's outputs are one contiguous run of each channel's plane.
void copy_out(const Float32DepthwiseChannelsBand& a, const float* sums) {
    const int64_t count_all = a.rows * a.out_w;
    float* y = a.y + a.first_row * a.out_w;
    for (int64_t j0 = 0; j0 < count_all; j0 += 16) {
        const int64_t count = count_all - j0 < 16 ? count_all - j0 : 16;
        __m512 v[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) {
            v[j] = j < count ? _mm512_loadu_ps(sums + (j0 + j) * kLanes) : _mm512_setzero_ps();
        }
        transpose16(v);
        const __mmask16 mask = first_lanes(count);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c) {
            if (c < a.channels) {
                _mm512_mask_storeu_ps(y + c * a.y_plane + j0, mask, v[c]);
            }
        }
    }
}

void depthwise_channels_avx512(const Float32DepthwiseChannelsBand& a) {
    float* copy = a.scratch;
    float* sums = copy + a.copy_rows() * a.padded_w() * kLanes;
    copy_in(a, copy);
    sum_rows(a, copy, sums);
    copy_out(a, sums);
}

}  // namespace

extern const Float32DepthwiseChannelsFn kFloat32DepthwiseChannelsAvx512 =
    depthwise_channels_avx512;

}  // namespace detail
}  // namespace qtk
