// Binary popcount micro-kernel, Armv8 NEON: 4 pixels x 8 output channels, four q registers of two
// 64-bit weight words, the pixel's word duplicated and eor'ed against them; cnt counts each byte's
// bits and uadalp adds byte pairs into 16-bit lanes (at most 16 a step, and a kernel's steps are
// at most 66,000 / 64 products, so they cannot overflow), widened to each word's count at the end.
#include <arm_neon.h>

#include "../contracts/popcount_binary.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kPixels = 4, kBlocks = 4;  // kBlocks q registers of 2 channels

void run(const uint64_t* const* pixel, const int64_t* tap_offset, int64_t taps, int64_t words,
         const uint64_t* w, int32_t products, int scale, const int32_t* const* missed,
         int32_t* sums, int64_t sums_stride) {
    uint16x8_t acc[kPixels][kBlocks];
    for (auto& row : acc) {
        for (uint16x8_t& a : row) {
            a = vdupq_n_u16(0);
        }
    }
    for (int64_t t = 0; t < taps; ++t) {
        const int64_t offset = tap_offset[t];
        for (int64_t j = 0; j < words; ++j, w += 2 * kBlocks) {
            uint64x2_t wb[kBlocks];
            for (int b = 0; b < kBlocks; ++b) {
                wb[b] = vld1q_u64(w + 2 * b);
            }
            for (int p = 0; p < kPixels; ++p) {
                const uint64x2_t x = vdupq_n_u64(pixel[p][offset + j]);
                for (int b = 0; b < kBlocks; ++b) {
                    acc[p][b] = vpadalq_u8(
                        acc[p][b], vcntq_u8(vreinterpretq_u8_u64(veorq_u64(x, wb[b]))));
                }
            }
        }
    }
    for (int p = 0; p < kPixels; ++p) {
        for (int b = 0; b < kBlocks; ++b) {
            const uint64x2_t count = vpaddlq_u32(vpaddlq_u16(acc[p][b]));
            const uint64_t counts[2] = {vgetq_lane_u64(count, 0), vgetq_lane_u64(count, 1)};
            for (int lane = 0; lane < 2; ++lane) {
                const int32_t sum = products - 2 * static_cast<int32_t>(counts[lane]);
                sums[(2 * b + lane) * sums_stride + p] =
                    static_cast<int32_t>(uint32_t(sum) << scale) -
                    (missed != nullptr ? missed[p][2 * b + lane] : 0);
            }
        }
    }
}

}  // namespace

extern const BinaryPopcountUkernel kBinaryPopcount4x8Neon = {kPixels, 2 * kBlocks, run, nullptr};

}  // namespace detail
}  // namespace qtk
