// int8 GEMM micro-kernels, AVX-512 VNNI (gemm_int8.h): 8 output channels x 32 pixels, and the
// channels-last 12 pixels x 32 channels and 24 x 16. vpdpbusd multiplies 4 uint8 activations by 4
// int8 weights and adds the 4 products to an int32 lane without saturation, so the sum is exact.
#include <cstring>
#include <utility>

#include "../contracts/gemm_int8.h"
#include "requantize_int8_avx512.h"

namespace qtk {
namespace detail {
namespace {

void int8_gemm_8x32c4_avx512_vnni(const int8_t* a, const Int8GemmB& b, int32_t* c,
                                  int64_t c_stride) {
    __m512i vacc[8][2];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
        vacc[r][0] = vacc[r][1] = _mm512_setzero_si512();
    }
    const auto multiply_quad = [&](const uint8_t* quad) {
        const __m512i vb0 = _mm512_loadu_si512(quad);
        const __m512i vb1 = _mm512_loadu_si512(quad + 64);
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            int32_t w;
            std::memcpy(&w, a + 4 * r, 4);
            const __m512i vw = _mm512_set1_epi32(w);
            vacc[r][0] = _mm512_dpbusd_epi32(vacc[r][0], vb0, vw);
            vacc[r][1] = _mm512_dpbusd_epi32(vacc[r][1], vb1, vw);
        }
        a += 8 * 4;
    };
    walk_quads(b, multiply_quad);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
        _mm512_storeu_si512(c + c_stride * r, vacc[r][0]);
        _mm512_storeu_si512(c + c_stride * r + 16, vacc[r][1]);
    }
}

// Weight blocks (16 quads each) ahead of the one read that each step prefetches into L2: a
// network's weights come from L3 on a layer's first tile of pixels, where the hardware prefetcher
// alone held resnet18's 3x3 layers of 512 channels (2.4 MB of weights each) at 60% of the VNNI
// peak in the network and 99% alone (Zen 5, 1 thread); 8 blocks ahead: resnet18 4.4 -> 4.0 ms.
constexpr int64_t kWeightBlocksAhead = 8;

// The channels-last forms: MR pixels x 16 NV output channels, 12 x 32 and, for layers of 16
// channels or fewer (where the wide tile multiplies and requantizes zeros in half its lanes),
// 24 x 16. The weights are the int8 operand (NV vectors per quad); each pixel's quad of
// activations, already uint8 (x + 128: the driver flipped their sign bits as it copied them), is
// the broadcast one, broadcast straight from memory (gcc emits vpbroadcastd from memory, a load,
// no shuffle): broadcasting from a general register instead cost a shuffle per pixel and quad and
// held the kernel near half of the peak. Not
// inlined into the requantizing form below (see there), whose sums start from its blocks' offsets
// (`start`; else from zero): an add per vector less in its epilogue.
template <int MR, int NV>
[[gnu::noinline]] void int8_gemm_nhwc_avx512_vnni(const int8_t* x, int64_t x_stride,
                                                  const int64_t* tap_offsets, int64_t taps,
                                                  int64_t quads, const int8_t* w, int32_t* c,
                                                  int64_t c_stride,
                                                  const Int8HighHalfBlock* start) {
    __m512i vstart[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
        vstart[v] = start == nullptr ? _mm512_setzero_si512() : _mm512_loadu_si512(start[v].offset);
    }
    __m512i vacc[MR][NV];
#pragma GCC unroll 24
    for (int p = 0; p < MR; ++p) {
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) {
            vacc[p][v] = vstart[v];
        }
    }
    const int64_t tap_bytes = (quads + 15) / 16 * NV * 16 * 64;
    for (int64_t t = 0; t < taps; ++t, w += tap_bytes) {
        const int8_t* xt = x + tap_offsets[t];
        for (int64_t q = 0; q < quads; ++q, xt += 4) {
            const int8_t* wq = w + (q / 16 * NV * 16 + q % 16) * 64;  // vector v: 16 v rows on
            __m512i vw[NV];
#pragma GCC unroll 2
            for (int v = 0; v < NV; ++v) {
                vw[v] = _mm512_loadu_si512(wq + v * 16 * 64);
                _mm_prefetch(reinterpret_cast<const char*>(wq + v * 16 * 64 +
                                                           kWeightBlocksAhead * NV * 16 * 64),
                             _MM_HINT_T1);
            }
#pragma GCC unroll 24
            for (int p = 0; p < MR; ++p) {
                int32_t u;
                std::memcpy(&u, xt + p * x_stride, 4);
                const __m512i vu = _mm512_set1_epi32(u);
#pragma GCC unroll 2
                for (int v = 0; v < NV; ++v) {
                    vacc[p][v] = _mm512_dpbusd_epi32(vacc[p][v], vu, vw[v]);
                }
            }
        }
    }
#pragma GCC unroll 24
    for (int p = 0; p < MR; ++p) {
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) {
            _mm512_storeu_si512(c + c_stride * p + 16 * v, vacc[p][v]);
        }
    }
}

// The same sums requantized (by sign with kBySign: a value below zero by negative_blocks'
// constants, blended in per lane): four vectors (4 / NV pixels) narrowed together by int8_pack4x16,
// whose interleaving one permute puts back in order (dword 4 L + j of the packed bytes is vector
// j's dword L), then stored 16 NV bytes a pixel. The sums pass through a tile on the stack on
// purpose: beside 24 accumulators the constants had no registers, and reloading 5 of them per
// vector made the loads (one 64-byte vector a cycle on Zen 4) the bottleneck: K = 16 ran 16%
// slower.
template <int MR, int NV, bool kBySign>
void int8_gemm_nhwc_requantized_avx512_vnni(const int8_t* x, int64_t x_stride,
                                            const int64_t* tap_offsets, int64_t taps,
                                            int64_t quads, const int8_t* w,
                                            const Int8HighHalfBlock* blocks,
                                            const Int8HighHalfBlock* negative_blocks,
                                            const Int8Output& out, int64_t channels, int8_t* y,
                                            int64_t y_stride) {
    constexpr int kPixels = 4 / NV;  // per pack
    alignas(64) int32_t c[MR][16 * NV];
    int8_gemm_nhwc_avx512_vnni<MR, NV>(x, x_stride, tap_offsets, taps, quads, w, c[0], 16 * NV,
                                       blocks);
    Int8HighHalf16 vparams[NV], vnegative[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
        vparams[v] = int8_high_half16(blocks[v], out);
        if constexpr (kBySign) {
            vnegative[v] = int8_high_half16(negative_blocks[v], out);
        }
    }
    const __m512i vorder = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i vlo = _mm512_set1_epi8(static_cast<char>(out.lo));
    const __m512i vhi = _mm512_set1_epi8(static_cast<char>(out.hi));
    const __mmask32 mask = channels >= 32 ? ~__mmask32(0) : (__mmask32(1) << channels) - 1;
    // Vector i of a pack: pixel p + i / NV (a tile's last pixel repeated past MR).
    const auto scale = [&](int p, int i) {
        const int pixel = p + i / NV < MR ? p + i / NV : MR - 1, v = i % NV;
        const __m512i vacc = _mm512_load_si512(c[pixel] + 16 * v);
        if constexpr (kBySign) {
            const __mmask16 negative = _mm512_cmplt_epi32_mask(vacc, _mm512_setzero_si512());
            return int8_scale16_high_half(
                vacc, int8_high_half16_by_sign(negative, vparams[v], vnegative[v]));
        }
        return int8_scale16_high_half(vacc, vparams[v]);
    };
#pragma GCC unroll 6
    for (int p = 0; p < MR; p += kPixels) {
        const __m512i vpacked = int8_pack4x16(scale(p, 0), scale(p, 1), scale(p, 2), scale(p, 3));
        const __m512i vy = _mm512_min_epi8(
            _mm512_max_epi8(_mm512_permutexvar_epi32(vorder, vpacked), vlo), vhi);
        if constexpr (NV == 2) {
            _mm256_mask_storeu_epi8(y + p * y_stride, mask, _mm512_castsi512_si256(vy));
            if (p + 1 < MR) {
                _mm256_mask_storeu_epi8(y + (p + 1) * y_stride, mask,
                                        _mm512_extracti64x4_epi64(vy, 1));
            }
        } else {
            const __mmask16 mask16 = __mmask16(mask);
            _mm_mask_storeu_epi8(y + p * y_stride, mask16, _mm512_castsi512_si128(vy));
            if (p + 1 < MR) {
                _mm_mask_storeu_epi8(y + (p + 1) * y_stride, mask16,
                                     _mm512_extracti32x4_epi32(vy, 1));
            }
            if (p + 2 < MR) {
                _mm_mask_storeu_epi8(y + (p + 2) * y_stride, mask16,
                                     _mm512_extracti32x4_epi32(vy, 2));
            }
            if (p + 3 < MR) {
                _mm_mask_storeu_epi8(y + (p + 3) * y_stride, mask16,
                                     _mm512_extracti32x4_epi32(vy, 3));
            }
        }
    }
}

// A tile of fewer pixels (a layer's last; 7x7 layers have 49 = 4 x 12 + 1) runs a kernel of its
// own size rather than MR rows of which most are dropped.
template <int NV, int... MR>
void nhwc_pixels_avx512_vnni(std::integer_sequence<int, MR...>, int64_t pixels,
                                const int8_t* x, int64_t x_stride, const int64_t* tap_offsets,
                                int64_t taps, int64_t quads, const int8_t* w, int32_t* c,
                                int64_t c_stride) {
    using Kernel = void (*)(const int8_t*, int64_t, const int64_t*, int64_t, int64_t,
                            const int8_t*, int32_t*, int64_t, const Int8HighHalfBlock*);
    static constexpr Kernel kKernels[] = {int8_gemm_nhwc_avx512_vnni<MR + 1, NV>...};
    kKernels[pixels - 1](x, x_stride, tap_offsets, taps, quads, w, c, c_stride, nullptr);
}

template <int MR, int NV>
void nhwc_avx512_vnni(int64_t pixels, const int8_t* x, int64_t x_stride,
                                const int64_t* tap_offsets, int64_t taps, int64_t quads,
                                const int8_t* w, int32_t* c, int64_t c_stride) {
    nhwc_pixels_avx512_vnni<NV>(std::make_integer_sequence<int, MR>(), pixels, x, x_stride,
                                tap_offsets, taps, quads, w, c, c_stride);
}

template <int NV, bool kBySign, int... MR>
void nhwc_requantized_pixels_avx512_vnni(std::integer_sequence<int, MR...>, int64_t pixels,
                                         const int8_t* x, int64_t x_stride,
                                         const int64_t* tap_offsets, int64_t taps, int64_t quads,
                                         const int8_t* w, const Int8HighHalfBlock* blocks,
                                         const Int8HighHalfBlock* negative_blocks,
                                         const Int8Output& out, int64_t channels, int8_t* y,
                                         int64_t y_stride) {
    using Kernel = void (*)(const int8_t*, int64_t, const int64_t*, int64_t, int64_t,
                            const int8_t*, const Int8HighHalfBlock*, const Int8HighHalfBlock*,
                            const Int8Output&, int64_t, int8_t*, int64_t);
    static constexpr Kernel kKernels[] = {
        int8_gemm_nhwc_requantized_avx512_vnni<MR + 1, NV, kBySign>...};
    kKernels[pixels - 1](x, x_stride, tap_offsets, taps, quads, w, blocks, negative_blocks, out,
                         channels, y, y_stride);
}

template <int MR, int NV>
void nhwc_requantized_avx512_vnni(int64_t pixels, const int8_t* x, int64_t x_stride,
                                  const int64_t* tap_offsets, int64_t taps, int64_t quads,
                                  const int8_t* w, const Int8HighHalfBlock* blocks,
                                  const Int8HighHalfBlock* negative_blocks, const Int8Output& out,
                                  int64_t channels, int8_t* y, int64_t y_stride) {
    if (negative_blocks != nullptr) {
        nhwc_requantized_pixels_avx512_vnni<NV, true>(std::make_integer_sequence<int, MR>(),
                                                      pixels, x, x_stride, tap_offsets, taps,
                                                      quads, w, blocks, negative_blocks, out,
                                                      channels, y, y_stride);
        return;
    }
    nhwc_requantized_pixels_avx512_vnni<NV, false>(std::make_integer_sequence<int, MR>(), pixels,
                                                   x, x_stride, tap_offsets, taps, quads, w,
                                                   blocks, nullptr, out, channels, y, y_stride);
}

}  // namespace

extern const Int8GemmNhwcUkernel kInt8GemmNhwc12x32Avx512Vnni = {
    12, 32, 1, 128, nhwc_avx512_vnni<12, 2>, nullptr, nhwc_requantized_avx512_vnni<12, 2>};
extern const Int8GemmNhwcUkernel kInt8GemmNhwc24x16Avx512Vnni = {
    24, 16, 1, 128, nhwc_avx512_vnni<24, 1>, nullptr, nhwc_requantized_avx512_vnni<24, 1>};

extern const Int8GemmUkernel kInt8Gemm8x32c4Avx512Vnni = {8, 32, int8_gemm_8x32c4_avx512_vnni};

// The peak the micro-kernel above could reach on one core: independent chains of vpdpbusd on
// registers (no memory traffic), enough of them to hide the instruction's latency. The caller
// times it (cpu_features.cpp), so no clock code is built with this file's flags.
int64_t int8_peak_chains_avx512_vnni(int64_t rounds) {
    constexpr int kChains = 16;
    constexpr int64_t kMacsPerInstruction = 64;  // 16 lanes x 4 products
    __m512i acc[kChains];
    for (int i = 0; i < kChains; ++i) {
        acc[i] = _mm512_set1_epi32(i);
    }
    const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(-1);
    for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
        for (int i = 0; i < kChains; ++i) {
            acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
        }
    }
    __m512i sum = acc[0];
    for (int i = 1; i < kChains; ++i) {
        sum = _mm512_add_epi32(sum, acc[i]);
    }
    int32_t lanes[16];
    _mm512_storeu_si512(lanes, sum);
    volatile int32_t sink = lanes[0];  // keeps the chains alive
    (void)sink;
    return rounds * kChains * kMacsPerInstruction;
}

}  // namespace detail
}  // namespace qtk
