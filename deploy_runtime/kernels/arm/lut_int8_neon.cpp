// The int8 table lookup (lut_int8.h) at Armv8 NEON: 16 bytes a step through the 256-entry table
// held in 16 registers, as four 64-entry lookups (tbl, then tbx for the later quarters: an index
// past a quarter's 64 entries leaves the byte as it was), with the index u = x + 128 (x's sign bit
// flipped) less 64 per quarter.
#include <arm_neon.h>

#include <cstring>

#include "../contracts/lut_int8.h"

namespace qtk {
namespace detail {
namespace {

void lut(const int8_t* x, int64_t count, const int8_t* table, int8_t* y) {
    const uint8_t* t = reinterpret_cast<const uint8_t*>(table);
    const uint8x16x4_t vquarter0 = vld1q_u8_x4(t), vquarter1 = vld1q_u8_x4(t + 64);
    const uint8x16x4_t vquarter2 = vld1q_u8_x4(t + 128), vquarter3 = vld1q_u8_x4(t + 192);
    const uint8x16_t vflip = vdupq_n_u8(0x80), v64 = vdupq_n_u8(64);
    const auto lookup = [&](uint8x16_t vx) {
        uint8x16_t vu = veorq_u8(vx, vflip);
        uint8x16_t vy = vqtbl4q_u8(vquarter0, vu);
        vu = vsubq_u8(vu, v64);
        vy = vqtbx4q_u8(vy, vquarter1, vu);
        vu = vsubq_u8(vu, v64);
        vy = vqtbx4q_u8(vy, vquarter2, vu);
        vu = vsubq_u8(vu, v64);
        return vqtbx4q_u8(vy, vquarter3, vu);
    };
    const uint8_t* in = reinterpret_cast<const uint8_t*>(x);
    uint8_t* out = reinterpret_cast<uint8_t*>(y);
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
        vst1q_u8(out + i, lookup(vld1q_u8(in + i)));
    }
    if (i < count) {
        uint8_t tail[16] = {};
        std::memcpy(tail, in + i, size_t(count - i));
        vst1q_u8(tail, lookup(vld1q_u8(tail)));
        std::memcpy(out + i, tail, size_t(count - i));
    }
}

}  // namespace

extern const Int8LutUkernel kInt8LutNeon = {lut};

}  // namespace detail
}  // namespace qtk
