// int8 requantization (requantize_int8.h), AVX-512 F: 16 accumulators per vector, loaded from
// memory and requantized by the in-register forms of requantize_int8_avx512.h.
#include "avx512_intrinsics.h"

#include "requantize_int8_avx512.h"

namespace qtk {
namespace detail {
namespace {

// Lanes [0, count) of a vector, count > 0.
__mmask16 first_lanes(int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

// The high-half form's constants (requantize_int8_avx512.h) with the accumulators' offset, and
// the bounds as bytes for the 64-value step.
struct HighHalfParams {
    Int8HighHalf16 scale;
    __m512i offset, lo8, hi8;
};

[[gnu::always_inline]] inline __m512i scale16_high_half(const int32_t* acc, __mmask16 mask,
                                                        const HighHalfParams& p) {
    return int8_scale16_high_half(
        _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc), p.offset), p.scale);
}

void requantize16(const int32_t* acc, __mmask16 mask, const Int8Exact16& p, __m512i voffset,
                  int8_t* y) {
    const __m512i vy = int8_requantize16_exact(
        _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc), voffset), p);
    _mm_mask_storeu_epi8(y, mask, _mm512_cvtepi32_epi8(vy));
}

// 16 requantized values, clamped, into the bytes of y's masked lanes.
void store16_high_half(const int32_t* acc, __mmask16 mask, const HighHalfParams& p, int8_t* y) {
    const __m512i vy = scale16_high_half(acc, mask, p);
    // Narrowed in a register, then stored: vpmovdb to memory is several times slower.
    _mm_mask_storeu_epi8(y, mask, _mm512_cvtepi32_epi8(_mm512_min_epi32(
                                      _mm512_max_epi32(vy, p.scale.lo), p.scale.hi)));
}

// 64 values, vector j scaled by p[j] (all four the same for one channel), narrowed by
// int8_pack4x16, whose interleaving one permute puts back in order: dword 4 L + j of the packed
// bytes is vector j's dword L.
[[gnu::always_inline]] inline void store64_high_half(const int32_t* acc,
                                                     const HighHalfParams* const p[4], int8_t* y) {
    const __m512i vorder = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i vy = _mm512_permutexvar_epi32(
        vorder, int8_pack4x16(scale16_high_half(acc, 0xFFFF, *p[0]),
                              scale16_high_half(acc + 16, 0xFFFF, *p[1]),
                              scale16_high_half(acc + 32, 0xFFFF, *p[2]),
                              scale16_high_half(acc + 48, 0xFFFF, *p[3])));
    _mm512_storeu_si512(y, _mm512_min_epi8(_mm512_max_epi8(vy, p[0]->lo8), p[0]->hi8));
}

// The same 16 channels of 4 pixels (acc_stride and y_stride apart), narrowed together as in
// store64_high_half, then stored a 128-bit lane each.
[[gnu::always_inline]] inline void store4x16_high_half(const int32_t* acc, int64_t acc_stride,
                                                       __mmask16 mask, const HighHalfParams& p,
                                                       int8_t* y, int64_t y_stride) {
    const __m512i vorder = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i vpacked = int8_pack4x16(scale16_high_half(acc, mask, p),
                                          scale16_high_half(acc + acc_stride, mask, p),
                                          scale16_high_half(acc + 2 * acc_stride, mask, p),
                                          scale16_high_half(acc + 3 * acc_stride, mask, p));
    const __m512i vy = _mm512_min_epi8(
        _mm512_max_epi8(_mm512_permutexvar_epi32(vorder, vpacked), p.lo8), p.hi8);
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

// The high-half constants of 16 channels, or false (int8_high_half16).
bool high_half_params(const int32_t* offset, const int32_t* multiplier, const int32_t* shift,
                      __mmask16 mask, const Int8Output& out, HighHalfParams* p) {
    if (!int8_high_half16(multiplier, shift, mask, out, &p->scale)) {
        return false;
    }
    p->offset = _mm512_maskz_loadu_epi32(mask, offset);
    p->lo8 = _mm512_set1_epi8(static_cast<char>(out.lo));
    p->hi8 = _mm512_set1_epi8(static_cast<char>(out.hi));
    return true;
}

bool in_high_half_range(int32_t shift) {
    return shift >= kHighHalfMinShift && shift <= kHighHalfMaxShift;
}

// One channel's high-half constants in every lane (vpmuldq reads the multiplier's even lanes, so
// the same vector serves the odd ones shifted down).
Int8HighHalf16 channel_high_half(int32_t multiplier, int32_t shift, const Int8Output& out) {
    const int32_t round = out.round_odd * (int32_t{1} << (shift - kHighHalfMinShift));
    return {_mm512_set1_epi32(multiplier),
            _mm512_set1_epi32(multiplier),
            _mm512_set1_epi32(round),
            _mm512_set1_epi32(shift - kHighHalfDroppedBits),
            _mm512_set1_epi32(out.lo),
            _mm512_set1_epi32(out.hi)};
}

void requantize_channel_avx512(const int32_t* acc, int64_t acc_stride, int64_t rows,
                               int64_t count, int32_t offset, int32_t multiplier, int32_t shift,
                               const Int8Output& out, int8_t* y) {
    if (in_high_half_range(shift)) {
        const HighHalfParams p = {channel_high_half(multiplier, shift, out),
                                  _mm512_set1_epi32(offset),
                                  _mm512_set1_epi8(static_cast<char>(out.lo)),
                                  _mm512_set1_epi8(static_cast<char>(out.hi))};
        for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
            requantize_row_high_half(acc, count, p, y);
        }
        return;
    }
    const Int8Exact16 p =
        int8_exact16(_mm512_set1_epi32(multiplier), _mm512_set1_epi32(shift), out);
    const __m512i voffset = _mm512_set1_epi32(offset);
    for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
        for (int64_t i = 0; i < count; i += 16) {
            requantize16(acc + i, first_lanes(count - i), p, voffset, y + i);
        }
    }
}

void requantize_channels_avx512(const int32_t* acc, int64_t acc_stride, int64_t pixels,
                                int64_t count, const int32_t* offset, const int32_t* multiplier,
                                const int32_t* shift, const Int8Output& out, int8_t* y,
                                int64_t y_stride) {
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
            const Int8Exact16 q = int8_exact16(_mm512_maskz_loadu_epi32(mask, multiplier + i),
                                               _mm512_maskz_loadu_epi32(mask, shift + i), out);
            const __m512i voffset = _mm512_maskz_loadu_epi32(mask, offset + i);
            for (int64_t r = 0; r < pixels; ++r) {
                requantize16(acc + r * acc_stride + i, mask, q, voffset, y + r * y_stride + i);
            }
        }
        i += 16;
    }
}

// Spec 22 (a fused PReLU): each lane's multiplier and shift chosen by the sign of its value, then
// the int64 form, which takes any per-lane pair (vpmuldq multiplies signed, so a negative slope's
// negative multiplier needs nothing more).
void requantize16_by_sign(const int32_t* acc, __mmask16 mask, __m512i voffset,
                          const __m512i multiplier[2], const __m512i shift[2],
                          const Int8Output& out, int8_t* y) {
    const __m512i vacc = _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc), voffset);
    const __mmask16 negative = _mm512_cmplt_epi32_mask(vacc, _mm512_setzero_si512());
    const Int8Exact16 p =
        int8_exact16(_mm512_mask_blend_epi32(negative, multiplier[0], multiplier[1]),
                     _mm512_mask_blend_epi32(negative, shift[0], shift[1]), out);
    _mm_mask_storeu_epi8(y, mask, _mm512_cvtepi32_epi8(int8_requantize16_exact(vacc, p)));
}

// The same by the high-half form, where both shifts lie in 33..54: each lane's constants blended
// from the two sides' (the form's derivation holds for products of either sign). About half the
// int64 form's operations: BiRealNet18's 7x7 stem 1.00 -> 0.90 ms (Zen 4).
void requantize16_by_sign_high_half(const int32_t* acc, __mmask16 mask, __m512i voffset,
                                    const Int8HighHalf16 side[2], int8_t* y) {
    const __m512i vacc = _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc), voffset);
    const __mmask16 negative = _mm512_cmplt_epi32_mask(vacc, _mm512_setzero_si512());
    const auto pick = [negative](__m512i positive_side, __m512i negative_side) {
        return _mm512_mask_blend_epi32(negative, positive_side, negative_side);
    };
    const __m512i vmultiplier = pick(side[0].multiplier, side[1].multiplier);
    // vpmuldq reads an odd lane's multiplier from the even position below it: moved down after
    // the blend, so that each lane's own sign chose it.
    const Int8HighHalf16 p = {vmultiplier,
                              _mm512_srli_epi64(vmultiplier, 32),
                              pick(side[0].round, side[1].round),
                              pick(side[0].shift, side[1].shift),
                              side[0].lo,
                              side[0].hi};
    const __m512i vy = _mm512_min_epi32(_mm512_max_epi32(int8_scale16_high_half(vacc, p), p.lo),
                                        p.hi);
    _mm_mask_storeu_epi8(y, mask, _mm512_cvtepi32_epi8(vy));
}

void requantize_channel_by_sign_avx512(const int32_t* acc, int64_t acc_stride, int64_t rows,
                                       int64_t count, int32_t offset, int32_t multiplier,
                                       int32_t shift, int32_t negative_multiplier,
                                       int32_t negative_shift, const Int8Output& out, int8_t* y) {
    if (in_high_half_range(shift) && in_high_half_range(negative_shift)) {
        const Int8HighHalf16 side[2] = {
            channel_high_half(multiplier, shift, out),
            channel_high_half(negative_multiplier, negative_shift, out)};
        const __m512i voffset = _mm512_set1_epi32(offset);
        for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
            for (int64_t i = 0; i < count; i += 16) {
                requantize16_by_sign_high_half(acc + i, first_lanes(count - i), voffset, side,
                                               y + i);
            }
        }
        return;
    }
    const __m512i vmultiplier[2] = {_mm512_set1_epi32(multiplier),
                                    _mm512_set1_epi32(negative_multiplier)};
    const __m512i vshift[2] = {_mm512_set1_epi32(shift), _mm512_set1_epi32(negative_shift)};
    const __m512i voffset = _mm512_set1_epi32(offset);
    for (int64_t r = 0; r < rows; ++r, acc += acc_stride, y += count) {
        for (int64_t i = 0; i < count; i += 16) {
            requantize16_by_sign(acc + i, first_lanes(count - i), voffset, vmultiplier, vshift,
                                 out, y + i);
        }
    }
}

void requantize_channels_by_sign_avx512(const int32_t* acc, int64_t acc_stride, int64_t pixels,
                                        int64_t count, const int32_t* offset,
                                        const int32_t* multiplier, const int32_t* shift,
                                        const int32_t* negative_multiplier,
                                        const int32_t* negative_shift, const Int8Output& out,
                                        int8_t* y, int64_t y_stride) {
    for (int64_t i = 0; i < count; i += 16) {
        const __mmask16 mask = first_lanes(count - i);
        const __m512i vmultiplier[2] = {_mm512_maskz_loadu_epi32(mask, multiplier + i),
                                        _mm512_maskz_loadu_epi32(mask, negative_multiplier + i)};
        const __m512i vshift[2] = {_mm512_maskz_loadu_epi32(mask, shift + i),
                                   _mm512_maskz_loadu_epi32(mask, negative_shift + i)};
        const __m512i voffset = _mm512_maskz_loadu_epi32(mask, offset + i);
        for (int64_t r = 0; r < pixels; ++r) {
            requantize16_by_sign(acc + r * acc_stride + i, mask, voffset, vmultiplier, vshift,
                                 out, y + r * y_stride + i);
        }
    }
}

}  // namespace

extern const Int8RequantizeUkernel kInt8RequantizeAvx512 = {
    requantize_channel_avx512, requantize_channels_avx512, requantize_channel_by_sign_avx512,
    requantize_channels_by_sign_avx512};

}  // namespace detail
}  // namespace qtk
