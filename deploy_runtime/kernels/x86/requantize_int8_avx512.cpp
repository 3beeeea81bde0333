// int8 requantization (requantize_int8.h), AVX-512 F: 16 accumulators per vector. The spec's int64
// step stays exact: vpmuldq multiplies the even int32 lanes (the odd ones after a shift down) into
// int64 lanes, vpsravq shifts them arithmetically, and the clamp happens in int64 before anything
// is narrowed, so no lane wraps however large the product.
#include "avx512_intrinsics.h"

#include "requantize_int8.h"

namespace qtk {
namespace detail {
namespace {

// One channel's or 16 channels' constants, split into the even and odd int32 positions.
struct Params {
    __m512i multiplier_even, multiplier_odd, round_even, round_odd, shift_even, shift_odd, offset;
};

Params make_params(__m512i vmultiplier, __m512i vshift, __m512i voffset) {
    const __m512i vone = _mm512_set1_epi64(1);
    Params p;
    p.multiplier_even = vmultiplier;  // vpmuldq reads the low int32 of each int64 lane
    p.multiplier_odd = _mm512_srli_epi64(vmultiplier, 32);
    p.shift_even = _mm512_and_si512(vshift, _mm512_set1_epi64(0xFFFFFFFF));
    p.shift_odd = _mm512_srli_epi64(vshift, 32);
    p.round_even = _mm512_sllv_epi64(vone, _mm512_sub_epi64(p.shift_even, vone));
    p.round_odd = _mm512_sllv_epi64(vone, _mm512_sub_epi64(p.shift_odd, vone));
    p.offset = voffset;
    return p;
}

// The clamp bounds relative to the zero point, as int64, and the zero point.
struct Output {
    __m512i lo, hi, zero_point;
};

Output make_output(const Int8Output& out) {
    return {_mm512_set1_epi64(out.lo_from_zero_point), _mm512_set1_epi64(out.hi_from_zero_point),
            _mm512_set1_epi32(out.zero_point)};
}

// clamp((product + 2^(n-1)) >> n, lo - z, hi - z) on int64 lanes.
__m512i scale(__m512i vproduct, __m512i vround, __m512i vshift, const Output& o) {
    const __m512i vscaled = _mm512_srav_epi64(_mm512_add_epi64(vproduct, vround), vshift);
    return _mm512_min_epi64(_mm512_max_epi64(vscaled, o.lo), o.hi);
}

// Lanes [0, count) of a vector, count > 0.
__mmask16 first_lanes(int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

void requantize16(const int32_t* acc, __mmask16 mask, const Params& p, const Output& o,
                  int8_t* y) {
    const __m512i vacc = _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc), p.offset);
    const __m512i veven =
        scale(_mm512_mul_epi32(vacc, p.multiplier_even), p.round_even, p.shift_even, o);
    const __m512i vodd = scale(_mm512_mul_epi32(_mm512_srli_epi64(vacc, 32), p.multiplier_odd),
                               p.round_odd, p.shift_odd, o);
    const __m512i vy = _mm512_mask_blend_epi32(0xAAAA, veven, _mm512_slli_epi64(vodd, 32));
    _mm_mask_storeu_epi8(y, mask, _mm512_cvtepi32_epi8(_mm512_add_epi32(vy, o.zero_point)));
}

// The high-half form of the header, for 33 <= n <= 54: the products' high int32 halves, then
// int32, with the zero point folded into the rounding constant (the header says why).

struct HighHalfParams {
    __m512i multiplier, multiplier_odd, offset, lo, hi;  // odd: shifted down
    __m512i round;     // 2^(n-33) + z 2^(n-32) per lane
    __m512i shift;     // n - 32 per lane, for vpsravd (one uop, where vpsrad by xmm is two)
    __m512i lo8, hi8;  // the bounds as bytes, for the 64-value step
};

// (h + 2^(n-33)) >> (n - 32) + z of 16 accumulators, before the clamp.
[[gnu::always_inline]] inline __m512i scale16_high_half(const int32_t* acc, __mmask16 mask,
                                                        const HighHalfParams& p) {
    // h: the high (odd) dword of each product, the even lanes' from veven, the odd ones' from vodd.
    const __m512i vhigh_halves =
        _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    const __m512i vacc = _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc), p.offset);
    const __m512i veven = _mm512_mul_epi32(vacc, p.multiplier);
    const __m512i vodd = _mm512_mul_epi32(_mm512_srli_epi64(vacc, 32), p.multiplier_odd);
    const __m512i vhigh = _mm512_permutex2var_epi32(veven, vhigh_halves, vodd);
    return _mm512_srav_epi32(_mm512_add_epi32(vhigh, p.round), p.shift);
}

// 16 requantized values, clamped, into the bytes of y's masked lanes.
void store16_high_half(const int32_t* acc, __mmask16 mask, const HighHalfParams& p, int8_t* y) {
    const __m512i vy = scale16_high_half(acc, mask, p);
    // Narrowed in a register, then stored: vpmovdb to memory is several times slower.
    _mm_mask_storeu_epi8(y, mask,
                         _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(vy, p.lo), p.hi)));
}

// 64 values, vector j scaled by p[j] (all four the same for one channel), narrowed with saturating
// packs (exact: the clamp to [lo, hi] within int8 follows), which interleave them per 128-bit
// lane: dword 4 L + j of the packed bytes is vector j's dword L, put back in order by one permute.
[[gnu::always_inline]] inline void store64_high_half(const int32_t* acc,
                                                     const HighHalfParams* const p[4], int8_t* y) {
    const __m512i vorder = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i v01 = _mm512_packs_epi32(scale16_high_half(acc, 0xFFFF, *p[0]),
                                           scale16_high_half(acc + 16, 0xFFFF, *p[1]));
    const __m512i v23 = _mm512_packs_epi32(scale16_high_half(acc + 32, 0xFFFF, *p[2]),
                                           scale16_high_half(acc + 48, 0xFFFF, *p[3]));
    const __m512i vy = _mm512_permutexvar_epi32(vorder, _mm512_packs_epi16(v01, v23));
    _mm512_storeu_si512(y, _mm512_min_epi8(_mm512_max_epi8(vy, p[0]->lo8), p[0]->hi8));
}

// The same 16 channels of 4 pixels (acc_stride and y_stride apart), narrowed together by packs as
// in store64_high_half, then stored a 128-bit lane each.
[[gnu::always_inline]] inline void store4x16_high_half(const int32_t* acc, int64_t acc_stride,
                                                       __mmask16 mask, const HighHalfParams& p,
                                                       int8_t* y, int64_t y_stride) {
    const __m512i vorder = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i v01 = _mm512_packs_epi32(scale16_high_half(acc, mask, p),
                                           scale16_high_half(acc + acc_stride, mask, p));
    const __m512i v23 = _mm512_packs_epi32(scale16_high_half(acc + 2 * acc_stride, mask, p),
                                           scale16_high_half(acc + 3 * acc_stride, mask, p));
    const __m512i vy = _mm512_min_epi8(
        _mm512_max_epi8(_mm512_permutexvar_epi32(vorder, _mm512_packs_epi16(v01, v23)), p.lo8),
        p.hi8);
    _mm_mask_storeu_epi8(y, mask, _mm512_castsi512_si128(vy));
    _mm_mask_storeu_epi8(y + y_stride, mask, _mm512_extracti32x4_epi32(vy, 1));
    _mm_mask_storeu_epi8(y + 2 * y_stride, mask, _mm512_extracti32x4_epi32(vy, 2));
    _mm_mask_storeu_epi8(y + 3 * y_stride, mask, _mm512_extracti32x4_epi32(vy, 3));
}

// One row of `count` values of one channel: 64 at a time, then 16.
void requantize_row_high_half(const int32_t* acc, int64_t count, const HighHalfParams& p,
                              int8_t* y) {
    const HighHalfParams* const same[4] = {&p, &p, &p, &p};
    int64_t i = 0;
    for (; i + 64 <= count; i += 64) {
        store64_high_half(acc + i, same, y + i);
    }
    for (; i < count; i += 16) {
        store16_high_half(acc + i, first_lanes(count - i), p, y + i);
    }
}

// The high-half constants of 16 channels (the masked lanes of the arrays; the others read shift
// 33 and nothing else); false where a lane's shift is outside 33..54.
bool high_half_params(const int32_t* offset, const int32_t* multiplier, const int32_t* shift,
                      __mmask16 mask, const Int8Output& out, HighHalfParams* p) {
    const __m512i vmin = _mm512_set1_epi32(kHighHalfMinShift);
    const __m512i vshift = _mm512_mask_loadu_epi32(vmin, mask, shift);
    if ((_mm512_cmplt_epi32_mask(vshift, vmin) |
         _mm512_cmpgt_epi32_mask(vshift, _mm512_set1_epi32(kHighHalfMaxShift))) != 0) {
        return false;
    }
    const __m512i vmultiplier = _mm512_maskz_loadu_epi32(mask, multiplier);
    const __m512i vdown = _mm512_sub_epi32(vshift, _mm512_set1_epi32(kHighHalfDroppedBits));
    const __m512i vround = _mm512_sllv_epi32(_mm512_set1_epi32(out.round_odd),
                                             _mm512_sub_epi32(vshift, vmin));
    *p = {vmultiplier,
          _mm512_srli_epi64(vmultiplier, 32),
          _mm512_maskz_loadu_epi32(mask, offset),
          _mm512_set1_epi32(out.lo),
          _mm512_set1_epi32(out.hi),
          vround,
          vdown,
          _mm512_set1_epi8(static_cast<char>(out.lo)),
          _mm512_set1_epi8(static_cast<char>(out.hi))};
    return true;
}

void requantize_channel_avx512(const int32_t* acc, int64_t acc_stride, int64_t rows,
                               int64_t count, int32_t offset, int32_t multiplier, int32_t shift,
                               const Int8Output& out, int8_t* y) {
    if (shift >= kHighHalfMinShift && shift <= kHighHalfMaxShift) {
        const int32_t round = out.round_odd * (int32_t{1} << (shift - kHighHalfMinShift));
        const HighHalfParams p = {_mm512_set1_epi32(multiplier),
                                  _mm512_set1_epi32(multiplier),
                                  _mm512_set1_epi32(offset),
                                  _mm512_set1_epi32(out.lo),
                                  _mm512_set1_epi32(out.hi),
                                  _mm512_set1_epi32(round),
                                  _mm512_set1_epi32(shift - kHighHalfDroppedBits),
                                  _mm512_set1_epi8(static_cast<char>(out.lo)),
                                  _mm512_set1_epi8(static_cast<char>(out.hi))};
        for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
            requantize_row_high_half(acc, count, p, y);
        }
        return;
    }
    const Params p = make_params(_mm512_set1_epi32(multiplier), _mm512_set1_epi32(shift),
                                 _mm512_set1_epi32(offset));
    const Output o = make_output(out);
    for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
        for (int64_t i = 0; i < count; i += 16) {
            requantize16(acc + i, first_lanes(count - i), p, o, y + i);
        }
    }
}

void requantize_channels_avx512(const int32_t* acc, int64_t acc_stride, int64_t pixels,
                                int64_t count, const int32_t* offset, const int32_t* multiplier,
                                const int32_t* shift, const Int8Output& out, int8_t* y,
                                int64_t y_stride) {
    const Output o = make_output(out);
    for (int64_t i = 0; i < count;) {
        // 64 channels a step where every one takes the high-half form, else 16.
        HighHalfParams p[4];
        bool wide = count - i >= 64;
        for (int j = 0; j < 4 && wide; ++j) {
            const int64_t c = i + 16 * j;
            wide = high_half_params(offset + c, multiplier + c, shift + c, 0xFFFF, out, &p[j]);
        }
        if (wide) {
            const HighHalfParams* const vectors[4] = {&p[0], &p[1], &p[2], &p[3]};
            for (int64_t r = 0; r < pixels; ++r) {
                store64_high_half(acc + r * acc_stride + i, vectors, y + r * y_stride + i);
            }
            i += 64;
            continue;
        }
        const __mmask16 mask = first_lanes(count - i);
        if (high_half_params(offset + i, multiplier + i, shift + i, mask, out, &p[0])) {
            int64_t r = 0;
            for (; r + 4 <= pixels; r += 4) {  // narrowed together, as store64_high_half does
                store4x16_high_half(acc + r * acc_stride + i, acc_stride, mask, p[0],
                                    y + r * y_stride + i, y_stride);
            }
            for (; r < pixels; ++r) {
                store16_high_half(acc + r * acc_stride + i, mask, p[0], y + r * y_stride + i);
            }
        } else {
            const Params q = make_params(_mm512_maskz_loadu_epi32(mask, multiplier + i),
                                         _mm512_maskz_loadu_epi32(mask, shift + i),
                                         _mm512_maskz_loadu_epi32(mask, offset + i));
            for (int64_t r = 0; r < pixels; ++r) {
                requantize16(acc + r * acc_stride + i, mask, q, o, y + r * y_stride + i);
            }
        }
        i += 16;
    }
}

}  // namespace

extern const Int8RequantizeUkernel kInt8RequantizeAvx512 = {requantize_channel_avx512,
                                                            requantize_channels_avx512};

}  // namespace detail
}  // namespace qtk
