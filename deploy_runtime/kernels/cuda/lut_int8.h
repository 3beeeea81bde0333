// int8 table lookup on CUDA, NCHW4 in and out (the CPU's lut op: y = table[x + 128], one table or
// one per channel, spec 25): one thread per byte (each_byte.cuh). The bytes of the last quad past
// C channels are looked up in channel 0's table: no kernel reads them as values.
#pragma once

#include <cstdint>

#include "conv2d_int8_nchw4.h"

namespace qtk {
namespace cuda {

struct LutParams {
    const int8_t* x;
    int8_t* y;
    const int8_t* tables;  // [tables][256]: entry q + 128 of table c is f(q) in channel c
    int64_t count;         // bytes of x and y: [batch][channel_quads][plane][4]
    int32_t tables_count;  // 1, or the channels C: a table each
    int32_t channel_quads, plane;
};

struct LutOutput {
    LutParams p;
    QTK_HOST_DEVICE void operator()(int64_t e) const {
        int32_t c = 0;
        if (p.tables_count > 1) {
            c = nchw4_position(e, p.channel_quads, p.plane).c;
            c = c < p.tables_count ? c : 0;
        }
        p.y[e] = p.tables[c * 256 + int32_t{p.x[e]} + 128];
    }
};

inline void run_lut_on_host(const LutParams& p) { run_each_byte_on_host(LutOutput{p}, p.count); }

// Launches the GPU kernel on `stream` (a cudaStream_t; null: the default stream); returns its
// cudaError_t (0: launched). Defined in lut_int8.cu, built where QTK_CUDA is on.
int launch_lut(const LutParams& p, void* stream);

}  // namespace cuda
}  // namespace qtk
