// global_avg_pool2d, int8 (docs/quantization_spec.md section 6, d = H * W): each plane's sum of
// x - z, then arith::average, as the reference; the sum taken 16 bytes at a time. psadbw adds the
// unsigned bytes u = x ^ 0x80 = x + 128 into 64-bit lanes, so sum x = sum u - 128 n, exactly, for
// any plane size (SSE2, in every x86-64's baseline; on aarch64 NEON's pair adds into int32 lanes,
// flushed to int64 every 64 KiB; a plain loop elsewhere). Threads split planes.
// Channels-last (where the layout pass put it: graph_passes.h), each run of 64 channels sums its
// pixels 16 channels a vector (exact in int32: |sum| <= 128 H W < 2^31, checked), threads
// splitting the runs.
#include <algorithm>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "beside_reference.h"
#include "op_algo.h"
#include "qtk/arithmetic.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_global_avg_pool2d_int8_reference(const NodeView& node);

namespace {

int64_t sum_bytes(const int8_t* x, int64_t count) {
    int64_t sum = 0, i = 0;
#if defined(__SSE2__)
    const __m128i vsign = _mm_set1_epi8(static_cast<char>(0x80)), vzero = _mm_setzero_si128();
    __m128i vsum = vzero;
    for (; i + 16 <= count; i += 16) {
        const __m128i vu =
            _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)), vsign);
        vsum = _mm_add_epi64(vsum, _mm_sad_epu8(vu, vzero));
    }
    sum = _mm_cvtsi128_si64(vsum) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(vsum, vsum)) - 128 * i;
#elif defined(__ARM_NEON)
    constexpr int64_t kFlush = 65536;  // bytes per int32 lane sum: |sum| <= 128 * 65536 / 4
    while (i + 16 <= count) {
        int32x4_t vsum = vdupq_n_s32(0);
        for (const int64_t end = std::min(count, i + kFlush); i + 16 <= end; i += 16) {
            vsum = vpadalq_s16(vsum, vpaddlq_s8(vld1q_s8(x + i)));
        }
        sum += vaddlvq_s32(vsum);
    }
#endif
    for (; i < count; ++i) {
        sum += x[i];
    }
    return sum;
}

constexpr int64_t kChannelRun = 64;  // channels summed together channels-last

// sums[c] = the sum over `pixels` pixels (`stride` bytes apart) of x[c], c < channels <= 64:
// 16 channels a vector, u = x ^ 0x80 widened to uint16 lanes over up to 256 pixels (255 * 256 <
// 2^16), then added into uint32 lanes; sum x = sum u - 128 pixels (NEON: x itself into int16
// lanes, -128 * 256 >= -2^15). Channels past the last 16 one at a time.
void sum_channels(const int8_t* x, int64_t pixels, int64_t stride, int64_t channels,
                  int32_t* sums) {
    int64_t c = 0;
#if defined(__SSE2__)
    const __m128i vsign = _mm_set1_epi8(static_cast<char>(0x80)), vzero = _mm_setzero_si128();
    for (; c + 16 <= channels; c += 16) {
        __m128i vsum[4] = {vzero, vzero, vzero, vzero};
        for (int64_t first = 0; first < pixels; first += 256) {
            __m128i vlow = vzero, vhigh = vzero;  // channels 0-7 and 8-15, uint16
            const int64_t end = std::min(pixels, first + 256);
            for (int64_t p = first; p < end; ++p) {
                const __m128i vu = _mm_xor_si128(
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + p * stride + c)), vsign);
                vlow = _mm_add_epi16(vlow, _mm_unpacklo_epi8(vu, vzero));
                vhigh = _mm_add_epi16(vhigh, _mm_unpackhi_epi8(vu, vzero));
            }
            vsum[0] = _mm_add_epi32(vsum[0], _mm_unpacklo_epi16(vlow, vzero));
            vsum[1] = _mm_add_epi32(vsum[1], _mm_unpackhi_epi16(vlow, vzero));
            vsum[2] = _mm_add_epi32(vsum[2], _mm_unpacklo_epi16(vhigh, vzero));
            vsum[3] = _mm_add_epi32(vsum[3], _mm_unpackhi_epi16(vhigh, vzero));
        }
        const __m128i vbias = _mm_set1_epi32(static_cast<int32_t>(128 * pixels));
        for (int v = 0; v < 4; ++v) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + c + 4 * v),
                             _mm_sub_epi32(vsum[v], vbias));
        }
    }
#elif defined(__ARM_NEON)
    for (; c + 16 <= channels; c += 16) {
        int32x4_t vsum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int64_t first = 0; first < pixels; first += 256) {
            int16x8_t vlow = vdupq_n_s16(0), vhigh = vdupq_n_s16(0);  // channels 0-7 and 8-15
            const int64_t end = std::min(pixels, first + 256);
            for (int64_t p = first; p < end; ++p) {
                const int8x16_t vx = vld1q_s8(x + p * stride + c);
                vlow = vaddw_s8(vlow, vget_low_s8(vx));
                vhigh = vaddw_high_s8(vhigh, vx);
            }
            vsum[0] = vaddw_s16(vsum[0], vget_low_s16(vlow));
            vsum[1] = vaddw_high_s16(vsum[1], vlow);
            vsum[2] = vaddw_s16(vsum[2], vget_low_s16(vhigh));
            vsum[3] = vaddw_high_s16(vsum[3], vhigh);
        }
        for (int v = 0; v < 4; ++v) {
            vst1q_s32(sums + c + 4 * v, vsum[v]);
        }
    }
#endif
    for (; c < channels; ++c) {
        int32_t sum = 0;
        for (int64_t p = 0; p < pixels; ++p) {
            sum += x[p * stride + c];
        }
        sums[c] = sum;
    }
}

class GlobalAvgPool2dInt8Sums final : public BesideReference {
 public:
    explicit GlobalAvgPool2dInt8Sums(const NodeView& node)
        : BesideReference(node, make_global_avg_pool2d_int8_reference),
          zero_point_(node.activation_input(0, DType::kInt8).zero_point),
          nhwc_(node.channels_last()) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        if (nhwc_) {
            run_nhwc(io, pool);
            return;
        }
        const Shape& xs = *io.input_shapes[0];
        const int64_t plane_size = xs[2] * xs[3];
        pool.parallel_for(xs[0] * xs[1], [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t sum = sum_bytes(io.input<int8_t>(0) + plane * plane_size, plane_size);
                io.output<int8_t>(0)[plane] =
                    arith::average(sum - int64_t{zero_point_} * plane_size, plane_size,
                                   zero_point_);
            }
        });
    }

 private:
    void run_nhwc(const NodeIO& io, ThreadPool& pool) const {
        const Shape& xs = *io.input_shapes[0];
        const int64_t pixels = xs[1] * xs[2], channels = xs[3];
        if (pixels > (int64_t{1} << 31) / 256) {  // an int32 lane's bound; no real plane nears it
            reference_->run(io, pool);
            return;
        }
        const int64_t runs = (channels + kChannelRun - 1) / kChannelRun;
        pool.parallel_for(xs[0] * runs, [&](int64_t begin, int64_t end) {
            int32_t sums[kChannelRun];
            for (int64_t task = begin; task < end; ++task) {
                const int64_t n = task / runs, first = task % runs * kChannelRun;
                const int64_t count = std::min(kChannelRun, channels - first);
                sum_channels(io.input<int8_t>(0) + n * pixels * channels + first, pixels,
                             channels, count, sums);
                for (int64_t c = 0; c < count; ++c) {
                    io.output<int8_t>(0)[n * channels + first + c] = arith::average(
                        sums[c] - int64_t{zero_point_} * pixels, pixels, zero_point_);
                }
            }
        });
    }

    const int32_t zero_point_;
    const bool nhwc_;
};

std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<GlobalAvgPool2dInt8Sums>(node);
}

}  // namespace

extern const OpAlgo kGlobalAvgPool2dInt8Sums = {"global_avg_pool2d_int8_sums", IsaLevel::kScalar,
                                                make};

}  // namespace detail
}  // namespace qtk
