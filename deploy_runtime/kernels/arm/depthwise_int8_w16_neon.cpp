// int8 depthwise conv2d micro-kernels, 16 outputs of a row per step (8 in the last), Armv8 NEON
// (depthwise_int8.h). ld2 splits 8 int16 pairs into the input under the pair's first tap and that
// under its second, 8 outputs each, already widened; smlal/smlal2 by element multiply each by its
// tap's int16 weight (a lane of the 2 to 4 weight registers) into int32 lanes: exact, no pairwise
// add, and a 5-wide kernel's zero sixth weight is never multiplied.
//
// Per pair of taps and 16 outputs: 2 ld2 and 8 smlal(2), 4 multiply-accumulates each
// (benchmarks/arm_inner_loops.py counts the whole step).
#include <arm_neon.h>

#include <cstring>
#include <utility>

#include "../contracts/depthwise_int8.h"

namespace qtk {
namespace detail {
namespace {

void pack_pairs_neon(const int8_t* x, int64_t count, int64_t stride, int32_t* pairs) {
    int16_t* dst = reinterpret_cast<int16_t*>(pairs);
    int64_t j = 0;
    if (stride == 2) {  // the pairs are the row sign-extended to int16, in order
        for (; j + 8 <= count; j += 8) {
            const int8x16_t vx = vld1q_s8(x + 2 * j);
            vst1q_s16(dst + 2 * j, vmovl_s8(vget_low_s8(vx)));
            vst1q_s16(dst + 2 * j + 8, vmovl_high_s8(vx));
        }
    } else {  // x[j] and x[j + 1] interleaved by st2
        for (; j + 16 <= count; j += 16) {
            const int8x16_t vfirst = vld1q_s8(x + j), vsecond = vld1q_s8(x + j + 1);
            const int16x8x2_t vlow = {
                {vmovl_s8(vget_low_s8(vfirst)), vmovl_s8(vget_low_s8(vsecond))}};
            const int16x8x2_t vhigh = {{vmovl_high_s8(vfirst), vmovl_high_s8(vsecond)}};
            vst2q_s16(dst + 2 * j, vlow);
            vst2q_s16(dst + 2 * j + 16, vhigh);
        }
    }
    for (; j < count; ++j) {
        pairs[j] = int32_t(uint16_t(x[stride * j])) | int32_t(uint32_t(x[stride * j + 1]) << 16);
    }
}

// One pair of taps, T = ky P + p, over N = 8 or 16 outputs from o: weight w[ky][2p] is int16 lane
// 2 T of vw, w[ky][2p + 1] lane 2 T + 1 (skipped past the kernel, where it is 0).
template <int K, int S, int N, int T>
inline void pair_taps(const int32_t* const* rows, int64_t o, const int16x8_t* vw,
                      int32x4_t* vacc) {
    constexpr int P = (K + 1) / 2, ky = T / P, p = T % P;
    constexpr int i0 = 2 * T, i1 = 2 * T + 1;
    const int16_t* x = reinterpret_cast<const int16_t*>(rows[ky] + o + 2 * p / S);
#pragma GCC unroll 2
    for (int h = 0; h < N / 8; ++h) {
        const int16x8x2_t vx = vld2q_s16(x + 16 * h);  // [0]: under tap 2p, [1]: under 2p + 1
        vacc[2 * h] = vmlal_laneq_s16(vacc[2 * h], vget_low_s16(vx.val[0]), vw[i0 / 8], i0 % 8);
        vacc[2 * h + 1] = vmlal_high_laneq_s16(vacc[2 * h + 1], vx.val[0], vw[i0 / 8], i0 % 8);
        if constexpr (2 * p + 1 < K) {
            vacc[2 * h] =
                vmlal_laneq_s16(vacc[2 * h], vget_low_s16(vx.val[1]), vw[i1 / 8], i1 % 8);
            vacc[2 * h + 1] = vmlal_high_laneq_s16(vacc[2 * h + 1], vx.val[1], vw[i1 / 8], i1 % 8);
        }
    }
}

template <int K, int S, int N, int... T>
inline void outputs(const int32_t* const* rows, int64_t o, const int16x8_t* vw, int32_t* acc,
                    std::integer_sequence<int, T...>) {
    int32x4_t vacc[N / 4];
    for (auto& v : vacc) {
        v = vdupq_n_s32(0);
    }
    (pair_taps<K, S, N, T>(rows, o, vw, vacc), ...);
    for (int i = 0; i < N / 4; ++i) {
        vst1q_s32(acc + o + 4 * i, vacc[i]);
    }
}

template <int K, int S>
void depthwise_row_neon(const int32_t* const* rows, const int32_t* weights, int64_t count,
                        int32_t* acc) {
    constexpr int P = (K + 1) / 2;
    using Taps = std::make_integer_sequence<int, K * P>;
    // The K P weight pairs as int16 lanes of whole registers (at most 30 of 32).
    int16_t w[32] = {};
    std::memcpy(w, weights, sizeof(int32_t) * K * P);
    const int16x8_t vw[4] = {vld1q_s16(w), vld1q_s16(w + 8), vld1q_s16(w + 16), vld1q_s16(w + 24)};
    const int64_t end = (count + kDepthwiseMaxLanes - 1) / kDepthwiseMaxLanes * kDepthwiseMaxLanes;
    int64_t o = 0;
    for (; o + 16 <= end; o += 16) {
        outputs<K, S, 16>(rows, o, vw, acc, Taps{});
    }
    if (o < end) {
        outputs<K, S, 8>(rows, o, vw, acc, Taps{});
    }
}

}  // namespace

extern const Int8DepthwiseUkernel kInt8DepthwiseW16Neon = {
    pack_pairs_neon,
    {{depthwise_row_neon<3, 1>, depthwise_row_neon<3, 2>},
     {depthwise_row_neon<5, 1>, depthwise_row_neon<5, 2>}}};

}  // namespace detail
}  // namespace qtk
