// CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), for the graph section checksum.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace qtk {
namespace detail {

constexpr std::array<uint32_t, 256> make_crc32_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int bit = 0; bit < 8; ++bit) {
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        table[i] = c;
    }
    return table;
}

inline uint32_t crc32(const uint8_t* data, size_t size) {
    static constexpr std::array<uint32_t, 256> kTable = make_crc32_table();
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; ++i) {
        c = kTable[(c ^ data[i]) & 0xFFu] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

}  // namespace detail
}  // namespace qtk
