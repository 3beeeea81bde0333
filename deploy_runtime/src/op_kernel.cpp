#include "op_kernel.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "qtk/arithmetic.h"

namespace qtk {
namespace detail {

void OpKernel::fail(const std::string& message) const { throw Error(label_ + ": " + message); }

void OpKernel::expect_rank(const Shape& shape, size_t rank, const char* what) const {
    if (shape.size() != rank) {
        fail(std::string(what) + " must have rank " + std::to_string(rank) + ", got shape " +
             to_string(shape));
    }
}

std::string node_label(const Node& node) { return "node '" + node.name + "' (" + node.op + ")"; }

void NodeView::fail(const std::string& message) const { throw Error(label() + ": " + message); }

void NodeView::expect_input_count(size_t count) const {
    if (node_.inputs.size() != count) {
        fail("expects " + std::to_string(count) + " inputs, got " +
             std::to_string(node_.inputs.size()));
    }
}

void NodeView::expect_output_count(size_t count) const {
    if (node_.outputs.size() != count) {
        fail("expects " + std::to_string(count) + " outputs, got " +
             std::to_string(node_.outputs.size()));
    }
}

void NodeView::expect_attrs(std::initializer_list<const char*> required,
                            std::initializer_list<const char*> optional) const {
    for (const char* key : required) {
        if (!has_attr(key)) {
            fail(std::string("missing attribute '") + key + "'");
        }
    }
    for (const Attr& a : node_.attrs) {
        bool known = false;
        for (std::initializer_list<const char*> keys : {required, optional}) {
            for (const char* key : keys) {
                known = known || a.key == key;
            }
        }
        if (!known) {
            fail("unknown attribute '" + a.key + "'");
        }
    }
}

bool NodeView::has_attr(const char* key) const {
    for (const Attr& a : node_.attrs) {
        if (a.key == key) {
            return true;
        }
    }
    return false;
}

bool NodeView::channels_last() const {
    return has_attr("layout") && int_scalar("layout", kLayoutNhwc, kLayoutNhwc) == kLayoutNhwc;
}

const Attr& NodeView::attr(const char* key, AttrKind kind) const {
    for (const Attr& a : node_.attrs) {
        if (a.key == key) {
            if (a.kind != kind) {
                fail("attribute '" + a.key + "' must be " +
                     (kind == AttrKind::kInts ? "an i64" : "an f32") + " list");
            }
            return a;
        }
    }
    fail(std::string("missing attribute '") + key + "'");
}

DType NodeView::dtype() const {
    if (node_.inputs.empty()) {
        fail("expects at least 1 input, got 0");
    }
    return graph_.values[node_.inputs[0]].dtype;
}

const Value& NodeView::activation_input(size_t index, DType dtype) const {
    const Value& v = graph_.values[node_.inputs[index]];
    if (v.constant || v.dtype != dtype) {
        fail("input " + std::to_string(index) + " ('" + v.name + "') must be " +
             (dtype == DType::kInt8 ? "an " : "a ") + dtype_name(dtype) + " activation, got " +
             (v.dtype == DType::kInt8 ? "an " : "a ") + dtype_name(v.dtype) +
             (v.constant ? " constant" : " activation"));
    }
    return v;
}

const Value& NodeView::float32_operand(size_t index) const {
    const Value& v = graph_.values[node_.inputs[index]];
    if (!v.constant) {
        return activation_input(index, DType::kFloat32);
    }
    if (v.dtype != DType::kFloat32) {
        fail("constant input " + std::to_string(index) + " ('" + v.name +
             "') must be float32, got " + dtype_name(v.dtype));
    }
    return v;
}

const Value& NodeView::constant_input(size_t index, const char* role, DType dtype,
                                      size_t rank) const {
    const Value& v = graph_.values[node_.inputs[index]];
    const std::string what = std::string(role) + " '" + v.name + "'";
    if (!v.constant) {
        fail(what + " must be a constant");
    }
    if (v.dtype != dtype) {
        fail(what + " must be " + dtype_name(dtype) + ", got " + dtype_name(v.dtype));
    }
    if (v.shape.size() != rank) {
        fail(what + " must have rank " + std::to_string(rank) + ", got shape " +
             to_string(v.shape));
    }
    return v;
}

const Value& NodeView::output(size_t index, DType dtype) const {
    // The loader has already refused constants as node outputs.
    const Value& v = graph_.values[node_.outputs[index]];
    if (v.dtype != dtype) {
        fail("output '" + v.name + "' must be " + dtype_name(dtype) + ", got " +
             dtype_name(v.dtype));
    }
    return v;
}

void NodeView::expect_same_quantization(const Value& input, const Value& output) const {
    if (input.scale != output.scale || input.zero_point != output.zero_point) {
        fail("output '" + output.name + "' must keep its input's (scale, zero_point) (" +
             std::to_string(input.scale) + ", " + std::to_string(input.zero_point) + "), got (" +
             std::to_string(output.scale) + ", " + std::to_string(output.zero_point) + ")");
    }
}

DType NodeView::expect_data_movement(size_t outputs) const {
    expect_input_count(1);
    expect_output_count(outputs);
    const Value& x = activation_input(0, dtype());
    for (size_t i = 0; i < outputs; ++i) {
        expect_same_quantization(x, output(i, x.dtype));
    }
    return x.dtype;
}

void NodeView::expect_bias_for(const Value& bias, const Value& weight) const {
    if (bias.shape != Shape{weight.shape[0]}) {
        fail("bias '" + bias.name + "' has shape " + to_string(bias.shape) + ", expected [" +
             std::to_string(weight.shape[0]) + "] (one per output channel of weight '" +
             weight.name + "' " + to_string(weight.shape) + ")");
    }
}

const Value& NodeView::expect_weight_layer(size_t inputs, DType dtype, DType bias_dtype,
                                           size_t weight_rank) const {
    expect_input_count(inputs);
    expect_output_count(1);
    activation_input(0, dtype);
    for (size_t i = 3; i < inputs; ++i) {
        activation_input(i, dtype);
    }
    const Value& weight = constant_input(1, "weight", dtype, weight_rank);
    expect_bias_for(constant_input(2, "bias", bias_dtype, 1), weight);
    output(0, dtype);
    return weight;
}

std::vector<int64_t> NodeView::ints(const char* key, size_t count, int64_t lo, int64_t hi) const {
    const Attr& a = attr(key, AttrKind::kInts);
    if (a.ints.size() != count) {
        fail(std::string("attribute '") + key + "' must have " + std::to_string(count) +
             " values, got " + std::to_string(a.ints.size()));
    }
    return int_list(key, lo, hi);
}

std::vector<int64_t> NodeView::int_list(const char* key, int64_t lo, int64_t hi) const {
    const Attr& a = attr(key, AttrKind::kInts);
    for (size_t i = 0; i < a.ints.size(); ++i) {
        if (a.ints[i] < lo || a.ints[i] > hi) {
            fail(std::string("attribute '") + key + "'[" + std::to_string(i) +
                 "] = " + std::to_string(a.ints[i]) + " is outside [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
        }
    }
    return a.ints;
}

std::vector<float> NodeView::floats(const char* key, size_t count) const {
    const Attr& a = attr(key, AttrKind::kFloats);
    if (a.floats.size() != count) {
        fail(std::string("attribute '") + key + "' must have " + std::to_string(count) +
             " values, got " + std::to_string(a.floats.size()));
    }
    for (size_t i = 0; i < count; ++i) {
        if (std::isnan(a.floats[i])) {
            fail(std::string("attribute '") + key + "'[" + std::to_string(i) + "] is NaN");
        }
    }
    return a.floats;
}

int64_t NodeView::int_scalar(const char* key, int64_t lo, int64_t hi) const {
    return ints(key, 1, lo, hi)[0];
}

std::vector<int32_t> NodeView::multipliers(const char* key, size_t count) const {
    const std::vector<int64_t> v = ints(key, count, 0, (int64_t{1} << 31) - 1);
    return std::vector<int32_t>(v.begin(), v.end());
}

std::vector<int32_t> NodeView::shifts(const char* key, size_t count) const {
    const std::vector<int64_t> v = ints(key, count, 1, 62);
    return std::vector<int32_t>(v.begin(), v.end());
}

ClampRange NodeView::clamp(const char* key) const {
    const std::vector<int64_t> v = ints(key, 2, arith::kInt8Min, arith::kInt8Max);
    if (v[0] > v[1]) {
        fail(std::string("attribute '") + key + "' = [" + std::to_string(v[0]) + ", " +
             std::to_string(v[1]) + "] is empty (lo > hi)");
    }
    return ClampRange{static_cast<int32_t>(v[0]), static_cast<int32_t>(v[1])};
}

FloatBounds NodeView::float_bounds(const char* key) const {
    const std::vector<float> v = floats(key, 2);
    if (v[0] > v[1]) {
        fail(std::string("attribute '") + key + "' = [" + std::to_string(v[0]) + ", " +
             std::to_string(v[1]) + "] is empty (lo > hi)");
    }
    return FloatBounds{v[0], v[1]};
}

FloatBounds NodeView::optional_float_bounds(const char* key) const {
    return has_attr(key) ? float_bounds(key) : FloatBounds{};
}

namespace {

// 4-byte little-endian values of any 4-byte type.
template <typename T>
std::vector<T> decode_le32(const Value& value) {
    static_assert(sizeof(T) == 4, "4-byte values only");
    std::vector<T> out(value.data_size / 4);
    for (size_t i = 0; i < out.size(); ++i) {
        const uint8_t* p = value.data + 4 * i;
        const uint32_t u =
            uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
        std::memcpy(&out[i], &u, 4);
    }
    return out;
}

}  // namespace

std::vector<int32_t> int32_values(const Value& value) { return decode_le32<int32_t>(value); }
std::vector<float> float32_values(const Value& value) { return decode_le32<float>(value); }

int64_t element_count(const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        n *= d;
    }
    return n;
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) {
        strides[d - 1] = strides[d] * shape[d];
    }
    return strides;
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
    const size_t rank = std::max(a.size(), b.size());
    out->assign(rank, 1);
    for (size_t i = 1; i <= rank; ++i) {  // the i-th dim from the right
        const int64_t da = i <= a.size() ? a[a.size() - i] : 1;
        const int64_t db = i <= b.size() ? b[b.size() - i] : 1;
        if (da != db && da != 1 && db != 1) {
            return false;
        }
        (*out)[rank - i] = std::max(da, db);
    }
    return true;
}

std::vector<int64_t> broadcast_strides(const Shape& shape, size_t rank) {
    const std::vector<int64_t> own = row_major_strides(shape);
    std::vector<int64_t> strides(rank, 0);
    const size_t missing = rank - shape.size();
    for (size_t d = 0; d < shape.size(); ++d) {
        strides[missing + d] = shape[d] == 1 ? 0 : own[d];
    }
    return strides;
}

Float32Operand::Float32Operand(const NodeView& node, size_t index)
    : index_(index), constant_(node.float32_operand(index).constant) {
    if (constant_) {
        values_ = float32_values(node.float32_operand(index));
    }
}

int64_t sliding_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t padding,
                            int64_t dilation) {
    // Every argument is below 2^31 (format rule), so nothing here overflows int64.
    const int64_t span = input + 2 * padding - dilation * (kernel - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

void check_accumulator_range(const NodeView& node, const std::vector<int32_t>& bias,
                             int64_t products_per_output) {
    // products_per_output is below 2^31 (a weight's element count), so `worst` fits int64.
    constexpr int64_t kMaxProduct = 255 * 127;  // |x - z_x| <= 255, |w| <= 127
    for (size_t c = 0; c < bias.size(); ++c) {
        const int64_t worst = std::llabs(bias[c]) + products_per_output * kMaxProduct;
        if (worst >= (int64_t{1} << 31)) {
            node.fail("output channel " + std::to_string(c) +
                      " can overflow the int32 accumulator: |bias| " +
                      std::to_string(std::llabs(bias[c])) + " + " +
                      std::to_string(products_per_output) + " products * 255 * 127 >= 2^31");
        }
    }
}

void check_narrow_range_weights(const NodeView& node, const Value& weight) {
    for (size_t i = 0; i < weight.data_size; ++i) {
        if (static_cast<int8_t>(weight.data[i]) == arith::kInt8Min) {
            node.fail("weight '" + weight.name + "' holds -128 at element " + std::to_string(i) +
                      "; weights must be in [-127, 127] (narrow range)");
        }
    }
}

}  // namespace detail
}  // namespace qtk
