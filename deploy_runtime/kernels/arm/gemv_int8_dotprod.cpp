// int8 GEMV micro-kernel, 16 output features, Armv8.2 dot product (gemv_int8.h, kr 4, x_offset
// 0): sdot of 4 features' quads against the input's quad broadcast, exact (4 products of signed
// bytes per lane). Two sets of accumulators take alternate quads, so consecutive sdot do not wait
// on each other.
#include <arm_neon.h>

#include <cstring>

#include "../contracts/gemv_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kFeatures = 16, kQuad = 4;

int8x16_t broadcast_quad(const uint8_t* u) {
    int32_t quad;
    std::memcpy(&quad, u, kQuad);
    return vreinterpretq_s8_s32(vdupq_n_s32(quad));
}

void gemv_16c4_dotprod(int64_t k_blocks, const int8_t* w, const uint8_t* u, int32_t* c) {
    int32x4_t vacc[2][4];
    for (auto& set : vacc) {
        for (auto& v : set) {
            v = vdupq_n_s32(0);
        }
    }
    for (int64_t b = 0; b < k_blocks; ++b) {
        const int8x16_t vu = broadcast_quad(u + b * kQuad);
        int32x4_t* set = vacc[b % 2];
        for (int j = 0; j < 4; ++j) {
            set[j] = vdotq_s32(set[j], vld1q_s8(w + (b * kFeatures + 4 * j) * kQuad), vu);
        }
    }
    for (int j = 0; j < 4; ++j) {
        vst1q_s32(c + 4 * j, vaddq_s32(vacc[0][j], vacc[1][j]));
    }
}

}  // namespace

extern const Int8GemvUkernel kInt8Gemv16c4Dotprod = {kFeatures, kQuad, gemv_16c4_dotprod, 0};

}  // namespace detail
}  // namespace qtk
