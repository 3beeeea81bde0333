// int8 GEMV micro-kernel, 16 output features, Armv8 NEON without dot product (gemv_int8.h, kr 4,
// x_offset 0): smull of 2 features' quads by the input's quad (signed bytes into int16, exact),
// sadalp adding each pair of products into int32 lanes, a pairwise add at the end.
#include <arm_neon.h>

#include <cstring>

#include "../contracts/gemv_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kFeatures = 16, kQuad = 4;

void gemv_16c4_neon(int64_t k_blocks, const int8_t* w, const uint8_t* u, int32_t* c) {
    int32x4_t vacc[8];  // features 2 j, 2 j + 1: (k0 + k1, k2 + k3) each
    for (auto& v : vacc) {
        v = vdupq_n_s32(0);
    }
    for (int64_t b = 0; b < k_blocks; ++b) {
        int32_t quad;
        std::memcpy(&quad, u + b * kQuad, kQuad);
        const int8x16_t vu = vreinterpretq_s8_s32(vdupq_n_s32(quad));
        for (int j = 0; j < 4; ++j) {
            const int8x16_t vw = vld1q_s8(w + (b * kFeatures + 4 * j) * kQuad);
            vacc[2 * j] = vpadalq_s16(vacc[2 * j], vmull_s8(vget_low_s8(vw), vget_low_s8(vu)));
            vacc[2 * j + 1] = vpadalq_s16(vacc[2 * j + 1], vmull_high_s8(vw, vu));
        }
    }
    for (int j = 0; j < 4; ++j) {
        vst1q_s32(c + 4 * j, vpaddq_s32(vacc[2 * j], vacc[2 * j + 1]));
    }
}

}  // namespace

extern const Int8GemvUkernel kInt8Gemv16c4Neon = {kFeatures, kQuad, gemv_16c4_neon, 0};

}  // namespace detail
}  // namespace qtk
