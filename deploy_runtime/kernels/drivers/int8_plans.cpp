// The plain-data plans of the x86 int8 epilogues (requantize_int8.h's Int8Output and
// Int8HighHalfBlock, vadd_int8.h's Int8AddParams): every constant the vector forms broadcast or
// load, derived once here, in baseline code, from the arithmetic header, so no ISA file derives
// one again (contract 2). The tests hold each plan against arith:: (tests/test_conv2d_algos.cpp).
#include <cstdlib>

#include "../contracts/requantize_int8.h"
#include "../contracts/vadd_int8.h"
#include "qtk/arithmetic.h"

namespace qtk {
namespace detail {

Int8Output::Int8Output(int32_t zero_point_, int32_t lo_, int32_t hi_)
    : zero_point(zero_point_),
      lo(lo_),
      hi(hi_),
      lo_from_zero_point(int64_t{lo_} - zero_point_),
      hi_from_zero_point(int64_t{hi_} - zero_point_),
      round_odd(2 * zero_point_ + 1) {}

bool int8_high_half_blocks(const int32_t* offset, const int32_t* multiplier, const int32_t* shift,
                           int64_t count, const Int8Output& out, Int8HighHalfBlock* blocks) {
    // A zero multiplier requantizes to z by any shift (a PReLU slope of 0): it takes the least.
    const auto shift_of = [&](int64_t c) {
        return multiplier[c] == 0 ? kHighHalfMinShift : shift[c];
    };
    for (int64_t c = 0; c < count; ++c) {
        if (shift_of(c) < kHighHalfMinShift || shift_of(c) > kHighHalfMaxShift) {
            return false;
        }
    }
    for (int64_t b = 0; b < (count + 15) / 16; ++b) {
        Int8HighHalfBlock& block = blocks[b];
        block = {};
        for (int64_t i = 0; i < 16; ++i) {
            const int64_t c = 16 * b + i;
            const bool valid = c < count;
            block.offset[i] = valid ? offset[c] : 0;
            block.multiplier[i] = valid ? multiplier[c] : 0;
            if (i % 2 == 1) {
                block.multiplier_odd[i - 1] = block.multiplier[i];
            }
            const int32_t n = valid ? shift_of(c) : kHighHalfMinShift;
            block.round[i] = valid ? out.round_odd * (int32_t{1} << (n - kHighHalfMinShift)) : 0;
            block.shift[i] = n - kHighHalfDroppedBits;
        }
    }
    return true;
}

namespace {

// The split M = H 2^16 + L of vadd_int8.h, or false where M >= 2^31 - 2^15 leaves H at 2^15.
bool split_multiplier(int32_t multiplier, int16_t* high, int16_t* low) {
    const int32_t l = static_cast<int16_t>(multiplier & 0xFFFF);  // [-2^15, 2^15)
    const int64_t h = (int64_t{multiplier} - l) >> 16;
    if (h >= (1 << 15)) {
        return false;
    }
    *high = static_cast<int16_t>(h);
    *low = static_cast<int16_t>(l);
    return true;
}

int32_t int16_pair(int16_t first, int16_t second) {  // first in the low half
    return static_cast<int32_t>(uint32_t(uint16_t(first)) | uint32_t(uint16_t(second)) << 16);
}

}  // namespace

Int8AddParams::Int8AddParams(int32_t a_zero_point_, int32_t a_multiplier_, int32_t b_zero_point_,
                             int32_t b_multiplier_, int32_t shift_, int32_t zero_point_,
                             int32_t lo_, int32_t hi_)
    : a_zero_point(a_zero_point_),
      a_multiplier(a_multiplier_),
      b_zero_point(b_zero_point_),
      b_multiplier(b_multiplier_),
      shift(shift_),
      zero_point(zero_point_),
      lo(lo_),
      hi(hi_),
      // A conv without a fused add carries shift 0: no form runs then.
      round(shift_ >= 1 ? arith::rounding_constant(shift_) : 0),
      lo_from_zero_point(int64_t{lo_} - zero_point_),
      hi_from_zero_point(int64_t{hi_} - zero_point_),
      pairs(false),
      high_pair(0),
      low_pair(0),
      pair_low_init(0),
      pair_constant(0),
      pair_shift(0) {
    int16_t a_high, a_low, b_high, b_low;
    if (shift_ < 17 || shift_ > 46 || !split_multiplier(a_multiplier_, &a_high, &a_low) ||
        !split_multiplier(b_multiplier_, &b_high, &b_low)) {
        return;
    }
    // The header's constants (on u = q + 128), in int64 until they are known to fit.
    const int64_t za = int64_t{a_zero_point_} + 128, zb = int64_t{b_zero_point_} + 128;
    const int64_t low_init = -(za * a_low + zb * b_low);
    const int64_t constant = arith::rounding_constant(shift_ - 16) +
                             int64_t{zero_point_} * (int64_t{1} << (shift_ - 16)) -
                             (za * a_high + zb * b_high);
    if (std::abs(constant) + (int64_t{1} << 24) + (int64_t{1} << 9) >= (int64_t{1} << 31)) {
        return;
    }
    pairs = true;
    high_pair = int16_pair(a_high, b_high);
    low_pair = int16_pair(a_low, b_low);
    pair_low_init = static_cast<int32_t>(low_init);
    pair_constant = static_cast<int32_t>(constant);
    pair_shift = shift_ - 16;
}

}  // namespace detail
}  // namespace qtk
