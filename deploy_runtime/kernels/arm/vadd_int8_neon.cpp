// The int8 add (vadd_int8.h) at Armv8 NEON: 16 elements a step, exact in int64 lanes as the scalar
// form: q - z in int16, its products with M (below 2^39) summed by smull and smlal, srshl by -n
// for the spec's rounding shift, then the saturating narrow and add of z and the clamp, as the
// requantization (requantize_int8_neon.cpp).
#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "../contracts/vadd_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kStep = 16;

void vadd(const int8_t* a, const int8_t* b, int64_t count, const Int8AddParams& p, int8_t* y) {
    const int16x8_t vza = vdupq_n_s16(static_cast<int16_t>(p.a_zero_point));
    const int16x8_t vzb = vdupq_n_s16(static_cast<int16_t>(p.b_zero_point));
    const int32x2_t vma = vdup_n_s32(p.a_multiplier), vmb = vdup_n_s32(p.b_multiplier);
    const int64x2_t vshift = vdupq_n_s64(-int64_t{p.shift});
    const int32x4_t vz = vdupq_n_s32(p.zero_point);
    const int32x4_t vlo = vdupq_n_s32(p.lo), vhi = vdupq_n_s32(p.hi);
    // Two int32 differences of a and b -> two requantized int32.
    const auto pair = [&](int32x2_t vda, int32x2_t vdb) {
        return vqmovn_s64(vrshlq_s64(vmlal_s32(vmull_s32(vda, vma), vdb, vmb), vshift));
    };
    // Four int16 differences of a and b -> four clamped values as int16.
    const auto quad = [&](int16x4_t vda, int16x4_t vdb) {
        const int32x4_t vda32 = vmovl_s16(vda), vdb32 = vmovl_s16(vdb);
        int32x4_t v = vcombine_s32(pair(vget_low_s32(vda32), vget_low_s32(vdb32)),
                                   pair(vget_high_s32(vda32), vget_high_s32(vdb32)));
        v = vminq_s32(vmaxq_s32(vqaddq_s32(v, vz), vlo), vhi);
        return vmovn_s32(v);
    };
    for (int64_t i = 0; i < count; i += kStep) {
        const int64_t n = std::min(kStep, count - i);
        int8_t ta[kStep] = {}, tb[kStep] = {}, ty[kStep];
        const int8_t* pa = a + i;
        const int8_t* pb = b + i;
        if (n < kStep) {
            std::memcpy(ta, pa, size_t(n));
            std::memcpy(tb, pb, size_t(n));
            pa = ta;
            pb = tb;
        }
        const int8x16_t va = vld1q_s8(pa), vb = vld1q_s8(pb);
        const int16x8_t vda_lo = vsubq_s16(vmovl_s8(vget_low_s8(va)), vza);
        const int16x8_t vda_hi = vsubq_s16(vmovl_high_s8(va), vza);
        const int16x8_t vdb_lo = vsubq_s16(vmovl_s8(vget_low_s8(vb)), vzb);
        const int16x8_t vdb_hi = vsubq_s16(vmovl_high_s8(vb), vzb);
        const int16x8_t vlow = vcombine_s16(quad(vget_low_s16(vda_lo), vget_low_s16(vdb_lo)),
                                            quad(vget_high_s16(vda_lo), vget_high_s16(vdb_lo)));
        const int16x8_t vhigh = vcombine_s16(quad(vget_low_s16(vda_hi), vget_low_s16(vdb_hi)),
                                             quad(vget_high_s16(vda_hi), vget_high_s16(vdb_hi)));
        const int8x16_t vy = vcombine_s8(vmovn_s16(vlow), vmovn_s16(vhigh));
        if (n == kStep) {
            vst1q_s8(y + i, vy);
        } else {
            vst1q_s8(ty, vy);
            std::memcpy(y + i, ty, size_t(n));
        }
    }
}

}  // namespace

extern const Int8VaddUkernel kInt8VaddNeon = {vadd};

}  // namespace detail
}  // namespace qtk
