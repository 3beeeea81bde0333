// The passes of int8 avg_pool2d (avg_pool_int8.h), AVX-512 F/BW: 64 bytes, 32 int16 or 16 int32 a
// step, tails masked (no reads past the rows); stride 2's phases by two-source word permutes; 2x2
// windows at stride 2 in one pass, each row's pairs summed by vpmaddubsw against ones.
#include "avx512_intrinsics.h"

#include "../contracts/avg_pool_int8.h"

namespace qtk {
namespace detail {
namespace {

__mmask32 first32(int64_t left) {
    return left >= 32 ? ~__mmask32{0} : left <= 0 ? 0 : (__mmask32{1} << left) - 1;
}

__mmask16 first16(int64_t left) {
    return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

void sum_rows(const int8_t* x, int64_t width, int64_t kernel_rows, int64_t groups,
              int64_t group_pitch, const int8_t*, int16_t* sums) {
    for (int64_t g = 0; g < groups; ++g, x += group_pitch, sums += width) {
        for (int64_t i = 0; i < width; i += 64) {
            const int64_t left = width - i;
            const __mmask64 mask = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
            __m512i vlo = _mm512_setzero_si512(), vhi = _mm512_setzero_si512();
            for (int64_t r = 0; r < kernel_rows; ++r) {
                const __m512i vx = _mm512_maskz_loadu_epi8(mask, x + r * width + i);
                vlo = _mm512_add_epi16(vlo, _mm512_cvtepi8_epi16(_mm512_castsi512_si256(vx)));
                vhi = _mm512_add_epi16(vhi,
                                       _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(vx, 1)));
            }
            _mm512_mask_storeu_epi16(sums + i, first32(left), vlo);
            _mm512_mask_storeu_epi16(sums + i + 32, first32(left - 32), vhi);
        }
    }
}

void split_phases(const int16_t* sums, int64_t width, int64_t stride, int64_t pitch,
                  int16_t* phases) {
    int64_t j = 0;
    if (stride == 2) {
        __m512i veven, vodd;  // word indexes 0, 2, .. 62 and 1, 3, .. 63 of the two sources
        alignas(64) int16_t even[32], odd[32];
        for (int i = 0; i < 32; ++i) {
            even[i] = static_cast<int16_t>(2 * i);
            odd[i] = static_cast<int16_t>(2 * i + 1);
        }
        veven = _mm512_load_si512(even);
        vodd = _mm512_load_si512(odd);
        for (; 2 * j < width; j += 32) {
            const int64_t left = width - 2 * j;  // columns from 2 j on
            const __m512i v0 = _mm512_maskz_loadu_epi16(first32(left), sums + 2 * j);
            const __m512i v1 = _mm512_maskz_loadu_epi16(first32(left - 32), sums + 2 * j + 32);
            _mm512_mask_storeu_epi16(phases + j, first32((left + 1) / 2),
                                     _mm512_permutex2var_epi16(v0, veven, v1));
            _mm512_mask_storeu_epi16(phases + pitch + j, first32(left / 2),
                                     _mm512_permutex2var_epi16(v0, vodd, v1));
        }
        return;
    }
    for (int64_t p = 0; p < stride; ++p) {
        for (int64_t c = 0; c * stride + p < width; ++c) {
            phases[p * pitch + c] = sums[c * stride + p];
        }
    }
}

// The divisor's constants in vectors, and 16 window sums S divided: n = 2|S| + d; vpmuludq
// multiplies the even dwords into 64-bit products, and each quotient (below 2^31) is the low dword
// of its shifted product; the saturating narrow is the clamp.
struct Divisor16 {
    explicit Divisor16(const Int8PoolDivisor& d)
        : vd(_mm512_set1_epi32(d.divisor)),
          vz(_mm512_set1_epi32(d.zero_point)),
          vm(_mm512_set1_epi32(static_cast<int32_t>(d.multiplier))),
          vk(_mm_cvtsi32_si128(d.shift)) {}

    __m128i divide(__m512i vs) const {
        const __m512i vsign = _mm512_srai_epi32(vs, 31);
        const __m512i vn = _mm512_add_epi32(_mm512_slli_epi32(_mm512_abs_epi32(vs), 1), vd);
        const __m512i veven = _mm512_srl_epi64(_mm512_mul_epu32(vn, vm), vk);
        const __m512i vodd = _mm512_srl_epi64(_mm512_mul_epu32(_mm512_srli_epi64(vn, 32), vm), vk);
        const __m512i vq = _mm512_mask_blend_epi32(0xAAAA, veven, _mm512_slli_epi64(vodd, 32));
        return _mm512_cvtsepi32_epi8(
            _mm512_add_epi32(_mm512_sub_epi32(_mm512_xor_si512(vq, vsign), vsign), vz));
    }

    __m512i vd, vz, vm;
    __m128i vk;
};

void divide_runs(const int16_t* const* runs, int64_t count_runs, int64_t count, int32_t offset,
                 const Int8PoolDivisor& d, int8_t* y) {
    const Divisor16 divisor(d);
    const __m512i voffset = _mm512_set1_epi32(offset);
    for (int64_t o = 0; o < count; o += 16) {
        const __mmask16 mask = first16(count - o);
        __m512i vs = voffset;
        for (int64_t k = 0; k < count_runs; ++k) {
            vs = _mm512_add_epi32(
                vs, _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(mask, runs[k] + o)));
        }
        _mm_mask_storeu_epi8(y + o, mask, divisor.divide(vs));
    }
}

// 32 windows a step: the two rows' 64 bytes each summed in pairs (vpmaddubsw: unsigned ones times
// the signed bytes, exact in int16), added, widened and divided in two halves.
void pool2x2(const int8_t* x, int64_t width, int64_t rows, int32_t offset,
             const Int8PoolDivisor& d, int8_t* y) {
    const Divisor16 divisor(d);
    const __m512i voffset = _mm512_set1_epi32(offset), vones = _mm512_set1_epi8(1);
    const int64_t out_w = width / 2;
    for (int64_t r = 0; r < rows; ++r, x += 2 * width, y += out_w) {
        for (int64_t o = 0; o < out_w; o += 32) {
            const int64_t left = out_w - o;
            const __mmask64 bytes = left >= 32 ? ~__mmask64{0} : (__mmask64{1} << (2 * left)) - 1;
            const __m512i vsums = _mm512_add_epi16(
                _mm512_maddubs_epi16(vones, _mm512_maskz_loadu_epi8(bytes, x + 2 * o)),
                _mm512_maddubs_epi16(vones, _mm512_maskz_loadu_epi8(bytes, x + width + 2 * o)));
            const __m512i vlow = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(vsums));
            const __m512i vhigh = _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(vsums, 1));
            _mm_mask_storeu_epi8(y + o, first16(left),
                                 divisor.divide(_mm512_add_epi32(vlow, voffset)));
            if (left > 16) {
                _mm_mask_storeu_epi8(y + o + 16, first16(left - 16),
                                     divisor.divide(_mm512_add_epi32(vhigh, voffset)));
            }
        }
    }
}

}  // namespace

extern const Int8AvgPoolUkernel kInt8AvgPoolAvx512 = {sum_rows, split_phases, divide_runs,
                                                      pool2x2};

}  // namespace detail
}  // namespace qtk
