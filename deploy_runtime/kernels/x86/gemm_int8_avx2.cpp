// int8 GEMM micro-kernel, 2 output channels x 16 pixels, AVX2 (gemm_int8.h). Exact without VNNI:
// activations are widened to int16 (0..255) in the loop, weights come widened to int16
// (-127..127, weight_bytes 2: one vpbroadcastq from memory per row and quad, no conversion), and
// vpmaddwd adds pairs of int16 products into int32 lanes without saturation. (vpmaddubsw would be
// one step shorter but saturates its int16 pair sums: 255 * 127 * 2 > 32767.) Widening the weights
// at load took the kernel from 31 to about 60 G multiply-adds/s on an AMD EPYC Zen 3 (packed
// operands in L2; its vpmaddwd peak: 74).
#include <immintrin.h>

#include <cstring>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

// Four pixels' (k0 k1 | k2 k3) pair sums -> one int32 per pixel: lanes [p0 p1 p2 p3 p4 p5 p6 p7]
// from v03 (pixels 0-3) and v47 (pixels 4-7).
__m256i sum_pairs(__m256i v03, __m256i v47) {
    // hadd gives [p0 p1 p4 p5 | p2 p3 p6 p7]; put the 64-bit halves in order.
    return _mm256_permute4x64_epi64(_mm256_hadd_epi32(v03, v47), _MM_SHUFFLE(3, 1, 2, 0));
}

void int8_gemm_2x16c4_avx2(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride) {
    // vaccRJ: pixels 4J..4J+3 of row R, two lanes per pixel (k0 k1 and k2 k3).
    __m256i vacc00 = _mm256_setzero_si256(), vacc01 = vacc00, vacc02 = vacc00, vacc03 = vacc00;
    __m256i vacc10 = vacc00, vacc11 = vacc00, vacc12 = vacc00, vacc13 = vacc00;
    // One quad in assembly: written as intrinsics, GCC gave each sum a new register and copied it
    // back (8 copies and a spill a quad, or a fast loop for one operand layout and not the other).
    const auto multiply_quad = [&](const uint8_t* quad) {
        __m256i vw0, vw1, vb0, vb1, vb2, vb3, vp;
        asm("vpbroadcastq (%[a]), %[w0]\n\t"  // int16 w0 w1 w2 w3 of row 0, 4 times
            "vpbroadcastq 8(%[a]), %[w1]\n\t"
            "vpmovzxbw (%[q]), %[b0]\n\t"  // pixels 0-3, 4 k each, as int16
            "vpmovzxbw 16(%[q]), %[b1]\n\t"
            "vpmovzxbw 32(%[q]), %[b2]\n\t"
            "vpmovzxbw 48(%[q]), %[b3]\n\t"
            "vpmaddwd %[w0], %[b0], %[p]\n\tvpaddd %[p], %[c00], %[c00]\n\t"
            "vpmaddwd %[w0], %[b1], %[p]\n\tvpaddd %[p], %[c01], %[c01]\n\t"
            "vpmaddwd %[w0], %[b2], %[p]\n\tvpaddd %[p], %[c02], %[c02]\n\t"
            "vpmaddwd %[w0], %[b3], %[p]\n\tvpaddd %[p], %[c03], %[c03]\n\t"
            "vpmaddwd %[w1], %[b0], %[p]\n\tvpaddd %[p], %[c10], %[c10]\n\t"
            "vpmaddwd %[w1], %[b1], %[p]\n\tvpaddd %[p], %[c11], %[c11]\n\t"
            "vpmaddwd %[w1], %[b2], %[p]\n\tvpaddd %[p], %[c12], %[c12]\n\t"
            "vpmaddwd %[w1], %[b3], %[p]\n\tvpaddd %[p], %[c13], %[c13]"
            : [c00] "+x"(vacc00), [c01] "+x"(vacc01), [c02] "+x"(vacc02), [c03] "+x"(vacc03),
              [c10] "+x"(vacc10), [c11] "+x"(vacc11), [c12] "+x"(vacc12), [c13] "+x"(vacc13),
              [w0] "=&x"(vw0), [w1] "=&x"(vw1), [b0] "=&x"(vb0), [b1] "=&x"(vb1),
              [b2] "=&x"(vb2), [b3] "=&x"(vb3), [p] "=&x"(vp)
            : [a] "r"(a), [q] "r"(quad),  // and the bytes they point at:
              "m"(*reinterpret_cast<const uint8_t(*)[16]>(a)),
              "m"(*reinterpret_cast<const uint8_t(*)[64]>(quad)));
        a += 2 * 4 * 2;
    };
    if (b.inner_count == 1) {
        const uint8_t* quad = b.base + b.inner_offsets[0];
        for (int64_t q = 0; q < b.outer_count; ++q, quad += b.outer_stride) {
            multiply_quad(quad);
        }
    } else {
        for (int64_t o = 0; o < b.outer_count; ++o) {
            const uint8_t* outer = b.base + o * b.outer_stride;
            for (int64_t i = 0; i < b.inner_count; ++i) {
                multiply_quad(outer + b.inner_offsets[i]);
            }
        }
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), sum_pairs(vacc00, vacc01));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8), sum_pairs(vacc02, vacc03));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + c_stride), sum_pairs(vacc10, vacc11));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + c_stride + 8), sum_pairs(vacc12, vacc13));
}

}  // namespace

extern const Int8GemmUkernel kInt8Gemm2x16c4Avx2 = {
    2, 16, int8_gemm_2x16c4_avx2, 1, nullptr, 128, /*weight_bytes=*/2};

int64_t int8_peak_chains_avx2(int64_t rounds) {
    constexpr int kChains = 8;
    constexpr int64_t kMacsPerInstruction = 16;  // 8 lanes x 2 products
    __m256i acc[kChains];
    for (int i = 0; i < kChains; ++i) {
        acc[i] = _mm256_set1_epi32(i);
    }
    // Eight distinct products a round (two a by four b), re-read each round: a loop-invariant
    // vpmaddwd would be computed once.
    __m256i a[2] = {_mm256_set1_epi16(1), _mm256_set1_epi16(2)};
    const __m256i b[4] = {_mm256_set1_epi16(-1), _mm256_set1_epi16(3), _mm256_set1_epi16(-5),
                          _mm256_set1_epi16(7)};
    for (int64_t r = 0; r < rounds; ++r) {
        asm volatile("" : "+x"(a[0]), "+x"(a[1]));
#pragma GCC unroll 8
        for (int i = 0; i < kChains; ++i) {
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(a[i / 4], b[i % 4]));
        }
    }
    __m256i sum = acc[0];
    for (int i = 1; i < kChains; ++i) {
        sum = _mm256_add_epi32(sum, acc[i]);
    }
    volatile int32_t sink = _mm256_extract_epi32(sum, 0);  // keeps the chains alive
    (void)sink;
    return rounds * kChains * kMacsPerInstruction;
}

}  // namespace detail
}  // namespace qtk
