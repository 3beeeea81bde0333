// qtk._C.arith: the C++ arithmetic of deploy_runtime/include/qtk/arithmetic.h, elementwise over
// 1-D numpy arrays of equal length (row-wise over 2-D ones for softmax and the normalization), so
// tests/test_arithmetic.py and tests/test_integer_normalization.py can hold it against
// qtk/arithmetic.py. Arguments outside the ranges where the header is exact (docs/
// quantization_spec.md) are refused with QtkError instead of computing undefined results.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "qtk/arithmetic.h"
#include "qtk/runtime.h"

namespace py = pybind11;

namespace {

using qtk::arith::kInt8Max;
using qtk::arith::kInt8Min;

// A C-contiguous 1-D array of exactly dtype T (and of length `length` when given).
template <typename T>
py::array_t<T, py::array::c_style> vector_arg(const std::string& fn, const char* name,
                                              const char* dtype, const py::handle& obj,
                                              py::ssize_t length = -1) {
    if (!py::isinstance<py::array_t<T>>(obj)) {
        const std::string got =
            py::isinstance<py::array>(obj)
                ? std::string(py::str(py::reinterpret_borrow<py::array>(obj).dtype()))
                : std::string(py::str(py::type::handle_of(obj).attr("__name__")));
        throw qtk::Error(fn + ": " + name + " must be a numpy " + dtype + " array, got " + got);
    }
    auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(obj);
    if (a.ndim() != 1) {
        throw qtk::Error(fn + ": " + name + " must be 1-D, got " + std::to_string(a.ndim()) +
                         " dims");
    }
    if (length >= 0 && a.shape(0) != length) {
        throw qtk::Error(fn + ": " + name + " has length " + std::to_string(a.shape(0)) +
                         ", expected " + std::to_string(length) + " like the first array");
    }
    return a;
}

int32_t int_arg(const std::string& fn, const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
        throw qtk::Error(fn + ": " + name + " = " + std::to_string(v) + " is outside [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return static_cast<int32_t>(v);
}

int32_t shift_arg(const std::string& fn, int64_t v) { return int_arg(fn, "shift", v, 1, 62); }

int32_t zero_point_arg(const std::string& fn, const char* name, int64_t v) {
    return int_arg(fn, name, v, kInt8Min, kInt8Max);
}

void check_clamp(const std::string& fn, int32_t lo, int32_t hi) {
    if (lo > hi) {
        throw qtk::Error(fn + ": lo " + std::to_string(lo) + " > hi " + std::to_string(hi));
    }
}

float scale_arg(const std::string& fn, double scale) {
    const float s = static_cast<float>(scale);  // scales are binary32 (spec 1)
    if (!(std::isfinite(s) && s > 0.0f)) {
        throw qtk::Error(fn + ": scale " + std::to_string(scale) + " must be finite and > 0");
    }
    return s;
}

// Element i of a shift array, refused outside [1, 62].
int32_t shift_at(const std::string& fn, const char* name,
                 const py::array_t<int32_t, py::array::c_style>& shifts, py::ssize_t i) {
    const int32_t n = shifts.data()[i];
    if (n < 1 || n > 62) {
        throw qtk::Error(fn + ": " + name + "[" + std::to_string(i) + "] = " + std::to_string(n) +
                         " is outside [1, 62]");
    }
    return n;
}

py::array_t<int8_t> requantize(const py::handle& acc_obj, const py::handle& mult_obj,
                               const py::handle& shift_obj, int64_t zero_point, int64_t lo,
                               int64_t hi) {
    const std::string fn = "requantize";
    const auto acc = vector_arg<int32_t>(fn, "acc", "int32", acc_obj);
    const auto mult = vector_arg<int32_t>(fn, "multiplier", "int32", mult_obj, acc.shape(0));
    const auto shift = vector_arg<int32_t>(fn, "shift", "int32", shift_obj, acc.shape(0));
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    const int32_t l = zero_point_arg(fn, "lo", lo), h = zero_point_arg(fn, "hi", hi);
    check_clamp(fn, l, h);
    py::array_t<int8_t> out(acc.shape(0));
    int8_t* y = out.mutable_data();
    for (py::ssize_t i = 0; i < acc.shape(0); ++i) {
        const int32_t n = shift_at(fn, "shift", shift, i);
        y[i] = qtk::arith::requantize(acc.data()[i], mult.data()[i], n, z, l, h);
    }
    return out;
}

py::array_t<int8_t> requantize_by_sign(const py::handle& acc_obj, const py::handle& mult_obj,
                                       const py::handle& shift_obj,
                                       const py::handle& negative_mult_obj,
                                       const py::handle& negative_shift_obj, int64_t zero_point,
                                       int64_t lo, int64_t hi) {
    const std::string fn = "requantize_by_sign";
    const auto acc = vector_arg<int32_t>(fn, "acc", "int32", acc_obj);
    const py::ssize_t length = acc.shape(0);
    const auto mult = vector_arg<int32_t>(fn, "multiplier", "int32", mult_obj, length);
    const auto shift = vector_arg<int32_t>(fn, "shift", "int32", shift_obj, length);
    const auto negative_mult =
        vector_arg<int32_t>(fn, "negative_multiplier", "int32", negative_mult_obj, length);
    const auto negative_shift =
        vector_arg<int32_t>(fn, "negative_shift", "int32", negative_shift_obj, length);
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    const int32_t l = zero_point_arg(fn, "lo", lo), h = zero_point_arg(fn, "hi", hi);
    check_clamp(fn, l, h);
    py::array_t<int8_t> out(length);
    int8_t* y = out.mutable_data();
    for (py::ssize_t i = 0; i < length; ++i) {
        y[i] = qtk::arith::requantize_by_sign(
            acc.data()[i], mult.data()[i], shift_at(fn, "shift", shift, i),
            negative_mult.data()[i], shift_at(fn, "negative_shift", negative_shift, i), z, l, h);
    }
    return out;
}

py::array_t<int8_t> rescale_add(const py::handle& a_obj, int64_t za, int64_t ma,
                                const py::handle& b_obj, int64_t zb, int64_t mb, int64_t shift,
                                int64_t zero_point, int64_t lo, int64_t hi) {
    const std::string fn = "rescale_add";
    const auto a = vector_arg<int8_t>(fn, "a", "int8", a_obj);
    const auto b = vector_arg<int8_t>(fn, "b", "int8", b_obj, a.shape(0));
    const int32_t za32 = zero_point_arg(fn, "za", za), zb32 = zero_point_arg(fn, "zb", zb);
    const int32_t ma32 = int_arg(fn, "ma", ma, INT32_MIN, INT32_MAX),
                  mb32 = int_arg(fn, "mb", mb, INT32_MIN, INT32_MAX);
    const int32_t n = shift_arg(fn, shift);
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    const int32_t l = zero_point_arg(fn, "lo", lo), h = zero_point_arg(fn, "hi", hi);
    check_clamp(fn, l, h);
    py::array_t<int8_t> out(a.shape(0));
    int8_t* y = out.mutable_data();
    for (py::ssize_t i = 0; i < a.shape(0); ++i) {
        y[i] =
            qtk::arith::rescale_add(a.data()[i], za32, ma32, b.data()[i], zb32, mb32, n, z, l, h);
    }
    return out;
}

py::array_t<int8_t> quantize(const py::handle& x_obj, double scale, int64_t zero_point) {
    const std::string fn = "quantize";
    const auto x = vector_arg<float>(fn, "x", "float32", x_obj);
    const float inv_scale = qtk::arith::inverse_scale(scale_arg(fn, scale));
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    py::array_t<int8_t> out(x.shape(0));
    int8_t* q = out.mutable_data();
    for (py::ssize_t i = 0; i < x.shape(0); ++i) {
        q[i] = qtk::arith::quantize(x.data()[i], inv_scale, z);
    }
    return out;
}

py::array_t<float> dequantize(const py::handle& q_obj, double scale, int64_t zero_point) {
    const std::string fn = "dequantize";
    const auto q = vector_arg<int8_t>(fn, "q", "int8", q_obj);
    const float s = scale_arg(fn, scale);
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    py::array_t<float> out(q.shape(0));
    float* x = out.mutable_data();
    for (py::ssize_t i = 0; i < q.shape(0); ++i) {
        x[i] = qtk::arith::dequantize(q.data()[i], s, z);
    }
    return out;
}

py::array_t<int32_t> binary_sign(const py::handle& q_obj, int64_t zero_point) {
    const std::string fn = "binary_sign";
    const auto q = vector_arg<int8_t>(fn, "q", "int8", q_obj);
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    py::array_t<int32_t> out(q.shape(0));
    int32_t* y = out.mutable_data();
    for (py::ssize_t i = 0; i < q.shape(0); ++i) {
        y[i] = qtk::arith::binary_sign(q.data()[i], z);
    }
    return out;
}

py::array_t<int32_t> round_half_away_div(const py::handle& sum_obj, const py::handle& divisor_obj) {
    const std::string fn = "round_half_away_div";
    const auto sum = vector_arg<int64_t>(fn, "sum", "int64", sum_obj);
    const auto divisor = vector_arg<int64_t>(fn, "divisor", "int64", divisor_obj, sum.shape(0));
    // Exact range: 2|S| + d stays below 2^63. A quotient beyond int32 wraps, as numpy's
    // astype(int32) does.
    constexpr int64_t kLimit = int64_t{1} << 61;
    py::array_t<int32_t> out(sum.shape(0));
    int32_t* y = out.mutable_data();
    for (py::ssize_t i = 0; i < sum.shape(0); ++i) {
        const int64_t s = sum.data()[i], d = divisor.data()[i];
        if (d <= 0 || d > kLimit || s > kLimit || s < -kLimit) {
            const std::string at = "[" + std::to_string(i) + "]";
            throw qtk::Error(fn + ": sum" + at + " = " + std::to_string(s) + ", divisor" + at +
                             " = " + std::to_string(d) +
                             (d <= 0 ? ": the divisor must be > 0"
                                     : " is outside the exact range |sum|, divisor <= 2^61"));
        }
        y[i] = static_cast<int32_t>(qtk::arith::round_half_away_div(s, d));
    }
    return out;
}

py::array_t<int64_t> isqrt(const py::handle& v_obj) {
    const std::string fn = "isqrt";
    const auto v = vector_arg<int64_t>(fn, "v", "int64", v_obj);
    py::array_t<int64_t> out(v.shape(0));
    int64_t* r = out.mutable_data();
    for (py::ssize_t i = 0; i < v.shape(0); ++i) {
        if (v.data()[i] < 0) {
            throw qtk::Error(fn + ": v[" + std::to_string(i) + "] = " +
                             std::to_string(v.data()[i]) + " is negative");
        }
        r[i] = static_cast<int64_t>(qtk::arith::isqrt(static_cast<uint64_t>(v.data()[i])));
    }
    return out;
}

// A C-contiguous 2-D int8 array [rows, length] with length >= 1.
py::array_t<int8_t, py::array::c_style> rows_arg(const std::string& fn, const py::handle& obj) {
    if (!py::isinstance<py::array_t<int8_t>>(obj)) {
        throw qtk::Error(fn + ": q must be a numpy int8 array");
    }
    auto a = py::array_t<int8_t, py::array::c_style | py::array::forcecast>::ensure(obj);
    if (a.ndim() != 2 || a.shape(1) < 1) {
        throw qtk::Error(fn + ": q must be 2-D [rows, length] with length >= 1");
    }
    return a;
}

py::array_t<int8_t> softmax_rows(const py::handle& q_obj, const py::handle& table_obj,
                                 int64_t multiplier, int64_t zero_point, int64_t lo, int64_t hi) {
    const std::string fn = "softmax_rows";
    const auto q = rows_arg(fn, q_obj);
    const auto table64 = vector_arg<int64_t>(fn, "table", "int64", table_obj);
    if (table64.shape(0) != 256) {
        throw qtk::Error(fn + ": table has length " + std::to_string(table64.shape(0)) +
                         ", expected 256");
    }
    std::vector<int32_t> table(256);
    for (size_t d = 0; d < 256; ++d) {
        // T[0] = 2^20 (the row maximum's exp(0)), so no row sums to 0.
        const int64_t lowest = d == 0 ? qtk::arith::kSoftmaxTableOne : 0;
        table[d] = int_arg(fn, "table[d]", table64.data()[d], lowest, qtk::arith::kSoftmaxTableOne);
    }
    const int32_t a = int_arg(fn, "multiplier", multiplier, 1, qtk::arith::kSoftmaxMaxMultiplier);
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    const int32_t l = zero_point_arg(fn, "lo", lo), h = zero_point_arg(fn, "hi", hi);
    check_clamp(fn, l, h);
    const py::ssize_t rows = q.shape(0), length = q.shape(1);
    if (length > qtk::arith::kSoftmaxMaxRow) {
        throw qtk::Error(fn + ": rows of " + std::to_string(length) + " values exceed 2^20");
    }
    py::array_t<int8_t> out({rows, length});
    for (py::ssize_t r = 0; r < rows; ++r) {
        qtk::arith::softmax_row(q.data() + r * length, out.mutable_data() + r * length, length, 1,
                                table.data(), a, z, l, h);
    }
    return out;
}

// Spec 19's Q16 values of each row of an int8 [R, C] array, from the row statistics `stats`
// (arith::norm_row for layer/group norm, arith::l2_row for 19.1); rows up to `max_row` values.
template <typename RowStats>
py::array_t<int64_t> q16_rows(const std::string& fn, const py::handle& q_obj, int64_t zero_point,
                              int64_t eps_term, int64_t max_row, const char* max_text,
                              RowStats stats_of) {
    const auto q = rows_arg(fn, q_obj);
    const int32_t z = zero_point_arg(fn, "zero_point", zero_point);
    if (eps_term < 1 || eps_term > qtk::arith::kNormMaxEpsTerm) {
        throw qtk::Error(fn + ": eps_term = " + std::to_string(eps_term) +
                         " is outside [1, 2^61]");
    }
    const py::ssize_t rows = q.shape(0), count = q.shape(1);
    if (count > max_row) {
        throw qtk::Error(fn + ": rows of " + std::to_string(count) + " values exceed " +
                         max_text);
    }
    py::array_t<int64_t> out({rows, count});
    for (py::ssize_t r = 0; r < rows; ++r) {
        const int8_t* row = q.data() + r * count;
        const qtk::arith::NormRow stats = stats_of(row, count, 1, z, eps_term);
        for (py::ssize_t i = 0; i < count; ++i) {
            out.mutable_data()[r * count + i] = qtk::arith::normalized_q16(stats, row[i], z);
        }
    }
    return out;
}

py::array_t<int64_t> normalized_q16(const py::handle& q_obj, int64_t zero_point,
                                    int64_t eps_term) {
    return q16_rows("normalized_q16", q_obj, zero_point, eps_term, qtk::arith::kNormMaxRow,
                    "2^14", qtk::arith::norm_row);
}

py::array_t<int64_t> l2_normalized_q16(const py::handle& q_obj, int64_t zero_point,
                                       int64_t eps_term) {
    return q16_rows("l2_normalized_q16", q_obj, zero_point, eps_term, qtk::arith::kL2NormMaxRow,
                    "2^45", qtk::arith::l2_row);
}

}  // namespace

void bind_arith(py::module_& m) {
    m.def("requantize", &requantize, py::arg("acc"), py::arg("multiplier"), py::arg("shift"),
          py::arg("zero_point"), py::arg("lo"), py::arg("hi"),
          "int32 acc, multiplier, shift arrays -> int8 (spec 2).");
    m.def("requantize_by_sign", &requantize_by_sign, py::arg("acc"), py::arg("multiplier"),
          py::arg("shift"), py::arg("negative_multiplier"), py::arg("negative_shift"),
          py::arg("zero_point"), py::arg("lo"), py::arg("hi"),
          "int32 arrays -> int8, acc >= 0 by (multiplier, shift), below by the negative pair "
          "(spec 22).");
    m.def("rescale_add", &rescale_add, py::arg("a"), py::arg("za"), py::arg("ma"), py::arg("b"),
          py::arg("zb"), py::arg("mb"), py::arg("shift"), py::arg("zero_point"), py::arg("lo"),
          py::arg("hi"), "int8 a, b arrays -> int8 rescaled sum (spec 3).");
    m.def("quantize", &quantize, py::arg("x"), py::arg("scale"), py::arg("zero_point"),
          "float32 array -> int8 (spec 1); scale is rounded to float32, inv_scale computed once.");
    m.def("dequantize", &dequantize, py::arg("q"), py::arg("scale"), py::arg("zero_point"),
          "int8 array -> float32 (spec 1).");
    m.def("binary_sign", &binary_sign, py::arg("q"), py::arg("zero_point"),
          "int8 array -> int32 +1 where q >= zero_point, else -1 (spec 24).");
    m.def("round_half_away_div", &round_half_away_div, py::arg("sum"), py::arg("divisor"),
          "int64 sum, divisor arrays -> int32 sign(S) * floor((2|S| + d) / (2d)) (spec 6).");
    m.def("isqrt", &isqrt, py::arg("v"), "non-negative int64 array -> floor square roots (spec 19).");
    m.def("softmax_rows", &softmax_rows, py::arg("q"), py::arg("table"), py::arg("multiplier"),
          py::arg("zero_point"), py::arg("lo"), py::arg("hi"),
          "int8 [rows, length], int64 table[256] -> int8 softmax of each row (spec 18).");
    m.def("normalized_q16", &normalized_q16, py::arg("q"), py::arg("zero_point"),
          py::arg("eps_term"), "int8 [rows, C] -> int64 Q16 normalized values per row (spec 19).");
    m.def("l2_normalized_q16", &l2_normalized_q16, py::arg("q"), py::arg("zero_point"),
          py::arg("eps_term"), "int8 [rows, L] -> int64 Q16 L2-normalized values per row "
          "(spec 19.1).");
}
