// Binary popcount micro-kernels, AVX-512 with VPOPCNTDQ (the avx512_vbmi level's Ice Lake
// additions): the tile of 4 pixels x 32 output channels, one 64-bit weight word per channel in each
// of four zmm, the pixel's word broadcast and xor'ed against them, vpopcntq, 16 accumulators; the
// row of 8 pixels x 16 channels, requantized in registers; and the packing of signs into the bit
// image (AVX-512 BW).
#include "avx512_intrinsics.h"

#include "../contracts/popcount_binary.h"
#include "requantize_int8_avx512.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kPixels = 4, kBlocks = 4;  // kBlocks zmm of 8 channels

void run(const uint64_t* const* pixel, const int64_t* tap_offset, int64_t taps, int64_t words,
         const uint64_t* w, int32_t products, int scale, const int32_t* const* missed,
         int32_t* sums, int64_t sums_stride) {
    // The loops over pixels and blocks unrolled (GCC would not), so the accumulators stay in
    // registers.
    __m512i acc[kPixels][kBlocks];
#pragma GCC unroll 4
    for (int p = 0; p < kPixels; ++p) {
#pragma GCC unroll 4
        for (int b = 0; b < kBlocks; ++b) {
            acc[p][b] = _mm512_setzero_si512();
        }
    }
    for (int64_t t = 0; t < taps; ++t) {
        const int64_t offset = tap_offset[t];
        for (int64_t j = 0; j < words; ++j, w += 8 * kBlocks) {
            __m512i wb[kBlocks];
#pragma GCC unroll 4
            for (int b = 0; b < kBlocks; ++b) {
                wb[b] = _mm512_loadu_si512(w + 8 * b);
            }
#pragma GCC unroll 4
            for (int p = 0; p < kPixels; ++p) {
                const __m512i x = _mm512_set1_epi64(static_cast<long long>(pixel[p][offset + j]));
#pragma GCC unroll 4
                for (int b = 0; b < kBlocks; ++b) {
                    acc[p][b] = _mm512_add_epi64(
                        acc[p][b], _mm512_popcnt_epi64(_mm512_xor_si512(x, wb[b])));
                }
            }
        }
    }
    // (products - 2 count) 2^scale - missed, then each block's 4 pixels x 8 channels transposed
    // into a row of 4 pixels per channel: 32-bit unpacks pair the pixels, 64-bit unpacks make
    // each 128-bit lane one channel's 4 pixels (channels c and c + 4 in the low and high lanes of
    // a ymm).
    const __m256i base = _mm256_set1_epi32(static_cast<int32_t>(uint32_t(products) << scale));
    const __m128i count_shift = _mm_cvtsi32_si128(scale + 1);
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) {
        __m256i s[kPixels];
#pragma GCC unroll 4
        for (int p = 0; p < kPixels; ++p) {
            const __m256i count = _mm512_maskz_cvtepi64_epi32(0xff, acc[p][b]);
            s[p] = _mm256_sub_epi32(base, _mm256_sll_epi32(count, count_shift));
            if (missed != nullptr) {
                s[p] = _mm256_sub_epi32(s[p], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                  missed[p] + 8 * b)));
            }
        }
        const __m256i p01_lo = _mm256_unpacklo_epi32(s[0], s[1]);  // c0: p0 p1, c1: p0 p1 | c4, c5
        const __m256i p01_hi = _mm256_unpackhi_epi32(s[0], s[1]);  // c2, c3 | c6, c7
        const __m256i p23_lo = _mm256_unpacklo_epi32(s[2], s[3]);
        const __m256i p23_hi = _mm256_unpackhi_epi32(s[2], s[3]);
        const __m256i rows[4] = {_mm256_unpacklo_epi64(p01_lo, p23_lo),   // c0 | c4
                                 _mm256_unpackhi_epi64(p01_lo, p23_lo),   // c1 | c5
                                 _mm256_unpacklo_epi64(p01_hi, p23_hi),   // c2 | c6
                                 _mm256_unpackhi_epi64(p01_hi, p23_hi)};  // c3 | c7
        int32_t* out = sums + 8 * b * sums_stride;
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c * sums_stride),
                             _mm256_castsi256_si128(rows[c]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (c + 4) * sums_stride),
                             _mm256_extracti128_si256(rows[c], 1));
        }
    }
}

// The sign bits of 64 channels x 64 pixels: one masked compare per channel row gives its 64
// pixels' bits (row c, bit i), which a 64 x 64 bit transpose turns into one word per pixel (row
// i, bit c): Hacker's Delight 7-3's block swaps on 8 zmm of 8 rows each, pairs of rows 32, 16 and
// 8 apart across registers, 4, 2 and 1 apart within one (the partner lanes by a permute). About
// 5x fewer instructions than compare-and-movemask in SSE2 and a scalar transpose.
void pack(const int8_t* x, int64_t channel_stride, int64_t channels, int64_t pixels,
          const int32_t* thresholds, uint64_t* words) {
    const __mmask64 valid = pixels >= 64 ? ~__mmask64{0} : (__mmask64{1} << pixels) - 1;
    alignas(64) uint64_t rows[64];
    for (int64_t c = 0; c < 64; ++c) {
        const int32_t t = c < channels ? thresholds[c] : -128;  // -128: no bit
        rows[c] = t <= -128 ? 0
                  : t >= 128
                      ? valid
                      : _mm512_mask_cmplt_epi8_mask(
                            valid, _mm512_maskz_loadu_epi8(valid, x + c * channel_stride),
                            _mm512_set1_epi8(static_cast<char>(t)));
    }
    __m512i a[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
        a[r] = _mm512_load_si512(rows + 8 * r);
    }
    // Rows k and k + j (k without bit j): t = ((a[k] >> j) ^ a[k + j]) & low halves;
    // a[k] ^= t << j, a[k + j] ^= t.
    static constexpr uint64_t kLowHalves[] = {0x00000000ffffffffu, 0x0000ffff0000ffffu,
                                              0x00ff00ff00ff00ffu, 0x0f0f0f0f0f0f0f0fu,
                                              0x3333333333333333u, 0x5555555555555555u};
#pragma GCC unroll 3
    for (int level = 0; level < 3; ++level) {  // j = 32, 16, 8: registers r and r + j / 8
        const int j = 32 >> level, apart = j / 8;
        const __m512i mask = _mm512_set1_epi64(static_cast<long long>(kLowHalves[level]));
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            if ((r & apart) == 0) {
                const __m512i t = _mm512_and_si512(
                    _mm512_xor_si512(_mm512_srli_epi64(a[r], j), a[r + apart]), mask);
                a[r] = _mm512_xor_si512(a[r], _mm512_slli_epi64(t, j));
                a[r + apart] = _mm512_xor_si512(a[r + apart], t);
            }
        }
    }
#pragma GCC unroll 3
    for (int level = 3; level < 6; ++level) {  // j = 4, 2, 1: lanes l and l + j
        const int j = 32 >> level;
        const __m512i mask = _mm512_set1_epi64(static_cast<long long>(kLowHalves[level]));
        const __m512i partner = _mm512_xor_si512(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
                                                 _mm512_set1_epi64(j));
        const __mmask8 low = static_cast<__mmask8>(j == 4 ? 0x0F : j == 2 ? 0x33 : 0x55);
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            const __m512i t = _mm512_and_si512(
                _mm512_xor_si512(_mm512_srli_epi64(a[r], j),
                                 _mm512_permutexvar_epi64(partner, a[r])),
                mask);  // the low lanes' t
            a[r] = _mm512_mask_xor_epi64(a[r], low, a[r], _mm512_slli_epi64(t, j));
            a[r] = _mm512_mask_xor_epi64(a[r], static_cast<__mmask8>(~low), a[r],
                                         _mm512_permutexvar_epi64(partner, t));
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
        const int64_t left = pixels - 8 * r;
        if (left <= 0) {
            break;
        }
        _mm512_mask_storeu_epi64(words + 8 * r,
                                 static_cast<__mmask8>(left >= 8 ? 0xFF : (1u << left) - 1), a[r]);
    }
}

// The row micro-kernel (popcount_binary.h's BinaryRowUkernel): 8 pixels in the 64-bit lanes of one
// register, loaded at once from the word plane, xor'ed against each of 16 channels' weight word
// (a broadcast folded into the xor), 16 accumulators; then per pair of channels the low dwords of
// their two accumulators in one register (channel 2k in lanes 0..7, 2k + 1 in 8..15), the high-half
// requantization with the pair's constants, narrowed with saturation and stored 8 bytes a channel.
constexpr int kRowPixels = 8, kRowChannels = 16;

// vx xor the word at w in every lane, the broadcast folded into the xor's memory operand: GCC
// emits a vpbroadcastq of its own per channel otherwise, a third more vector instructions than
// the xor, popcount and add each word needs.
[[gnu::always_inline]] inline __m512i xor_broadcast(__m512i vx, const uint64_t* w) {
    __m512i r;
    asm("vpxorq %1%{1to8%}, %2, %0" : "=v"(r) : "m"(*w), "v"(vx));
    return r;
}

void run_row(const uint64_t* x, const int64_t* tap_offset, int64_t taps, int64_t words,
             int64_t word_stride, const uint64_t* w, int64_t w_stride, int32_t products, int scale,
             const int32_t* missed, const Int8HighHalfBlock* requant, const Int8Output& out,
             int64_t valid, int64_t outputs, int8_t* y, int64_t y_stride) {
    __m512i acc[kRowChannels];
#pragma GCC unroll 16
    for (int o = 0; o < kRowChannels; ++o) {
        acc[o] = _mm512_setzero_si512();
    }
    for (int64_t t = 0; t < taps; ++t) {
        const uint64_t* tap = x + tap_offset[t];
        for (int64_t j = 0; j < words; ++j, w += w_stride) {
            const __m512i vx = _mm512_loadu_si512(tap + j * word_stride);
#pragma GCC unroll 16
            for (int o = 0; o < kRowChannels; ++o) {
                acc[o] = _mm512_add_epi64(acc[o], _mm512_popcnt_epi64(xor_broadcast(vx, w + o)));
            }
        }
    }
    const __m512i vbase = _mm512_set1_epi32(static_cast<int32_t>(uint32_t(products) << scale));
    const __m128i vcount_shift = _mm_cvtsi32_si128(scale + 1);
    // dwords 0, 2, .. 14 of the first source, then of the second: the counts, below 2^32
    const __m512i vlow_dwords =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __mmask16 store = static_cast<__mmask16>((1u << valid) - 1);  // of a channel's 8
#pragma GCC unroll 8
    for (int k = 0; k < kRowChannels / 2; ++k) {
        if (2 * k >= outputs) {
            break;
        }
        const __m512i vcount = _mm512_permutex2var_epi32(acc[2 * k], vlow_dwords, acc[2 * k + 1]);
        __m512i vsum = _mm512_sub_epi32(vbase, _mm512_sll_epi32(vcount, vcount_shift));
        if (missed != nullptr) {
            vsum = _mm512_sub_epi32(vsum, _mm512_loadu_si512(missed + 2 * k * kRowPixels));
        }
        const Int8HighHalf16 p = int8_high_half16(requant[k], out);
        const __m512i vy = int8_scale16_high_half(
            _mm512_add_epi32(vsum, _mm512_loadu_si512(requant[k].offset)), p);
        const __m128i vbytes =
            _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(vy, p.lo), p.hi));
        int8_t* row = y + 2 * k * y_stride;
        _mm_mask_storeu_epi8(row, store, vbytes);
        if (2 * k + 1 < outputs) {
            _mm_mask_storeu_epi8(row + y_stride, store, _mm_unpackhi_epi64(vbytes, vbytes));
        }
    }
}

}  // namespace

extern const BinaryPopcountUkernel kBinaryPopcount4x32Avx512Vbmi = {kPixels, 8 * kBlocks, run,
                                                                    pack};
extern const BinaryRowUkernel kBinaryPopcountRow8x16Avx512Vbmi = {kRowPixels, kRowChannels,
                                                                  run_row};

// The peak the micro-kernel above could reach on one core: 16 independent chains of xor, vpopcntq
// and add on registers (no memory traffic), 512 binary products per chain step. The caller times
// it (cpu_features.cpp), so no clock code is built with this file's flags.
int64_t binary_peak_chains_avx512_vbmi(int64_t rounds) {
    constexpr int kChains = 16;
    __m512i acc[kChains];
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) {
        acc[i] = _mm512_set1_epi64(i);
    }
    const __m512i w = _mm512_set1_epi64(0x5555555555555555);
    for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
        for (int i = 0; i < kChains; ++i) {
            acc[i] = _mm512_add_epi64(acc[i], _mm512_popcnt_epi64(_mm512_xor_si512(acc[i], w)));
        }
    }
    __m512i sum = acc[0];
    for (int i = 1; i < kChains; ++i) {
        sum = _mm512_add_epi64(sum, acc[i]);
    }
    long long lanes[8];
    _mm512_storeu_si512(lanes, sum);
    volatile long long sink = lanes[0];  // keeps the chains alive
    (void)sink;
    return rounds * kChains * 512;
}

}  // namespace detail
}  // namespace qtk
