// 64-byte aligned heap bytes: the model format's blob alignment and a cache line, used for model
// copies and activation arenas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "qtk/runtime.h"

namespace qtk {
namespace detail {

constexpr size_t kBufferAlignment = 64;

struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t{kBufferAlignment}); }
};

using AlignedBytes = std::unique_ptr<uint8_t, AlignedDelete>;

// `what` names the buffer in the error raised when memory runs out.
inline AlignedBytes allocate_aligned(size_t size, const char* what) {
    try {
        void* p = ::operator new(size == 0 ? 1 : size, std::align_val_t{kBufferAlignment});
        return AlignedBytes(static_cast<uint8_t*>(p));
    } catch (const std::bad_alloc&) {
        throw Error(std::string("out of memory allocating ") + std::to_string(size) +
                    " bytes for " + what);
    }
}

}  // namespace detail
}  // namespace qtk
