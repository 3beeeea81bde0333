// The int8 table lookup of docs/quantization_spec.md (a 'lut' node: y = table[x + 128], the
// activation functions' int8 form), vectorized; one file per ISA, each compiled with its own flags
// and called only where cpu_supports() its level. The drivers are kernels/drivers/
// lut_int8_shuffle.cpp and concat_int8_table.cpp (an input's rescale as a table).
//
// Contract: y[i] = table[x[i] + 128] for i < count. No alignment is required.
//
// Both forms split the index u = x + 128 (x's sign bit flipped) into its row u >> 4 and column
// u & 15, and pick each row's 16 entries with one byte shuffle (pshufb) per row, kept where the
// byte's row is that row: 16 shuffles per vector, against a load per byte in a scalar loop. (A
// full 256-entry byte permute, AVX-512 VBMI, is not in every CPU of the avx512_vnni level.)
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8LutUkernel {
    void (*run)(const int8_t* x, int64_t count, const int8_t* table, int8_t* y);
};

extern const Int8LutUkernel kInt8LutAvx2;
extern const Int8LutUkernel kInt8LutAvx512;

}  // namespace detail
}  // namespace qtk
