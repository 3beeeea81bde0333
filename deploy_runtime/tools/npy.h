// A small, strict reader and writer of NumPy's .npy format (numpy.lib.format, versions 1.0 to 3.0)
// for qtk_run: little-endian, C order, the dtypes the runtime's graph inputs and outputs take
// (int8 '|i1', float32 '<f4', and uint8 '|u1' for an image input). Anything else is refused with a message that says how to save
// the array instead; nothing here trusts a length it has not checked against the file's size.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "qtk/runtime.h"

namespace qtk_tools {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;

struct NpyArray {
    qtk::DType dtype = qtk::DType::kInt8;
    qtk::Shape shape;
    std::vector<uint8_t> bytes;  // the values, row-major, little-endian
};

inline bool host_is_little_endian() {
    const uint16_t one = 1;
    uint8_t first = 0;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        throw qtk::Error("cannot open '" + path + "' for reading");
    }
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(file),
                                std::istreambuf_iterator<char>());
}

inline bool is_npy(const std::vector<uint8_t>& bytes) {
    return bytes.size() >= kNpyMagicSize && std::memcmp(bytes.data(), kNpyMagic, kNpyMagicSize) == 0;
}

namespace npy_detail {

// The value text after "'key':" in the header dict, up to the next top-level ',' or '}'.
inline std::string dict_value(const std::string& header, const std::string& key,
                              const std::string& path) {
    const std::string quoted = "'" + key + "'";
    const size_t at = header.find(quoted);
    if (at == std::string::npos) {
        throw qtk::Error(path + ": the .npy header has no '" + key +
                         "' (write the file with numpy.save)");
    }
    size_t i = header.find(':', at + quoted.size());
    if (i == std::string::npos) {
        throw qtk::Error(path + ": malformed .npy header (no ':' after '" + key + "')");
    }
    ++i;
    int depth = 0;
    size_t end = i;
    for (; end < header.size(); ++end) {
        const char c = header[end];
        if (c == '(') {
            ++depth;
        } else if (c == ')') {
            --depth;
        } else if ((c == ',' || c == '}') && depth == 0) {
            break;
        }
    }
    std::string value = header.substr(i, end - i);
    const size_t first = value.find_first_not_of(' ');
    const size_t last = value.find_last_not_of(' ');
    return first == std::string::npos ? std::string() : value.substr(first, last - first + 1);
}

inline qtk::Shape parse_shape(const std::string& text, const std::string& path) {
    if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
        throw qtk::Error(path + ": malformed .npy shape '" + text + "'");
    }
    qtk::Shape shape;
    size_t i = 1;
    while (i < text.size() - 1) {
        while (i < text.size() - 1 && (text[i] == ' ' || text[i] == ',')) {
            ++i;
        }
        if (i >= text.size() - 1) {
            break;
        }
        int64_t d = 0;
        size_t digits = 0;
        while (i < text.size() - 1 && text[i] >= '0' && text[i] <= '9') {
            if (d > qtk::kMaxTensorElements) {
                throw qtk::Error(path + ": .npy shape " + text + " is too large");
            }
            d = d * 10 + (text[i] - '0');
            ++i;
            ++digits;
        }
        if (digits == 0) {
            throw qtk::Error(path + ": malformed .npy shape '" + text + "'");
        }
        shape.push_back(d);
    }
    return shape;
}

}  // namespace npy_detail

// Parses a whole .npy file (is_npy(bytes) must hold); `path` names it in messages.
inline NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& path) {
    if (!host_is_little_endian()) {
        throw qtk::Error("qtk_run reads .npy files on little-endian hosts only");
    }
    if (bytes.size() < kNpyMagicSize + 4) {
        throw qtk::Error(path + ": truncated .npy header");
    }
    const int major = bytes[6];
    size_t header_len = 0;
    size_t header_start = 0;
    if (major == 1) {
        header_len = size_t{bytes[8]} | size_t{bytes[9]} << 8;
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12) {
            throw qtk::Error(path + ": truncated .npy header");
        }
        header_len = size_t{bytes[8]} | size_t{bytes[9]} << 8 | size_t{bytes[10]} << 16 |
                     size_t{bytes[11]} << 24;
        header_start = 12;
    } else {
        throw qtk::Error(path + ": .npy format version " + std::to_string(major) +
                         " is not one this tool reads (1, 2 or 3)");
    }
    if (header_len > bytes.size() - header_start) {
        throw qtk::Error(path + ": truncated .npy header");
    }
    const std::string header(reinterpret_cast<const char*>(bytes.data() + header_start),
                             header_len);
    NpyArray array;
    const std::string descr = npy_detail::dict_value(header, "descr", path);
    size_t itemsize = 0;
    if (descr == "'|i1'" || descr == "'<i1'" || descr == "'i1'") {
        array.dtype = qtk::DType::kInt8;
        itemsize = 1;
    } else if (descr == "'|u1'" || descr == "'<u1'" || descr == "'u1'") {
        array.dtype = qtk::DType::kUInt8;
        itemsize = 1;
    } else if (descr == "'<f4'") {
        array.dtype = qtk::DType::kFloat32;
        itemsize = 4;
    } else {
        throw qtk::Error(path + ": dtype " + descr +
                         " is not one the runtime takes; save the array as int8, uint8 (an "
                         "image) or little-endian float32 (x.astype(numpy.float32))");
    }
    const std::string fortran = npy_detail::dict_value(header, "fortran_order", path);
    if (fortran != "False") {
        throw qtk::Error(path + ": the array is stored in Fortran order; save "
                         "numpy.ascontiguousarray(x) instead");
    }
    array.shape = npy_detail::parse_shape(npy_detail::dict_value(header, "shape", path), path);
    int64_t count = 1;
    for (int64_t d : array.shape) {
        if (d != 0 && count > qtk::kMaxTensorElements / d) {
            throw qtk::Error(path + ": shape " + qtk::to_string(array.shape) + " is too large");
        }
        count *= d;
    }
    const size_t data_start = header_start + header_len;
    const size_t want = static_cast<size_t>(count) * itemsize;
    if (bytes.size() - data_start != want) {
        throw qtk::Error(path + ": holds " + std::to_string(bytes.size() - data_start) +
                         " data bytes but its header (" + qtk::dtype_name(array.dtype) + " " +
                         qtk::to_string(array.shape) + ") says " + std::to_string(want));
    }
    array.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_start), bytes.end());
    return array;
}

// Writes `count` values of `dtype` (int8 or float32) with `shape` as a version 1.0 .npy file.
inline void write_npy(const std::string& path, qtk::DType dtype, const qtk::Shape& shape,
                      const void* data, size_t count) {
    if (!host_is_little_endian()) {
        throw qtk::Error("qtk_run writes .npy files on little-endian hosts only");
    }
    if (dtype != qtk::DType::kInt8 && dtype != qtk::DType::kFloat32) {
        throw qtk::Error(std::string("cannot write a ") + qtk::dtype_name(dtype) + " tensor as .npy");
    }
    std::string shape_text = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        shape_text += (i ? ", " : "") + std::to_string(shape[i]);
    }
    shape_text += shape.size() == 1 ? ",)" : ")";
    std::string header = std::string("{'descr': '") +
                         (dtype == qtk::DType::kInt8 ? "|i1" : "<f4") +
                         "', 'fortran_order': False, 'shape': " + shape_text + ", }";
    // Magic, version and length take 10 bytes; pad with spaces so the data starts 64-aligned.
    const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
    header.append(total - 10 - header.size() - 1, ' ');
    header.push_back('\n');
    std::ofstream file(path, std::ios::binary);
    if (!file) {
        throw qtk::Error("cannot open '" + path + "' for writing");
    }
    const unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                        static_cast<unsigned char>(header.size() & 0xFF),
                                        static_cast<unsigned char>(header.size() >> 8)};
    file.write(reinterpret_cast<const char*>(preamble), sizeof(preamble));
    file.write(header.data(), static_cast<std::streamsize>(header.size()));
    file.write(static_cast<const char*>(data),
               static_cast<std::streamsize>(count * qtk::dtype_size(dtype)));
    if (!file) {
        throw qtk::Error("failed writing '" + path + "'");
    }
}

}  // namespace qtk_tools
