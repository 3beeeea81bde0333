// The float32 functions of function_float32.h, written once over a vector type V that each ISA
// file defines (function_float32_{avx2,avx512}.cpp): V::kLanes floats a vector and
//   load(p, n) / store(p, v, n): the first n lanes (n <= kLanes; the rest read as 0, not written),
//   set1, add, sub, mul, div, fmadd(a, b, c) = a b + c rounded once,
//   max(a, b) / min(a, b): a > b ? a : b / a < b ? a : b, so b where either is NaN,
//   round(v): to the nearest integer, ties to even,
//   scale(v, n): v 2^n for integral n in [-150, 129], over- and underflowing as a product would.
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {
namespace function_float32 {

// exp for every lane: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, r in two steps (the
// high part of ln2 has 9 significant bits, so n ln2_hi is exact for the |n| <= 150 here); exp(r)
// by Cephes's expf polynomial, then times 2^n. x is first
// clamped to [-104, 89] (exp is 0 or infinity in float beyond, and n stays in scale's range);
// NaN passes through the clamp (max and min return their second operand) and the polynomial.
template <typename V>
typename V::Vec exp_lanes(typename V::Vec x) {
    x = V::min(V::set1(89.0f), V::max(V::set1(-104.0f), x));
    const typename V::Vec n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
    typename V::Vec r = V::fmadd(n, V::set1(-0.693359375f), x);
    r = V::fmadd(n, V::set1(2.12194440e-4f), r);
    typename V::Vec p = V::set1(1.9875691500e-4f);
    p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
    p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
    p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
    p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
    p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
    p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
    return V::scale(p, n);
}

template <typename V>
typename V::Vec relu6_of_x_plus_3(typename V::Vec x) {
    return V::min(V::set1(6.0f), V::max(V::set1(0.0f), V::add(x, V::set1(3.0f))));
}

template <typename V>
typename V::Vec sigmoid_lanes(typename V::Vec x) {
    const typename V::Vec one = V::set1(1.0f);
    return V::div(one, V::add(one, exp_lanes<V>(V::sub(V::set1(0.0f), x))));
}

template <typename V>
struct Hardswish {
    static typename V::Vec apply(typename V::Vec x) {
        return V::div(V::mul(x, relu6_of_x_plus_3<V>(x)), V::set1(6.0f));
    }
};
template <typename V>
struct Hardsigmoid {
    static typename V::Vec apply(typename V::Vec x) {
        return V::div(relu6_of_x_plus_3<V>(x), V::set1(6.0f));
    }
};
template <typename V>
struct Sigmoid {
    static typename V::Vec apply(typename V::Vec x) { return sigmoid_lanes<V>(x); }
};
template <typename V>
struct Silu {
    static typename V::Vec apply(typename V::Vec x) { return V::mul(x, sigmoid_lanes<V>(x)); }
};

// y[i] = F::apply(x[i]) for i < count, the last vector partial.
template <typename V, template <typename> class F>
void apply(const float* x, int64_t count, float* y) {
    int64_t i = 0;
    for (; i + V::kLanes <= count; i += V::kLanes) {
        V::store(y + i, F<V>::apply(V::load(x + i, V::kLanes)), V::kLanes);
    }
    if (i < count) {
        V::store(y + i, F<V>::apply(V::load(x + i, count - i)), count - i);
    }
}

}  // namespace function_float32
}  // namespace detail
}  // namespace qtk
