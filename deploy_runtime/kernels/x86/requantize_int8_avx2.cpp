// int8 requantization (requantize_int8.h), AVX2: 8 accumulators per vector, exact like the AVX-512
// form (vpmuldq into int64 lanes, the clamp in int64 before narrowing). AVX2 lacks the int64
// arithmetic shift and min/max: the shift is a logical one on the one's complement of negative
// lanes (floor(v / 2^n) = ~(~v >> n) for v < 0), the clamp a compare and blend.
#include <immintrin.h>

#include <cstring>

#include "../contracts/requantize_int8.h"

namespace qtk {
namespace detail {
namespace {

// One channel's or 8 channels' constants, split into the even and odd int32 positions.
struct Params {
    __m256i multiplier_even, multiplier_odd, round_even, round_odd, shift_even, shift_odd, offset;
};

Params make_params(__m256i vmultiplier, __m256i vshift, __m256i voffset) {
    const __m256i vone = _mm256_set1_epi64x(1);
    Params p;
    p.multiplier_even = vmultiplier;  // vpmuldq reads the low int32 of each int64 lane
    p.multiplier_odd = _mm256_srli_epi64(vmultiplier, 32);
    p.shift_even = _mm256_and_si256(vshift, _mm256_set1_epi64x(0xFFFFFFFF));
    p.shift_odd = _mm256_srli_epi64(vshift, 32);
    p.round_even = _mm256_sllv_epi64(vone, _mm256_sub_epi64(p.shift_even, vone));
    p.round_odd = _mm256_sllv_epi64(vone, _mm256_sub_epi64(p.shift_odd, vone));
    p.offset = voffset;
    return p;
}

// The clamp bounds relative to the zero point, as int64, and the zero point.
struct Output {
    __m256i lo, hi, zero_point;
};

Output make_output(const Int8Output& out) {
    return {_mm256_set1_epi64x(out.lo_from_zero_point), _mm256_set1_epi64x(out.hi_from_zero_point),
            _mm256_set1_epi32(out.zero_point)};
}

// clamp((product + 2^(n-1)) >> n, lo - z, hi - z) on int64 lanes.
__m256i scale(__m256i vproduct, __m256i vround, __m256i vshift, const Output& o) {
    const __m256i vsum = _mm256_add_epi64(vproduct, vround);
    const __m256i vsign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), vsum);
    __m256i v = _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(vsum, vsign), vshift), vsign);
    v = _mm256_blendv_epi8(v, o.lo, _mm256_cmpgt_epi64(o.lo, v));
    return _mm256_blendv_epi8(v, o.hi, _mm256_cmpgt_epi64(v, o.hi));
}

// Lanes [0, count) of p, zeros after; count > 0.
__m256i load_lanes(const int32_t* p, int64_t count) {
    if (count >= 8) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    }
    const __m256i vmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(count)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_epi32(p, vmask);
}

// Lanes [0, count) of vy, each already in [-128, 127] (so the saturating packs only narrow), as
// int8 at y; count > 0.
void store_lanes(__m256i vy, int64_t count, int8_t* y) {
    const __m128i vy16 =
        _mm_packs_epi32(_mm256_castsi256_si128(vy), _mm256_extracti128_si256(vy, 1));
    const __m128i vy8 = _mm_packs_epi16(vy16, vy16);
    if (count >= 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(y), vy8);
    } else {
        int8_t tail[16];
        _mm_storeu_si128(reinterpret_cast<__m128i*>(tail), vy8);
        std::memcpy(y, tail, static_cast<size_t>(count));
    }
}

// 8 values that already hold their offset, requantized into lanes [0, count) of y.
void requantize8_values(__m256i vacc, int64_t count, const Params& p, const Output& o,
                        int8_t* y) {
    const __m256i veven =
        scale(_mm256_mul_epi32(vacc, p.multiplier_even), p.round_even, p.shift_even, o);
    const __m256i vodd = scale(_mm256_mul_epi32(_mm256_srli_epi64(vacc, 32), p.multiplier_odd),
                               p.round_odd, p.shift_odd, o);
    const __m256i vy = _mm256_add_epi32(
        _mm256_blend_epi32(veven, _mm256_slli_epi64(vodd, 32), 0xAA), o.zero_point);
    store_lanes(vy, count, y);
}

void requantize8(const int32_t* acc, int64_t count, const Params& p, const Output& o, int8_t* y) {
    requantize8_values(_mm256_add_epi32(load_lanes(acc, count), p.offset), count, p, o, y);
}

// Spec 22 (a fused PReLU): each lane's multiplier and shift chosen by the sign of its value, then
// the int64 form, which takes any per-lane pair (vpmuldq multiplies signed).
void requantize8_by_sign(const int32_t* acc, int64_t count, __m256i voffset,
                         const __m256i multiplier[2], const __m256i shift[2], const Output& o,
                         int8_t* y) {
    const __m256i vacc = _mm256_add_epi32(load_lanes(acc, count), voffset);
    const __m256i vnegative = _mm256_cmpgt_epi32(_mm256_setzero_si256(), vacc);
    const Params p = make_params(_mm256_blendv_epi8(multiplier[0], multiplier[1], vnegative),
                                 _mm256_blendv_epi8(shift[0], shift[1], vnegative), voffset);
    requantize8_values(vacc, count, p, o, y);
}

// The high-half form of requantize_int8.h, for 33 <= n <= 54: the products' high int32 halves,
// then int32, which has the arithmetic shift and the min/max that int64 lacks here; the zero point
// folded into the rounding constant (the header says why that is exact).
struct HighHalfParams {
    __m256i multiplier, offset, lo, hi;
    __m256i round;  // 2^(n-33) + z 2^(n-32)
    __m256i shift;  // n - 32, for vpsravd (one uop, where vpsrad by xmm is two)
};

// The high-half form's int32 results of 8 accumulators, before the clamp.
__m256i scale8_high_half(__m256i vacc, const HighHalfParams& p) {
    vacc = _mm256_add_epi32(vacc, p.offset);
    const __m256i veven = _mm256_mul_epi32(vacc, p.multiplier);
    const __m256i vodd = _mm256_mul_epi32(_mm256_srli_epi64(vacc, 32), p.multiplier);
    // h: the even products' high halves moved down, the odd ones' in place.
    const __m256i vhigh = _mm256_blend_epi32(_mm256_srli_epi64(veven, 32), vodd, 0xAA);
    return _mm256_srav_epi32(_mm256_add_epi32(vhigh, p.round), p.shift);
}

void requantize8_high_half(const int32_t* acc, int64_t count, const HighHalfParams& p,
                           int8_t* y) {
    const __m256i vscaled = scale8_high_half(load_lanes(acc, count), p);
    store_lanes(_mm256_min_epi32(_mm256_max_epi32(vscaled, p.lo), p.hi), count, y);
}

// 32 values of the high-half form: narrowed by saturating packs first, then clamped as bytes,
// which is the same (lo and hi lie inside the int8 range) and clamps 32 at once, not 8.
void requantize32_high_half(const int32_t* acc, const HighHalfParams& p, __m256i vlo8,
                            __m256i vhi8, int8_t* y) {
    // packs works within 128-bit lanes: bytes come out as 4-value groups 0 2 4 6 | 1 3 5 7 of
    // the 8 groups in order; the permute puts them back.
    const auto scaled = [&](int64_t i) {
        return scale8_high_half(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), p);
    };
    const __m256i v01 = _mm256_packs_epi32(scaled(0), scaled(8));
    const __m256i v23 = _mm256_packs_epi32(scaled(16), scaled(24));
    const __m256i vy = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(v01, v23),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y),
                        _mm256_min_epi8(_mm256_max_epi8(vy, vlo8), vhi8));
}

void requantize_channel_avx2(const int32_t* acc, int64_t acc_stride, int64_t rows, int64_t count,
                             int32_t offset, int32_t multiplier, int32_t shift,
                             const Int8Output& out, int8_t* y) {
    if (shift >= kHighHalfMinShift && shift <= kHighHalfMaxShift) {
        const HighHalfParams p = {
            _mm256_set1_epi32(multiplier),
            _mm256_set1_epi32(offset),
            _mm256_set1_epi32(out.lo),
            _mm256_set1_epi32(out.hi),
            _mm256_set1_epi32(out.round_odd * (int32_t{1} << (shift - kHighHalfMinShift))),
            _mm256_set1_epi32(shift - kHighHalfDroppedBits)};
        const __m256i vlo8 = _mm256_set1_epi8(static_cast<int8_t>(out.lo));
        const __m256i vhi8 = _mm256_set1_epi8(static_cast<int8_t>(out.hi));
        for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
            int64_t i = 0;
            for (; i + 32 <= count; i += 32) {
                requantize32_high_half(acc + i, p, vlo8, vhi8, y + i);
            }
            for (; i < count; i += 8) {
                requantize8_high_half(acc + i, count - i, p, y + i);
            }
        }
        return;
    }
    const Params p = make_params(_mm256_set1_epi32(multiplier), _mm256_set1_epi32(shift),
                                 _mm256_set1_epi32(offset));
    const Output o = make_output(out);
    for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
        for (int64_t i = 0; i < count; i += 8) {
            requantize8(acc + i, count - i, p, o, y + i);
        }
    }
}

void requantize_channels_avx2(const int32_t* acc, int64_t acc_stride, int64_t pixels,
                              int64_t count, const int32_t* offset, const int32_t* multiplier,
                              const int32_t* shift, const Int8Output& out, int8_t* y,
                              int64_t y_stride) {
    const Output o = make_output(out);
    for (int64_t i = 0; i < count; i += 8) {
        const Params p = make_params(load_lanes(multiplier + i, count - i),
                                     load_lanes(shift + i, count - i),
                                     load_lanes(offset + i, count - i));
        for (int64_t r = 0; r < pixels; ++r) {
            requantize8(acc + r * acc_stride + i, count - i, p, o, y + r * y_stride + i);
        }
    }
}

void requantize_channel_by_sign_avx2(const int32_t* acc, int64_t acc_stride, int64_t rows,
                                     int64_t count, int32_t offset, int32_t multiplier,
                                     int32_t shift, int32_t negative_multiplier,
                                     int32_t negative_shift, const Int8Output& out, int8_t* y) {
    const __m256i vmultiplier[2] = {_mm256_set1_epi32(multiplier),
                                    _mm256_set1_epi32(negative_multiplier)};
    const __m256i vshift[2] = {_mm256_set1_epi32(shift), _mm256_set1_epi32(negative_shift)};
    const __m256i voffset = _mm256_set1_epi32(offset);
    const Output o = make_output(out);
    for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
        for (int64_t i = 0; i < count; i += 8) {
            requantize8_by_sign(acc + i, count - i, voffset, vmultiplier, vshift, o, y + i);
        }
    }
}

void requantize_channels_by_sign_avx2(const int32_t* acc, int64_t acc_stride, int64_t pixels,
                                      int64_t count, const int32_t* offset,
                                      const int32_t* multiplier, const int32_t* shift,
                                      const int32_t* negative_multiplier,
                                      const int32_t* negative_shift, const Int8Output& out,
                                      int8_t* y, int64_t y_stride) {
    const Output o = make_output(out);
    for (int64_t i = 0; i < count; i += 8) {
        const __m256i vmultiplier[2] = {load_lanes(multiplier + i, count - i),
                                        load_lanes(negative_multiplier + i, count - i)};
        const __m256i vshift[2] = {load_lanes(shift + i, count - i),
                                   load_lanes(negative_shift + i, count - i)};
        const __m256i voffset = load_lanes(offset + i, count - i);
        for (int64_t r = 0; r < pixels; ++r) {
            requantize8_by_sign(acc + r * acc_stride + i, count - i, voffset, vmultiplier, vshift,
                                o, y + r * y_stride + i);
        }
    }
}

}  // namespace

extern const Int8RequantizeUkernel kInt8RequantizeAvx2 = {
    requantize_channel_avx2, requantize_channels_avx2, requantize_channel_by_sign_avx2,
    requantize_channels_by_sign_avx2};

}  // namespace detail
}  // namespace qtk
