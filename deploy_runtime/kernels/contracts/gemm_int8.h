// The int8 GEMM micro-kernels behind the x86 conv2d (conv2d_int8_gemm.cpp, conv2d_int8_direct.cpp):
// one file per ISA, each compiled with its own flags and called only where cpu_supports() its
// level.
//
// Contract: c[r * c_stride + j] = sum over quads q < b.outer_count * b.inner_count, i < 4 of
// a[q][r][i] * bq[j][i], exact in int32, with
//   a   int8 weights, packed [quads][mr][4]: 4 consecutive k of one output channel; each widened
//       to int16 (2 bytes, little-endian) for a micro-kernel with weight_bytes 2 (AVX2: its
//       vpmaddwd multiplies int16, and widening at load spares the loop a conversion per row);
//   bq  activations, [nr][4]: the same 4 k of nr output pixels, for quad q = o * inner_count
//       + i at b.base + o * b.outer_stride + b.inner_offsets[i] (bytes); uint8 x + 128 for a
//       micro-kernel with x_offset 128 (x86's vpdpbusd multiplies unsigned by signed bytes),
//       int8 x for x_offset 0 (aarch64's sdot and smmla multiply signed bytes);
//   c   int32 [mr] rows of nr, c_stride apart.
// A packed GEMM operand [quads][nr][4] is inner_count 1, offset 0, outer_stride nr * 4; the direct
// conv reads its quads in place, one inner offset per kernel tap. No alignment is required. The
// caller guarantees |every partial sum| < 2^31.
//
// A micro-kernel with quad_block B > 1 (AMX: one tile row holds 16 quads of one output channel)
// needs outer_count a multiple of B and reads a as [outer_count / B][inner_count][mr][B][4]: B
// consecutive outer quads of one inner offset at a time (B = 1 is the layout above). Its
// prepare(), where set, runs on the calling thread before its first run() of a task (loading
// AMX's tile configuration, which other code on the thread may have changed).
//
// The ISA files include only intrinsics and this header: an inline function or template
// instantiated there with AVX-512 flags could be the copy the linker keeps for every caller
// (walk_quads is safe: each instantiation takes a kernel's own lambda, a type local to its file).
#pragma once

#include <cstdint>

#include "requantize_int8.h"

namespace qtk {
namespace detail {

// Where the B quads lie (see the contract above).
struct Int8GemmB {
    const uint8_t* base;
    int64_t outer_count, outer_stride;
    int64_t inner_count;
    const int64_t* inner_offsets;
};

// Calls multiply_quad(quad pointer) for each quad of b in order. One flat loop: nested loops cost
// the packed operand (one inner step) up to 12% at short K, and a special case for it made GCC
// spill an AVX2 accumulator.
template <typename MultiplyQuad>
void walk_quads(const Int8GemmB& b, MultiplyQuad& multiply_quad) {
    const int64_t* offset = b.inner_offsets;
    const int64_t* const offsets_end = b.inner_offsets + b.inner_count;
    const uint8_t* outer = b.base;
    for (int64_t q = b.outer_count * b.inner_count; q > 0; --q) {
        multiply_quad(outer + *offset);
        if (++offset == offsets_end) {
            offset = b.inner_offsets;
            outer += b.outer_stride;
        }
    }
}

struct Int8GemmUkernel {
    int mr;  // output channels per tile
    int nr;  // output pixels per tile, a multiple of 16
    void (*run)(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride);
    int quad_block = 1;             // quads per run of a's rows (see the contract)
    void (*prepare)() = nullptr;    // per thread, before a task's first run()
    int32_t x_offset = 128;         // what bq adds to x: 128 or 0 (see the contract)
    int weight_bytes = 1;           // bytes of each packed weight: 1, or 2 (see the contract)
};

// The channels-last (NHWC) conv's micro-kernels (conv2d_int8_gemm_nhwc.cpp): a pixel's input
// channels are its row of the GEMM as they lie, and each kernel tap is one more stretch of K read
// at its own offset (an implicit GEMM). Contract: c[p * c_stride + o] = sum over taps t < taps and
// k < 4 quads of x[tap_offsets[t] + p * x_stride + k] * w(t, k, o) for pixels p < `pixels` (1 to
// mr; it may also write rows up to mr, and read their x) and output channels o < nr, exact in
// int32, quads a multiple of quad_block:
//   x  int8 activations, all of [0, 4 quads) read at each pixel and tap (past the input channels
//      they meet zero weights); a micro-kernel with x_offset 128 reads them as uint8 x + 128
//      (VNNI's uint8 operand: the caller flips their sign bits as it copies them);
//   w  int8 weights, packed [taps][ceil(quads / 16)][nr / 16][16][16][4]: per tap, per block of
//      16 quads and of 16 output channels, per quad, the 16 channels' 4 k (zero past K and past
//      the channels).
// prepare() as Int8GemmUkernel's.
//
// run_requantized, where a micro-kernel has it, is run() with the requantization fused
// (requantize_int8.h's high-half form, for layers whose every shift takes it): the sums of
// channels [16 j, 16 j + 16) start at blocks[j].offset, and pixel p's channels o < channels (1 to
// nr) leave clamped as int8 at y + p * y_stride; it writes nothing else. With negative_blocks (a
// fused PReLU, spec 22's sign rule), a sum below zero takes negative_blocks[j]'s multiplier,
// rounding constant and shift instead (their offsets unused); null: one side. A small K's tile
// does less multiplying than requantizing, and this skips the generic epilogue's per-call setup.
struct Int8GemmNhwcUkernel {
    int mr;  // pixels per tile
    int nr;  // output channels per tile, a multiple of 16
    int quad_block;
    int32_t x_offset;
    void (*run)(int64_t pixels, const int8_t* x, int64_t x_stride, const int64_t* tap_offsets,
                int64_t taps, int64_t quads, const int8_t* w, int32_t* c, int64_t c_stride);
    void (*prepare)();
    void (*run_requantized)(int64_t pixels, const int8_t* x, int64_t x_stride,
                            const int64_t* tap_offsets, int64_t taps, int64_t quads,
                            const int8_t* w, const Int8HighHalfBlock* blocks,
                            const Int8HighHalfBlock* negative_blocks, const Int8Output& out,
                            int64_t channels, int8_t* y, int64_t y_stride) = nullptr;
};

// The window gather of the channels-last GEMM's window form (conv2d_int8_gemm_nhwc.cpp: few input
// channels, where a whole window's bytes as one run of K pad it less than a run per kernel row):
// `rows` kernel rows' runs of pixels (each pixel `channels` bytes) interleaved pixel by pixel,
//   out[(j * rows + r) * channels + c] = row[r][j * channels + c],
// j < pixels, r < rows, c < channels, so that each output pixel's window is one run of out. The
// plan (plain data, built at load by int8_window_gather_plan) holds, per 64-byte chunk i of out,
// the byte picks of pattern i mod (rows * channels): the chunk reads row_bytes of each row from
// pixel floor(64 i / (rows * channels)) on, row_bytes = 128 / (rows rounded up to a power of 2):
// the rows' bytes fill two 64-byte tables. Limits: 2 <= rows <= 8, each chunk's pixels' bytes of a
// row within its row_bytes (7 x 3 and 8 x 2 fit in 16, 3 x 3 in 32; 5 x 3 does not). It writes
// whole chunks (up to 63 bytes past the last pixel) and reads up to row_bytes bytes past a row's
// last pixel.
struct Int8WindowGather {
    int64_t rows, channels;
    // [rows * channels][64], for a two-table byte permute: index r row_bytes + k picks byte k of
    // row r's row_bytes (int8_window_gather_row_bytes; the first table's rows, then the second's)
    const uint8_t* picks;
};

// The bytes a row takes in the plan of `rows` rows (0: more than 8 rows, or 1, which needs no
// gather).
int64_t int8_window_gather_row_bytes(int64_t rows);

// Fills the plan's rows * channels * 64 picks, or returns false where the limits exclude them.
bool int8_window_gather_plan(int64_t rows, int64_t channels, uint8_t* picks);

using Int8WindowGatherFn = void (*)(const int8_t* const* row, int64_t pixels,
                                    const Int8WindowGather& plan, int8_t* out);

extern const Int8WindowGatherFn kInt8WindowGatherAvx512Vbmi;

extern const Int8GemmUkernel kInt8Gemm2x16c4Avx2;
extern const Int8GemmUkernel kInt8Gemm4x16c4AvxVnni;
extern const Int8GemmUkernel kInt8Gemm8x32c4Avx512Vnni;
extern const Int8GemmUkernel kInt8Gemm32x32c4Amx;
extern const Int8GemmUkernel kInt8Gemm4x16c4Neon;
extern const Int8GemmUkernel kInt8Gemm6x16c4Dotprod;
extern const Int8GemmUkernel kInt8Gemm4x16c4I8mm;
extern const Int8GemmNhwcUkernel kInt8GemmNhwc12x32Avx512Vnni;
extern const Int8GemmNhwcUkernel kInt8GemmNhwc24x16Avx512Vnni;
extern const Int8GemmNhwcUkernel kInt8GemmNhwc32x32Amx;

// `rounds` rounds of independent chains of the ISA's exact int8 products on registers (vpdpbusd;
// on AVX2 vpmaddwd of int16 into vpaddd, as the micro-kernels above); returns the multiply-
// accumulates done. measure_int8_peak (cpu_features.cpp) times the best this CPU runs.
int64_t int8_peak_chains_avx512_vnni(int64_t rounds);
int64_t int8_peak_chains_avx2(int64_t rounds);

}  // namespace detail
}  // namespace qtk
