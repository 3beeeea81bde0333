// int8 depthwise conv2d micro-kernels, 16 outputs of a row per step (8 in the last), Armv8 NEON
// (depthwise_int8.h). ld2 splits 8 int16 pairs into the input under the pair's first tap and that
// under its second, 8 outputs each, already widened; smlal/smlal2 by element multiply each by its
// tap's int16 weight (a lane of the 2 to 4 weight registers) into int32 lanes: exact, no pairwise
// add, and a 5-wide kernel's zero sixth weight is never multiplied.
//
// Per pair of taps and 16 outputs: 2 ld2 and 8 smlal(2), 4 multiply-accumulates each; a 5x5 step
// of 16 outputs is 136 instructions for 400 (benchmarks/arm_inner_loops.py). Each pair of taps has
// a pointer of its own, post-incremented by its ld2s: an empty asm hides that the pointers move
// together, or GCC derives them all from one and adds an address per ld2.
#include <arm_neon.h>

#include <cstring>
#include <utility>

#include "../contracts/depthwise_int8.h"

// GCC 12 gives every ld2 the same register pair and copies a pair out wherever two are live at
// once, as its scheduling before register allocation makes them (a sixth more instructions in
// the loop). Unscheduled, each ld2 is used where it is loaded: out-of-order cores rename the pair
// and run ahead; in-order ones (Cortex-A55) wait out its latency.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

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

// One pair of taps, T = ky P + p, over N = 8 or 16 outputs: x[T] walks the pairs of row ky from
// 2 p / S on, 8 per ld2 (val[0]: the inputs under tap 2p, val[1]: under 2p + 1); weight w[ky][2p]
// is int16 lane 2 T of vw, w[ky][2p + 1] lane 2 T + 1 (skipped past the kernel, where it is 0).
template <int K, int N, int T>
[[gnu::always_inline]] inline void pair_taps(const int16_t** x, const int16x8_t* vw,
                                             int32x4_t* vacc) {
    constexpr int P = (K + 1) / 2, p = T % P;
    constexpr int i0 = 2 * T, i1 = 2 * T + 1;
#pragma GCC unroll 2
    for (int h = 0; h < N / 8; ++h) {
        const int16x8x2_t vx = vld2q_s16(x[T]);
        x[T] += 16;
        asm("" : "+r"(x[T]));  // one post-incremented pointer per pair (see above)
        vacc[2 * h] = vmlal_laneq_s16(vacc[2 * h], vget_low_s16(vx.val[0]), vw[i0 / 8], i0 % 8);
        vacc[2 * h + 1] = vmlal_high_laneq_s16(vacc[2 * h + 1], vx.val[0], vw[i0 / 8], i0 % 8);
        if constexpr (2 * p + 1 < K) {
            vacc[2 * h] =
                vmlal_laneq_s16(vacc[2 * h], vget_low_s16(vx.val[1]), vw[i1 / 8], i1 % 8);
            vacc[2 * h + 1] = vmlal_high_laneq_s16(vacc[2 * h + 1], vx.val[1], vw[i1 / 8], i1 % 8);
        }
    }
}

// N outputs at acc, which moves past them.
template <int K, int N, int... T>
[[gnu::always_inline]] inline void outputs(const int16_t** x, const int16x8_t* vw, int32_t*& acc,
                                           std::integer_sequence<int, T...>) {
    int32x4_t vacc[N / 4];
#pragma GCC unroll 4
    for (int i = 0; i < N / 4; ++i) {
        vacc[i] = vdupq_n_s32(0);
    }
    (pair_taps<K, N, T>(x, vw, vacc), ...);
#pragma GCC unroll 4
    for (int i = 0; i < N / 4; ++i) {
        vst1q_s32(acc, vacc[i]);
        acc += 4;
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
    const int16_t* x[K * P];
#pragma GCC unroll 15
    for (int t = 0; t < K * P; ++t) {
        x[t] = reinterpret_cast<const int16_t*>(rows[t / P] + 2 * (t % P) / S);
    }
    const int64_t end = (count + kDepthwiseMaxLanes - 1) / kDepthwiseMaxLanes * kDepthwiseMaxLanes;
    int64_t o = 0;
    for (; o + 16 <= end; o += 16) {
        outputs<K, 16>(x, vw, acc, Taps{});
    }
    if (o < end) {
        outputs<K, 8>(x, vw, acc, Taps{});
    }
}

}  // namespace

extern const Int8DepthwiseUkernel kInt8DepthwiseW16Neon = {
    pack_pairs_neon,
    {{depthwise_row_neon<3, 1>, depthwise_row_neon<3, 2>},
     {depthwise_row_neon<5, 1>, depthwise_row_neon<5, 2>}}};

}  // namespace detail
}  // namespace qtk
