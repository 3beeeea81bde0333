// int8 GEMM micro-kernel, 6 output channels x 16 pixels, Armv8.2 dot product (gemm_int8.h,
// x_offset 0): sdot by element, one weight row's quad against 4 pixels' quads into 4 int32 lanes,
// exact (4 products of signed bytes per lane, |sum| < 2^31 by the caller's guarantee).
//
// Inner loop per quad: 4 loads of activations (16 pixels), 2 of weights (24 bytes), 24 sdot for
// 6 x 16 x 4 = 384 multiply-accumulates: 384 / 30 = 12.8 per instruction, against sdot's 16.
// 24 accumulators, 4 activation and 2 weight registers: 30 of the 32.
#include <arm_neon.h>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kRows = 6, kPixels = 16;

void int8_gemm_6x16c4_dotprod(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride) {
    int32x4_t vacc[kRows][4];  // row r, pixels 4 j .. 4 j + 3
    for (auto& row : vacc) {
        for (auto& v : row) {
            v = vdupq_n_s32(0);
        }
    }
    const auto multiply_quad = [&](const uint8_t* quad) {
        const int8_t* x = reinterpret_cast<const int8_t*>(quad);
        int8x16_t vx[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            vx[j] = vld1q_s8(x + 16 * j);
        }
        const int8x16_t vw03 = vld1q_s8(a);     // rows 0-3
        const int8x8_t vw45 = vld1_s8(a + 16);  // rows 4-5
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            vacc[0][j] = vdotq_laneq_s32(vacc[0][j], vx[j], vw03, 0);
            vacc[1][j] = vdotq_laneq_s32(vacc[1][j], vx[j], vw03, 1);
            vacc[2][j] = vdotq_laneq_s32(vacc[2][j], vx[j], vw03, 2);
            vacc[3][j] = vdotq_laneq_s32(vacc[3][j], vx[j], vw03, 3);
            vacc[4][j] = vdotq_lane_s32(vacc[4][j], vx[j], vw45, 0);
            vacc[5][j] = vdotq_lane_s32(vacc[5][j], vx[j], vw45, 1);
        }
        a += kRows * 4;
    };
    walk_quads(b, multiply_quad);
    for (int r = 0; r < kRows; ++r) {
        for (int j = 0; j < 4; ++j) {
            vst1q_s32(c + r * c_stride + 4 * j, vacc[r][j]);
        }
    }
}

}  // namespace

extern const Int8GemmUkernel kInt8Gemm6x16c4Dotprod = {kRows, kPixels, int8_gemm_6x16c4_dotprod, 1,
                                                       nullptr, 0};

}  // namespace detail
}  // namespace qtk
