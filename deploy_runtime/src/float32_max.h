// max_pool2d float32's maximum of two values, one rule for the reference and the fast kernels.
// It gives the same value for any order of a window's elements, so a kernel may reduce rows first
// and columns after: a NaN wins (torch's rule), and of two equal values the bitwise AND, which
// makes +0 win over -0 (IEEE 754-2019 maximum) and leaves every other value as it is. Only which
// NaN of a window with several different NaNs comes out may depend on the order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace qtk {
namespace detail {

inline float float32_max(float best, float x) {
    if (std::isnan(x) || x > best) {
        return x;
    }
    if (x == best) {
        uint32_t a, b;
        std::memcpy(&a, &best, 4);
        std::memcpy(&b, &x, 4);
        a &= b;
        std::memcpy(&best, &a, 4);
    }
    return best;
}

}  // namespace detail
}  // namespace qtk
