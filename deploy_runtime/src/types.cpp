// The small public helpers of qtk/runtime.h: dtypes and shapes.
#include "qtk/runtime.h"

namespace qtk {

size_t dtype_size(DType dtype) {
    switch (dtype) {
        case DType::kInt8:
        case DType::kUInt8:
            return 1;
        case DType::kInt32:
            return 4;
        case DType::kFloat32:
            return 4;
    }
    return 0;
}

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DType::kInt8:
            return "int8";
        case DType::kInt32:
            return "int32";
        case DType::kFloat32:
            return "float32";
        case DType::kUInt8:
            return "uint8";
    }
    return "unknown";
}

std::string to_string(const Shape& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) {
            s += ", ";
        }
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

std::string batch_shape_pattern(const Shape& shape) {
    std::string s = "[N";
    for (size_t i = 1; i < shape.size(); ++i) {
        s += ", " + std::to_string(shape[i]);
    }
    return s + "]";
}

}  // namespace qtk
