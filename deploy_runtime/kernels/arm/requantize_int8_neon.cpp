// The int8 epilogue (requantize_int8.h) at Armv8 NEON: 16 values a step, exact in int64 lanes as
// the scalar form. smull multiplies two int32 (|acc M| < 2^62); srshl by -n is the spec's rounding
// shift, (p + 2^(n-1)) >> n, computed without overflow; the saturating narrow to int32 and the
// saturating add of z keep every value outside [lo, hi] outside it, so the clamp gives the bytes.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "../contracts/requantize_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kStep = 16;

// The per-lane constants of 16 values: offset, M, and -n as int64 pairs.
struct Lanes {
    int32x4_t offset[4], multiplier[4];
    int64x2_t shift[8];
};

Lanes broadcast_lanes(int32_t offset, int32_t multiplier, int32_t shift) {
    Lanes l;
    for (int i = 0; i < 4; ++i) {
        l.offset[i] = vdupq_n_s32(offset);
        l.multiplier[i] = vdupq_n_s32(multiplier);
    }
    for (auto& v : l.shift) {
        v = vdupq_n_s64(-int64_t{shift});
    }
    return l;
}

// Channels [0, count) of the arrays (count <= 16; the lanes past it requantize 0 by M 0).
Lanes channel_lanes(const int32_t* offset, const int32_t* multiplier, const int32_t* shift,
                    int64_t count) {
    int32_t o[kStep] = {}, m[kStep] = {}, n[kStep] = {};
    std::fill(n, n + kStep, 1);
    std::memcpy(o, offset, size_t(count) * 4);
    std::memcpy(m, multiplier, size_t(count) * 4);
    std::memcpy(n, shift, size_t(count) * 4);
    Lanes l;
    for (int i = 0; i < 4; ++i) {
        l.offset[i] = vld1q_s32(o + 4 * i);
        l.multiplier[i] = vld1q_s32(m + 4 * i);
        const int32x4_t vneg = vnegq_s32(vld1q_s32(n + 4 * i));
        l.shift[2 * i] = vmovl_s32(vget_low_s32(vneg));
        l.shift[2 * i + 1] = vmovl_high_s32(vneg);
    }
    return l;
}

// 16 accumulators at acc (count of them read, count <= 16) to 16 clamped int8.
int8x16_t requantize16(const int32_t* acc, int64_t count, const Lanes& l, const Int8Output& out) {
    int32_t tail[kStep] = {};
    if (count < kStep) {
        std::memcpy(tail, acc, size_t(count) * 4);
        acc = tail;
    }
    const int32x4_t vz = vdupq_n_s32(out.zero_point);
    const int32x4_t vlo = vdupq_n_s32(out.lo), vhi = vdupq_n_s32(out.hi);
    int16x4_t vhalf[4];
    for (int i = 0; i < 4; ++i) {
        const int32x4_t va = vaddq_s32(vld1q_s32(acc + 4 * i), l.offset[i]);  // wraps, as int32
        const int64x2_t vlow = vrshlq_s64(
            vmull_s32(vget_low_s32(va), vget_low_s32(l.multiplier[i])), l.shift[2 * i]);
        const int64x2_t vhigh = vrshlq_s64(vmull_high_s32(va, l.multiplier[i]), l.shift[2 * i + 1]);
        int32x4_t v = vqaddq_s32(vcombine_s32(vqmovn_s64(vlow), vqmovn_s64(vhigh)), vz);
        v = vminq_s32(vmaxq_s32(v, vlo), vhi);
        vhalf[i] = vmovn_s32(v);
    }
    return vcombine_s8(vmovn_s16(vcombine_s16(vhalf[0], vhalf[1])),
                       vmovn_s16(vcombine_s16(vhalf[2], vhalf[3])));
}

void store(int8x16_t v, int64_t count, int8_t* y) {
    if (count >= kStep) {
        vst1q_s8(y, v);
        return;
    }
    int8_t bytes[kStep];
    vst1q_s8(bytes, v);
    std::memcpy(y, bytes, size_t(count));
}

void channel(const int32_t* acc, int64_t acc_stride, int64_t rows, int64_t count, int32_t offset,
             int32_t multiplier, int32_t shift, const Int8Output& out, int8_t* y) {
    const Lanes l = broadcast_lanes(offset, multiplier, shift);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < count; i += kStep) {
            const int64_t n = std::min(kStep, count - i);
            store(requantize16(acc + r * acc_stride + i, n, l, out), n, y + r * count + i);
        }
    }
}

void channels(const int32_t* acc, int64_t acc_stride, int64_t pixels, int64_t count,
              const int32_t* offset, const int32_t* multiplier, const int32_t* shift,
              const Int8Output& out, int8_t* y, int64_t y_stride) {
    for (int64_t i = 0; i < count; i += kStep) {
        const int64_t n = std::min(kStep, count - i);
        const Lanes l = channel_lanes(offset + i, multiplier + i, shift + i, n);
        for (int64_t p = 0; p < pixels; ++p) {
            store(requantize16(acc + p * acc_stride + i, n, l, out), n, y + p * y_stride + i);
        }
    }
}

}  // namespace

extern const Int8RequantizeUkernel kInt8RequantizeNeon = {channel, channels};

}  // namespace detail
}  // namespace qtk
