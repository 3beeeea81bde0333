// int8 GEMM micro-kernel, 4 output channels x 16 pixels, Armv8.6 int8 matrix multiply
// (gemm_int8.h, x_offset 0, quad_block 2): smmla multiplies a 2 x 8 block of weights (2 rows, 2
// quads) by an 8 x 2 block of activations (2 pixels, the same 2 quads) into 2 x 2 int32, exact.
// The weights come packed as [quads / 2][inner][4 rows][2 quads][4], so a row's 8 k lie together;
// the activations' two quads of a pixel lie outer_stride apart and are zipped in registers.
//
// Inner loop per 2 quads: 8 loads and 8 zips of activations (16 pixels), 2 loads of weights,
// 16 smmla for 4 x 16 x 8 = 512 multiply-accumulates: 512 / 34 = 15 per instruction, against
// smmla's 32. 16 accumulators, 8 activation and 2 weight registers.
#include <arm_neon.h>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kRows = 4, kPixels = 16, kQuadBlock = 2;

void int8_gemm_4x16c4_i8mm(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride) {
    int32x4_t vacc[2][8];  // rows 2 i, 2 i + 1 by pixels 2 j, 2 j + 1: [r0p0 r0p1 r1p0 r1p1]
    for (auto& rows : vacc) {
        for (auto& v : rows) {
            v = vdupq_n_s32(0);
        }
    }
    for (int64_t o = 0; o < b.outer_count; o += kQuadBlock) {
        const uint8_t* outer = b.base + o * b.outer_stride;
        for (int64_t i = 0; i < b.inner_count; ++i) {
            const int8_t* x0 = reinterpret_cast<const int8_t*>(outer + b.inner_offsets[i]);
            const int8_t* x1 = x0 + b.outer_stride;
            const int8x16_t vw01 = vld1q_s8(a), vw23 = vld1q_s8(a + 16);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {  // pixels 4 j .. 4 j + 3
                const int32x4_t vq0 = vreinterpretq_s32_s8(vld1q_s8(x0 + 16 * j));
                const int32x4_t vq1 = vreinterpretq_s32_s8(vld1q_s8(x1 + 16 * j));
                const int8x16_t vp01 = vreinterpretq_s8_s32(vzip1q_s32(vq0, vq1));  // 2 pixels, 8 k
                const int8x16_t vp23 = vreinterpretq_s8_s32(vzip2q_s32(vq0, vq1));
                vacc[0][2 * j] = vmmlaq_s32(vacc[0][2 * j], vw01, vp01);
                vacc[0][2 * j + 1] = vmmlaq_s32(vacc[0][2 * j + 1], vw01, vp23);
                vacc[1][2 * j] = vmmlaq_s32(vacc[1][2 * j], vw23, vp01);
                vacc[1][2 * j + 1] = vmmlaq_s32(vacc[1][2 * j + 1], vw23, vp23);
            }
            a += kRows * kQuadBlock * 4;
        }
    }
    for (int r = 0; r < 2; ++r) {
        int32_t* even = c + 2 * r * c_stride;
        int32_t* odd = even + c_stride;
        for (int j = 0; j < 4; ++j) {
            const int64x2_t v01 = vreinterpretq_s64_s32(vacc[r][2 * j]);
            const int64x2_t v23 = vreinterpretq_s64_s32(vacc[r][2 * j + 1]);
            vst1q_s32(even + 4 * j, vreinterpretq_s32_s64(vzip1q_s64(v01, v23)));
            vst1q_s32(odd + 4 * j, vreinterpretq_s32_s64(vzip2q_s64(v01, v23)));
        }
    }
}

}  // namespace

extern const Int8GemmUkernel kInt8Gemm4x16c4I8mm = {kRows, kPixels, int8_gemm_4x16c4_i8mm,
                                                    kQuadBlock, nullptr, 0};

}  // namespace detail
}  // namespace qtk
