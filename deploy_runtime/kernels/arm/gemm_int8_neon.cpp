// int8 GEMM micro-kernel, 4 output channels x 16 pixels, Armv8 NEON without dot product
// (gemm_int8.h, x_offset 0). Exact: smull multiplies signed bytes into int16 (|x w| <= 2^14) and
// sadalp adds each pair of those products into int32 lanes; nothing saturates.
//
// Inner loop per quad and half tile (8 pixels): 2 loads of activations, 1 of weights, 4 row
// broadcasts (dup), 8 smull/smull2 and 8 sadalp for 4 x 8 x 4 = 128 multiply-accumulates:
// 128 / 23 = 5.6 per instruction, against 8 for a widening multiply-accumulate (smlal: 8 products)
// where sadalp's pair adds are counted as the instructions they are.
#include <arm_neon.h>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kRows = 4, kPixels = 16, kHalf = 8;

void int8_gemm_4x16c4_neon(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride) {
    // Two passes of 8 pixels: a pass's 16 accumulators, and its operands, fit the 32 registers.
    for (int half = 0; half < kPixels / kHalf; ++half) {
        // vacc[r][j]: row r, pixels 2 j and 2 j + 1 of the half, two lanes per pixel (k0 + k1,
        // k2 + k3).
        int32x4_t vacc[kRows][4];
        for (auto& row : vacc) {
            for (auto& v : row) {
                v = vdupq_n_s32(0);
            }
        }
        const int8_t* w = a;
        const auto multiply_quad = [&](const uint8_t* quad) {
            const int8_t* x = reinterpret_cast<const int8_t*>(quad) + half * kHalf * 4;
            const int8x16_t vx0 = vld1q_s8(x), vx1 = vld1q_s8(x + 16);  // pixels 0-3, 4-7
            const int32x4_t vw = vreinterpretq_s32_s8(vld1q_s8(w));      // rows 0-3, 4 k each
#pragma GCC unroll 4
            for (int r = 0; r < kRows; ++r) {
                int8x16_t vwr;
                switch (r) {  // the lane must be a constant
                    case 0: vwr = vreinterpretq_s8_s32(vdupq_laneq_s32(vw, 0)); break;
                    case 1: vwr = vreinterpretq_s8_s32(vdupq_laneq_s32(vw, 1)); break;
                    case 2: vwr = vreinterpretq_s8_s32(vdupq_laneq_s32(vw, 2)); break;
                    default: vwr = vreinterpretq_s8_s32(vdupq_laneq_s32(vw, 3)); break;
                }
                vacc[r][0] = vpadalq_s16(vacc[r][0], vmull_s8(vget_low_s8(vx0), vget_low_s8(vwr)));
                vacc[r][1] = vpadalq_s16(vacc[r][1], vmull_high_s8(vx0, vwr));
                vacc[r][2] = vpadalq_s16(vacc[r][2], vmull_s8(vget_low_s8(vx1), vget_low_s8(vwr)));
                vacc[r][3] = vpadalq_s16(vacc[r][3], vmull_high_s8(vx1, vwr));
            }
            w += kRows * 4;
        };
        walk_quads(b, multiply_quad);
        for (int r = 0; r < kRows; ++r) {
            int32_t* row = c + r * c_stride + half * kHalf;
            vst1q_s32(row, vpaddq_s32(vacc[r][0], vacc[r][1]));
            vst1q_s32(row + 4, vpaddq_s32(vacc[r][2], vacc[r][3]));
        }
    }
}

}  // namespace

extern const Int8GemmUkernel kInt8Gemm4x16c4Neon = {kRows, kPixels, int8_gemm_4x16c4_neon, 1,
                                                    nullptr, 0};

}  // namespace detail
}  // namespace qtk
