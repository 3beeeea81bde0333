// Reads a .qmodel (docs/qmodel_format.md) as untrusted bytes: every read is bounds-checked, all
// size arithmetic is overflow-checked, and every rule of the format is checked with a message
// naming the field, the value and the record. The fuzz target (tests/fuzz_loader.cpp) aims here.
#include "model_reader.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "crc32.h"
#include "op_kernel.h"

namespace qtk {
namespace detail {

void fail_qmodel(const std::string& message) { throw Error("qmodel: " + message); }

namespace {

constexpr char kMagic[8] = {'Q', 'T', 'K', 'M', 'O', 'D', 'L', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint64_t kHeaderSize = 64;
constexpr uint64_t kBlobAlignment = 64;
constexpr uint32_t kMaxStringLength = 4096;
constexpr uint32_t kMaxValues = 1u << 20;
constexpr uint32_t kMaxNodes = 1u << 20;
constexpr uint32_t kMaxAttrs = 64;
constexpr uint32_t kMaxAttrValues = 1u << 24;
constexpr uint8_t kMaxRank = 8;
constexpr int64_t kMaxDim = int64_t{1} << 31;  // exclusive

uint32_t load_u32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint64_t load_u64(const uint8_t* p) {
    return uint64_t{load_u32(p)} | uint64_t{load_u32(p + 4)} << 32;
}

std::string hex(uint32_t v) {
    static const char kDigits[] = "0123456789abcdef";
    std::string s = "0x";
    for (int i = 28; i >= 0; i -= 4) {
        s += kDigits[(v >> i) & 0xF];
    }
    return s;
}

// Strings go into error messages and Python str objects, so they must be valid UTF-8 and free of
// NUL bytes.
bool is_valid_utf8(const uint8_t* s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const uint8_t c = s[i];
        if (c == 0) {
            return false;
        }
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t extra;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            extra = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= extra) {
            return false;
        }
        for (size_t k = 1; k <= extra; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t kMinForLength[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMinForLength[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += extra + 1;
    }
    return true;
}

// Bounds-checked little-endian reads from the graph section. `context` names the record being
// read ("value 12 ('conv1.weight')") for error messages.
class Reader {
 public:
    Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

    void set_context(std::string context) { context_ = std::move(context); }
    const std::string& context() const { return context_; }
    size_t remaining() const { return size_ - pos_; }

    [[noreturn]] void fail_field(const char* field, const std::string& message) const {
        fail_qmodel(context_ + ": " + field + " " + message);
    }

    uint8_t u8(const char* field) { return *take(1, field); }
    uint32_t u32(const char* field) { return load_u32(take(4, field)); }
    uint64_t u64(const char* field) { return load_u64(take(8, field)); }
    int32_t i32(const char* field) { return static_cast<int32_t>(u32(field)); }
    int64_t i64(const char* field) { return static_cast<int64_t>(u64(field)); }
    float f32(const char* field) {
        const uint32_t bits = u32(field);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }

    std::string str(const char* field) {
        const uint32_t length = u32(field);
        if (length > kMaxStringLength) {
            fail_field(field, "length " + std::to_string(length) + " exceeds " +
                                  std::to_string(kMaxStringLength));
        }
        const uint8_t* p = take(length, field);
        if (!is_valid_utf8(p, length)) {
            fail_field(field, "is not valid UTF-8 (or holds a NUL byte)");
        }
        return std::string(reinterpret_cast<const char*>(p), length);
    }

    // A count of records at least `min_record_bytes` long each: checked against `limit` and
    // against the bytes left, so a huge count cannot make the loader allocate.
    uint32_t count(const char* field, uint32_t limit, size_t min_record_bytes) {
        const uint32_t n = u32(field);
        if (n > limit) {
            fail_field(field, std::to_string(n) + " exceeds the limit " + std::to_string(limit));
        }
        if (n > remaining() / min_record_bytes) {
            fail_qmodel(context_ + ": " + field + " " + std::to_string(n) + " needs at least " +
                        std::to_string(uint64_t{n} * min_record_bytes) + " bytes but only " +
                        std::to_string(remaining()) + " remain in the graph section");
        }
        return n;
    }

    std::vector<uint32_t> ids(const char* field, size_t num_values) {
        const uint32_t n = count(field, std::numeric_limits<uint32_t>::max(), 4);
        std::vector<uint32_t> out(n);
        for (uint32_t i = 0; i < n; ++i) {
            out[i] = u32(field);
            if (out[i] >= num_values) {
                fail_qmodel(context_ + ": " + field + "[" + std::to_string(i) +
                            "] = " + std::to_string(out[i]) + " is not below num_values " +
                            std::to_string(num_values));
            }
        }
        return out;
    }

 private:
    const uint8_t* take(size_t n, const char* field) {
        if (n > remaining()) {
            fail_qmodel("graph section ends early: " + context_ + ": " + field + " needs " +
                        std::to_string(n) + " bytes at graph offset " + std::to_string(pos_) +
                        " but only " + std::to_string(remaining()) + " remain");
        }
        const uint8_t* p = data_ + pos_;
        pos_ += n;
        return p;
    }

    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
    std::string context_ = "graph";
};

struct Header {
    uint64_t graph_offset, graph_size, blob_offset, blob_size;
};

// [offset, offset + size) lies inside [0, limit), without overflow.
bool section_inside(uint64_t offset, uint64_t size, uint64_t limit) {
    return offset <= limit && size <= limit - offset;
}

std::string section_text(const char* name, uint64_t offset, uint64_t size) {
    return std::string(name) + " section [" + std::to_string(offset) + ", " +
           std::to_string(offset) + " + " + std::to_string(size) + ")";
}

Header read_header(const uint8_t* file, size_t file_size) {
    if (file_size < kHeaderSize) {
        fail_qmodel("file is " + std::to_string(file_size) +
                    " bytes, shorter than the 64-byte header");
    }
    if (std::memcmp(file, kMagic, sizeof kMagic) != 0) {
        fail_qmodel("bad magic: expected \"QTKMODL\\0\" at offset 0; this is not a .qmodel file");
    }
    const uint32_t version = load_u32(file + 8);
    if (version != kFormatVersion) {
        fail_qmodel("format_version " + std::to_string(version) +
                    " is not supported: this runtime reads version " +
                    std::to_string(kFormatVersion) + "; re-export with a matching qtk version");
    }
    const uint32_t header_size = load_u32(file + 12);
    if (header_size != kHeaderSize) {
        fail_qmodel("header_size " + std::to_string(header_size) + " must be 64");
    }
    const uint64_t declared_size = load_u64(file + 16);
    if (declared_size != file_size) {
        fail_qmodel("file_size " + std::to_string(declared_size) +
                    " does not match the real size " + std::to_string(file_size) +
                    " (truncated or padded file)");
    }
    const uint32_t reserved = load_u32(file + 60);
    if (reserved != 0) {
        fail_qmodel("reserved header field is " + std::to_string(reserved) + ", must be 0");
    }

    Header h{load_u64(file + 24), load_u64(file + 32), load_u64(file + 40), load_u64(file + 48)};
    if (h.graph_offset < kHeaderSize) {
        fail_qmodel("graph_offset " + std::to_string(h.graph_offset) +
                    " overlaps the 64-byte header");
    }
    if (!section_inside(h.graph_offset, h.graph_size, file_size)) {
        fail_qmodel(section_text("graph", h.graph_offset, h.graph_size) +
                    " extends past the end of the " + std::to_string(file_size) + "-byte file");
    }
    if (h.blob_offset % kBlobAlignment != 0) {
        fail_qmodel("blob_offset " + std::to_string(h.blob_offset) + " is not a multiple of 64");
    }
    if (!section_inside(h.blob_offset, h.blob_size, file_size)) {
        fail_qmodel(section_text("blob", h.blob_offset, h.blob_size) +
                    " extends past the end of the " + std::to_string(file_size) + "-byte file");
    }
    if (h.blob_size > 0 && h.blob_offset < kHeaderSize) {
        fail_qmodel("blob_offset " + std::to_string(h.blob_offset) +
                    " overlaps the 64-byte header");
    }
    if (h.blob_size > 0 && h.graph_size > 0 && h.graph_offset < h.blob_offset + h.blob_size &&
        h.blob_offset < h.graph_offset + h.graph_size) {
        fail_qmodel(section_text("graph", h.graph_offset, h.graph_size) + " and " +
                    section_text("blob", h.blob_offset, h.blob_size) + " overlap");
    }
    const uint32_t stored_crc = load_u32(file + 56);
    const uint32_t actual_crc = crc32(file + h.graph_offset, h.graph_size);
    if (stored_crc != actual_crc) {
        fail_qmodel("graph_crc32 " + hex(stored_crc) +
                    " does not match the graph section's CRC-32 " + hex(actual_crc) +
                    " (corrupted file)");
    }
    return h;
}

std::string value_label(uint32_t id, const Value& v) {
    return "value " + std::to_string(id) + " ('" + v.name + "')";
}

// Storage codes 4 and 5: signed 4- and 2-bit constants packed low bits first; 7: binary weights,
// one bit each, 1 for -1 and 0 for +1 (spec 24). All widened to int8.
constexpr uint8_t kPackedInt4 = 4, kPackedInt2 = 5, kPackedBinary = 7;

int packed_bits(uint8_t storage) {
    return storage == kPackedInt4     ? 4
           : storage == kPackedInt2   ? 2
           : storage == kPackedBinary ? 1
                                      : 0;
}

std::shared_ptr<const std::vector<int8_t>> unpack(const uint8_t* data, int64_t elements, int bits) {
    auto values = std::make_shared<std::vector<int8_t>>(static_cast<size_t>(elements));
    const int per_byte = 8 / bits;
    const int sign_shift = 8 - bits;  // moves the field's sign bit to bit 7
    for (int64_t i = 0; i < elements; ++i) {
        const uint8_t field = static_cast<uint8_t>(data[i / per_byte] >> ((i % per_byte) * bits));
        (*values)[static_cast<size_t>(i)] =
            bits == 1 ? static_cast<int8_t>(1 - 2 * (field & 1))
                      : static_cast<int8_t>(static_cast<int8_t>(field << sign_shift) >> sign_shift);
    }
    return values;
}

Value read_value(Reader& r, uint32_t id, const uint8_t* blob, uint64_t blob_size, Graph& g) {
    Value v;
    r.set_context("value " + std::to_string(id));
    v.name = r.str("name");
    r.set_context(value_label(id, v));

    const uint8_t dtype = r.u8("dtype");
    if (dtype < 1 || dtype > 7) {
        r.fail_field("dtype", std::to_string(dtype) +
                                  " is not 1 (int8), 2 (int32), 3 (float32), 4 (int4), 5 (int2), "
                                  "6 (uint8) or 7 (int1)");
    }
    const int bits = packed_bits(dtype);
    v.dtype = bits > 0 ? DType::kInt8 : static_cast<DType>(dtype);

    const uint8_t rank = r.u8("rank");
    if (rank > kMaxRank) {
        r.fail_field("rank", std::to_string(rank) + " exceeds 8");
    }
    int64_t elements = 1;
    for (uint8_t i = 0; i < rank; ++i) {
        const int64_t d = r.i64("dims");
        if (d < 1 || d >= kMaxDim) {
            fail_qmodel(r.context() + ": dims[" + std::to_string(i) + "] = " + std::to_string(d) +
                        " is outside [1, 2^31)");
        }
        v.shape.push_back(d);
        // Both factors are below 2^31, so the product cannot overflow before it is checked.
        elements *= d;
        if (elements > kMaxTensorElements) {
            fail_qmodel(r.context() + ": shape " + to_string(v.shape) +
                        "... has more than 2^31 - 1 elements");
        }
    }

    v.scale = r.f32("scale");
    v.zero_point = r.i32("zero_point");
    const uint8_t has_data = r.u8("has_data");
    if (has_data > 1) {
        r.fail_field("has_data", std::to_string(has_data) + " is not 0 or 1");
    }
    v.constant = has_data == 1;
    if (bits > 0 && !v.constant) {
        r.fail_field("dtype", "int" + std::to_string(bits) + " is for constants only");
    }

    if (!v.constant && v.dtype == DType::kInt32) {
        r.fail_field("dtype", "int32 is for constants only; an activation is int8 or float32");
    }
    if (!v.constant && v.dtype == DType::kInt8) {
        if (!(std::isfinite(v.scale) && v.scale > 0.0f)) {
            r.fail_field("scale", std::to_string(v.scale) +
                                      " must be finite and > 0 for an int8 activation");
        }
        if (v.zero_point < -128 || v.zero_point > 127) {
            r.fail_field("zero_point", std::to_string(v.zero_point) + " is outside [-128, 127]");
        }
    }
    if (v.constant && v.dtype == DType::kUInt8) {
        r.fail_field("dtype", "uint8 is for an image graph input only, not for constants");
    }
    // A float32 or uint8 activation is not quantized; nonzero parameters would mean a writer
    // mixed up which values are float or image bytes.
    if (!v.constant && (v.dtype == DType::kFloat32 || v.dtype == DType::kUInt8)) {
        const std::string what = std::string(" must be 0 for a ") + dtype_name(v.dtype) +
                                 " activation";
        if (v.scale != 0.0f) {
            r.fail_field("scale", std::to_string(v.scale) + what);
        }
        if (v.zero_point != 0) {
            r.fail_field("zero_point", std::to_string(v.zero_point) + what);
        }
    }
    if (v.constant) {
        const uint64_t offset = r.u64("data_offset");
        const uint64_t size = r.u64("data_size");
        if (offset % kBlobAlignment != 0) {
            r.fail_field("data_offset", std::to_string(offset) + " is not a multiple of 64");
        }
        const uint64_t expected =
            bits > 0 ? (static_cast<uint64_t>(elements) * bits + 7) / 8
                     : static_cast<uint64_t>(elements) * dtype_size(v.dtype);
        const std::string stored = bits > 0 ? "int" + std::to_string(bits) : dtype_name(v.dtype);
        if (size != expected) {
            r.fail_field("data_size", std::to_string(size) + " does not match shape " +
                                          to_string(v.shape) + " of " + stored + " (" +
                                          std::to_string(expected) + " bytes)");
        }
        if (!section_inside(offset, size, blob_size)) {
            fail_qmodel(r.context() + ": data_offset " + std::to_string(offset) + " + data_size " +
                        std::to_string(size) + " exceeds blob section size " +
                        std::to_string(blob_size));
        }
        v.data = blob + offset;
        v.data_size = static_cast<size_t>(size);
        const int used_bits = static_cast<int>(static_cast<uint64_t>(elements) * bits % 8);
        if (bits > 0 && used_bits != 0 && (v.data[size - 1] >> used_bits) != 0) {
            r.fail_field("data", "the padding bits of the last byte of " + stored +
                                     " data are not zero; the file is damaged or wrongly packed");
        }
        if (bits > 0) {
            g.unpacked_constants.push_back(unpack(v.data, elements, bits));
            v.data = reinterpret_cast<const uint8_t*>(g.unpacked_constants.back()->data());
            v.data_size = static_cast<size_t>(elements);
        }
    }
    return v;
}

Attr read_attr(Reader& r) {
    Attr a;
    a.key = r.str("attr key");
    const uint8_t kind = r.u8("attr kind");
    if (kind != 1 && kind != 2) {
        r.fail_field("attr kind",
                     std::to_string(kind) + " of '" + a.key + "' is not 1 (i64) or 2 (f32)");
    }
    a.kind = static_cast<AttrKind>(kind);
    if (a.kind == AttrKind::kInts) {
        const uint32_t n = r.count("attr count", kMaxAttrValues, 8);
        a.ints.resize(n);
        for (uint32_t i = 0; i < n; ++i) {
            a.ints[i] = r.i64("attr value");
        }
    } else {
        const uint32_t n = r.count("attr count", kMaxAttrValues, 4);
        a.floats.resize(n);
        for (uint32_t i = 0; i < n; ++i) {
            a.floats[i] = r.f32("attr value");
        }
    }
    return a;
}

Node read_node(Reader& r, uint32_t index, size_t num_values) {
    Node n;
    r.set_context("node " + std::to_string(index));
    n.op = r.str("op");
    n.name = r.str("name");
    r.set_context("node " + std::to_string(index) + " ('" + n.name + "')");
    n.inputs = r.ids("inputs", num_values);
    n.outputs = r.ids("outputs", num_values);
    const uint32_t num_attrs = r.count("num_attrs", kMaxAttrs, 9);
    for (uint32_t i = 0; i < num_attrs; ++i) {
        Attr a = read_attr(r);
        for (const Attr& earlier : n.attrs) {
            if (earlier.key == a.key) {
                fail_qmodel(r.context() + ": attribute '" + a.key + "' appears twice");
            }
        }
        n.attrs.push_back(std::move(a));
    }
    return n;
}

Graph read_graph(const uint8_t* file, const Header& h) {
    Reader r(file + h.graph_offset, static_cast<size_t>(h.graph_size));
    const uint8_t* blob = file + h.blob_offset;
    Graph g;
    g.producer = r.str("producer");
    // Smallest records: a value is 15 bytes, a node 20.
    const uint32_t num_values = r.count("num_values", kMaxValues, 15);
    g.values.reserve(num_values);
    for (uint32_t i = 0; i < num_values; ++i) {
        g.values.push_back(read_value(r, i, blob, h.blob_size, g));
    }
    r.set_context("graph");
    g.inputs = r.ids("graph_inputs", num_values);
    g.outputs = r.ids("graph_outputs", num_values);
    const uint32_t num_nodes = r.count("num_nodes", kMaxNodes, 20);
    g.nodes.reserve(num_nodes);
    for (uint32_t i = 0; i < num_nodes; ++i) {
        g.nodes.push_back(read_node(r, i, num_values));
    }
    if (r.remaining() != 0) {
        fail_qmodel("graph section has " + std::to_string(r.remaining()) +
                    " trailing bytes after the last node");
    }
    return g;
}

// The rules that span records: ids refer to values of the right kind, every activation is defined
// once and before its use, graph inputs and outputs are activations (int8 or float32, as
// read_value allows no other activation dtype).
void check_graph(const Graph& g) {
    const size_t kNone = static_cast<size_t>(-1);
    std::vector<bool> defined(g.values.size(), false);
    std::vector<size_t> producer(g.values.size(), kNone);

    if (g.inputs.empty()) {
        fail_qmodel("the graph has no inputs");
    }
    if (g.outputs.empty()) {
        fail_qmodel("the graph has no outputs");
    }
    auto check_edge = [&](const char* what, size_t index, uint32_t id) {
        const Value& v = g.values[id];
        const std::string label =
            std::string(what) + " " + std::to_string(index) + " (" + value_label(id, v) + ")";
        if (v.constant) {
            fail_qmodel(label + " is a constant; it must be an int8 or float32 activation");
        }
        if (v.shape.empty()) {
            fail_qmodel(label + " has rank 0; it needs a batch dimension");
        }
    };
    for (size_t i = 0; i < g.inputs.size(); ++i) {
        const uint32_t id = g.inputs[i];
        check_edge("graph input", i, id);
        if (defined[id]) {
            fail_qmodel("graph input " + std::to_string(i) + " (" + value_label(id, g.values[id]) +
                        ") is listed twice");
        }
        defined[id] = true;
        const Value& first = g.values[g.inputs[0]];
        if (g.values[id].shape[0] != first.shape[0]) {
            fail_qmodel("graph input " + std::to_string(i) + " (" + value_label(id, g.values[id]) +
                        ") has batch " + std::to_string(g.values[id].shape[0]) +
                        " but graph input 0 has batch " + std::to_string(first.shape[0]));
        }
    }
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& n = g.nodes[k];
        for (uint32_t id : n.inputs) {
            const Value& v = g.values[id];
            if (!v.constant && !defined[id]) {
                fail_qmodel(
                    node_label(n) + ": input " + value_label(id, v) +
                    " is used before it is defined (no graph input or earlier node produces it)");
            }
            if (v.dtype == DType::kUInt8 && n.op != "image_to_int8") {
                fail_qmodel(node_label(n) + ": input " + value_label(id, v) +
                            " is uint8, which only an image_to_int8 node reads");
            }
        }
        for (uint32_t id : n.outputs) {
            const Value& v = g.values[id];
            if (v.constant) {
                fail_qmodel(node_label(n) + ": output " + value_label(id, v) + " is a constant");
            }
            if (v.dtype == DType::kUInt8) {
                fail_qmodel(node_label(n) + ": output " + value_label(id, v) +
                            " is uint8, which only a graph input may be");
            }
            if (defined[id]) {
                fail_qmodel(node_label(n) + ": output " + value_label(id, v) +
                            " is produced twice (already " +
                            (producer[id] == kNone
                                 ? std::string("a graph input")
                                 : "produced by " + node_label(g.nodes[producer[id]])) +
                            ")");
            }
            defined[id] = true;
            producer[id] = k;
        }
    }
    for (size_t i = 0; i < g.outputs.size(); ++i) {
        const uint32_t id = g.outputs[i];
        check_edge("graph output", i, id);
        if (g.values[id].dtype == DType::kUInt8) {
            fail_qmodel("graph output " + std::to_string(i) + " (" +
                        value_label(id, g.values[id]) +
                        ") is uint8; outputs are int8 or float32 activations");
        }
        if (!defined[id]) {
            fail_qmodel("graph output " + std::to_string(i) + " (" + value_label(id, g.values[id]) +
                        ") is produced by no node and is not a graph input");
        }
    }
}

}  // namespace

Graph read_qmodel(const uint8_t* file, size_t file_size) {
    const Header header = read_header(file, file_size);
    Graph graph = read_graph(file, header);
    check_graph(graph);
    return graph;
}

}  // namespace detail
}  // namespace qtk
