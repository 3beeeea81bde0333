// The int8 table lookup of docs/quantization_spec.md (a 'lut' node: y = table[x + 128], the
// activation functions' int8 form), vectorized; one file per ISA, each compiled with its own flags
// and called only where cpu_supports() its level. The drivers are kernels/drivers/
// table_lookup_planes.h (lut and prelu, a table per tensor or per channel plane) and
// concat_int8_table.cpp (an input's rescale as a table).
//
// Contract: y[i] = table[x[i] + 128] for i < count, y == x allowed (in place). No alignment is
// required.
//
// AVX-512 VBMI looks 64 bytes up in two 128-entry byte permutes (vpermi2b). Without it (AVX2, and
// AVX-512 BW on CPUs of the avx512_vnni level that lack VBMI), the index u = x + 128 (x's sign bit
// flipped) splits into its row u >> 4 and column u & 15, and each row's 16 entries are picked by
// one byte shuffle (pshufb), kept where the byte's row is that row: 16 shuffles per vector, against
// a load per byte in a scalar loop; VBMI's permutes took efficientnet_b0's 65 tables from 0.87 to
// 0.14 ms (1 thread, AMD EPYC Zen 4).
#pragma once

#include <cstdint>

namespace qtk {
namespace detail {

struct Int8LutUkernel {
    void (*run)(const int8_t* x, int64_t count, const int8_t* table, int8_t* y);
};

extern const Int8LutUkernel kInt8LutAvx2;
extern const Int8LutUkernel kInt8LutAvx512;
extern const Int8LutUkernel kInt8LutAvx512Vbmi;
extern const Int8LutUkernel kInt8LutNeon;

}  // namespace detail
}  // namespace qtk
