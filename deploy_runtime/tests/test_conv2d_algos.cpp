// Every int8 conv2d algorithm against the reference, byte for byte, at every ISA level this CPU
// runs (levels it lacks are reported as skipped): the GEMM and depthwise-by-rows micro-kernels
// alone against scalar sums and the requantization epilogues against arith::requantize, then
// whole convolutions through Model and Session (QTK_CONV_ALGO pins each algorithm) over shapes
// around the tile and block edges, batch 1 and 3, 1 and 2 threads, random and extreme values, and
// a depthwise sweep for the depthwise algorithms. Also the QTK_ISA cap, QTK_CONV_ALGO's errors and
// the registry's default choice.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "algo_policy.h"
#include "check.h"
#include "conv_geometry.h"
#include "cpu_features.h"
#include "model_builder.h"
#include "op_registry.h"
#include "qtk/runtime.h"

#if QTK_X86_AVX2 || QTK_X86_AVX_VNNI || QTK_X86_AVX512_VNNI || QTK_ARM_NEON
#include "../kernels/contracts/gemm_int8.h"
#include "../kernels/contracts/requantize_int8.h"
#include "../kernels/contracts/vadd_int8.h"
#endif
#if QTK_X86_AVX2 || QTK_X86_AVX_VNNI || QTK_X86_AVX512_VNNI
#include "../kernels/contracts/winograd_int8_f2x3.h"
#endif
#if QTK_X86_AVX2 || QTK_ARM_NEON
#include "../kernels/contracts/depthwise_int8.h"
#endif
#include "int8_quantize.h"

namespace qtk {
namespace detail {
extern const Conv2dAlgo kConv2dInt8Reference;  // kernels/reference/conv2d.cpp
#if QTK_X86_AVX512_VNNI && QTK_X86_AVX_VNNI
extern const Int8GemmUkernel kInt8Gemm4x16c4AvxVnniAsEvex;  // gemm_int8_avx_vnni_as_evex.cpp
#endif
}  // namespace detail
}  // namespace qtk


namespace {

#if QTK_X86_AVX2 || QTK_X86_AVX_VNNI || QTK_X86_AVX512_VNNI || QTK_ARM_NEON
// c = a . b by the contract of gemm_int8.h, for every micro-kernel this CPU runs: the packed GEMM
// operand (one inner offset) over quad counts around the unrolling, and B read in place as the
// direct conv does (several unaligned inner offsets, outer strides, a wider c row stride), with
// random and extreme values.
void test_ukernels() {
    using qtk::detail::Int8GemmB;
    using qtk::detail::Int8GemmUkernel;
    struct Entry {
        const char* name;
        IsaLevel isa;
        const Int8GemmUkernel* ukernel;
    };
    const Entry entries[] = {
#if QTK_X86_AVX2
        {"2x16c4_avx2", IsaLevel::kAvx2, &qtk::detail::kInt8Gemm2x16c4Avx2},
#endif
#if QTK_X86_AVX_VNNI
        {"4x16c4_avx_vnni", IsaLevel::kAvxVnni, &qtk::detail::kInt8Gemm4x16c4AvxVnni},
#endif
#if QTK_X86_AVX512_VNNI && QTK_X86_AVX_VNNI
        {"4x16c4_avx_vnni as EVEX", IsaLevel::kAvx512Vnni,
         &qtk::detail::kInt8Gemm4x16c4AvxVnniAsEvex},
#endif
#if QTK_X86_AVX512_VNNI
        {"8x32c4_avx512_vnni", IsaLevel::kAvx512Vnni, &qtk::detail::kInt8Gemm8x32c4Avx512Vnni},
#endif
#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
        {"32x32c4_amx_int8", IsaLevel::kAmxInt8, &qtk::detail::kInt8Gemm32x32c4Amx},
#endif
#if QTK_ARM_NEON
        {"4x16c4_neon", IsaLevel::kNeon, &qtk::detail::kInt8Gemm4x16c4Neon},
#endif
#if QTK_ARM_DOTPROD
        {"6x16c4_dotprod", IsaLevel::kDotprod, &qtk::detail::kInt8Gemm6x16c4Dotprod},
#endif
#if QTK_ARM_I8MM
        {"4x16c4_i8mm", IsaLevel::kI8mm, &qtk::detail::kInt8Gemm4x16c4I8mm},
#endif
    };
    // {outer count, inner count}: inner 1 is the packed operand.
    const int64_t layouts[][2] = {{1, 1}, {2, 1}, {3, 1}, {7, 1}, {16, 1}, {48, 1}, {145, 1},
                                  {1, 9}, {2, 9}, {5, 3}, {16, 9}, {3, 25}, {32, 4}};
    Rng rng(7);
    for (const Entry& e : entries) {
        if (!cpu_supports(e.isa)) {
            std::printf("micro-kernel %s: skipped, this CPU lacks %s\n", e.name, isa_name(e.isa));
            continue;
        }
        const Int8GemmUkernel& u = *e.ukernel;
        if (u.prepare != nullptr) {
            u.prepare();
        }
        const int64_t block = u.quad_block;
        for (const auto& layout : layouts) {
            const int64_t outer = layout[0], inner = layout[1], quads = outer * inner;
            if (outer % block != 0) {
                continue;  // a quad-block micro-kernel reads whole blocks of outer quads
            }
            const int64_t quad_bytes = u.nr * 4;
            // Packed: quads back to back. In place: each outer step holds its quads at random
            // byte offsets within a span of 2 * inner quads (overlapping, as conv taps do).
            std::vector<int64_t> offsets(size_t(inner), 0);
            int64_t outer_stride = quad_bytes;
            if (inner > 1) {
                outer_stride = 2 * inner * quad_bytes + 3;
                for (int64_t& offset : offsets) {
                    offset = rng.uniform(0, (2 * inner - 1) * quad_bytes);
                }
            }
            const int64_t c_stride = inner > 1 ? u.nr + 5 : u.nr;
            for (int fill = 0; fill < 3; ++fill) {  // random, then the two extremes
                std::vector<int8_t> a(size_t(quads * u.mr * 4));
                std::vector<uint8_t> b(size_t(outer * outer_stride + 2 * inner * quad_bytes));
                for (int8_t& v : a) {
                    v = static_cast<int8_t>(fill == 0   ? rng.uniform(-127, 127)
                                            : fill == 1 ? 127
                                                        : -127);
                }
                // Activations as the micro-kernel takes them (x_offset 128: uint8, 0: int8), the
                // extreme fills at the largest magnitude (255, or -128 as 0x80).
                const bool unsigned_b = u.x_offset == 128;
                for (uint8_t& v : b) {
                    v = static_cast<uint8_t>(fill == 0 ? rng.uniform(0, 255)
                                             : unsigned_b ? 255 : 0x80);
                }
                // The weights as the micro-kernel reads them: int8, or widened to int16.
                std::vector<int8_t> packed(a.size() * size_t(u.weight_bytes));
                for (size_t i = 0; i < a.size(); ++i) {
                    const int16_t wide = a[i];
                    std::memcpy(packed.data() + i * size_t(u.weight_bytes), &wide,
                                size_t(u.weight_bytes));  // little-endian: the low byte first
                }
                std::vector<int32_t> c(size_t(u.mr * c_stride), 0x5a5a5a5a);
                u.run(packed.data(),
                      Int8GemmB{b.data(), outer, outer_stride, inner, offsets.data()}, c.data(),
                      c_stride);
                for (int r = 0; r < u.mr; ++r) {
                    for (int j = 0; j < c_stride; ++j) {
                        int64_t want = 0x5a5a5a5a;  // between rows: untouched
                        if (j < u.nr) {
                            want = 0;
                            for (int64_t q = 0; q < quads; ++q) {
                                const uint8_t* bq = b.data() + q / inner * outer_stride +
                                                    offsets[size_t(q % inner)];
                                for (int i = 0; i < 4; ++i) {
                                    const int64_t o = q / inner, t = q % inner;
                                    const int64_t at =
                                        (((o / block * inner + t) * u.mr + r) * block +
                                         o % block) * 4 + i;
                                    const int64_t x = unsigned_b
                                                          ? int64_t{bq[j * 4 + i]}
                                                          : int64_t{int8_t(bq[j * 4 + i])};
                                    want += int64_t{a[size_t(at)]} * x;
                                }
                            }
                        }
                        if (c[size_t(r * c_stride + j)] != want) {
                            qtk_test::report_failure(
                                __FILE__, __LINE__,
                                std::string(e.name) + " outer " + std::to_string(outer) +
                                    " inner " + std::to_string(inner) + " c[" + std::to_string(r) +
                                    "][" + std::to_string(j) + "] is " +
                                    std::to_string(c[size_t(r * c_stride + j)]) + ", expected " +
                                    std::to_string(want));
                        }
                    }
                }
            }
        }
        std::printf("micro-kernel %s: checked\n", e.name);
    }
}

#if QTK_X86_AVX2 || QTK_ARM_NEON
// The depthwise-by-rows micro-kernels (depthwise_int8.h) against the contract's sums, each buffer
// exactly as long as the contract's bounds (so a sanitizer build sees any read past them), the
// writes checked up to their bound and untouched past it: pack_pairs over counts either side of
// the vector steps, then row for k 3 and 5, stride 1 and 2, counts 1 to 40 (around the 8- and
// 16-output steps), random and extreme values.
void test_depthwise_ukernels() {
    using qtk::detail::Int8DepthwiseUkernel;
    using qtk::detail::kDepthwiseMaxLanes;
    struct Entry {
        const char* name;
        IsaLevel isa;
        const Int8DepthwiseUkernel* ukernel;
    };
    const Entry entries[] = {
#if QTK_X86_AVX2
        {"depthwise w8_avx2", IsaLevel::kAvx2, &qtk::detail::kInt8DepthwiseW8Avx2},
#endif
#if QTK_ARM_NEON
        {"depthwise w16_neon", IsaLevel::kNeon, &qtk::detail::kInt8DepthwiseW16Neon},
#endif
    };
    constexpr int32_t kGuard = 0x5a5a5a5a;
    const auto pair = [](int32_t first, int32_t second) {
        return int32_t(uint16_t(first)) | int32_t(uint32_t(second) << 16);
    };
    const auto first_of = [](int32_t v) { return int32_t(int16_t(uint32_t(v) & 0xFFFF)); };
    const auto second_of = [](int32_t v) { return int32_t(int16_t(uint32_t(v) >> 16)); };
    Rng rng(23);
    for (const Entry& e : entries) {
        if (!cpu_supports(e.isa)) {
            std::printf("micro-kernel %s: skipped, this CPU lacks %s\n", e.name, isa_name(e.isa));
            continue;
        }
        const Int8DepthwiseUkernel& u = *e.ukernel;
        for (int64_t s : {1, 2}) {
            for (int64_t count = 1; count <= 40; ++count) {
                const std::vector<int8_t> x = rng.int8s(size_t(s * (count - 1) + 2));
                std::vector<int32_t> pairs(size_t(count + 8), kGuard);
                u.pack_pairs(x.data(), count, s, pairs.data());
                for (int64_t j = 0; j < count + 8; ++j) {
                    const int32_t want =
                        j < count ? pair(x[size_t(s * j)], x[size_t(s * j + 1)]) : kGuard;
                    if (pairs[size_t(j)] != want) {
                        qtk_test::report_failure(__FILE__, __LINE__,
                                                 std::string(e.name) + " pack_pairs stride " +
                                                     std::to_string(s) + " count " +
                                                     std::to_string(count) + " pair " +
                                                     std::to_string(j));
                    }
                }
            }
        }
        for (int64_t k : {3, 5}) {
            for (int64_t s : {1, 2}) {
                const int64_t pairs_per_row = (k + 1) / 2;
                for (int64_t count = 1; count <= 40; ++count) {
                    const int fill = int(count % 4);  // 0, 1: random; 2: -128 x 127; 3: -128 x -127
                    const int64_t written =
                        (count + kDepthwiseMaxLanes - 1) / kDepthwiseMaxLanes * kDepthwiseMaxLanes;
                    const int64_t read = written + (k - 1) / s;
                    std::vector<std::vector<int32_t>> rows(static_cast<size_t>(k));
                    const int32_t* row_ptrs[5];
                    for (int64_t ky = 0; ky < k; ++ky) {
                        for (int64_t j = 0; j < read; ++j) {
                            rows[size_t(ky)].push_back(
                                fill >= 2 ? pair(-128, -128)
                                          : pair(int32_t(rng.uniform(-128, 127)),
                                                 int32_t(rng.uniform(-128, 127))));
                        }
                        row_ptrs[ky] = rows[size_t(ky)].data();
                    }
                    std::vector<int32_t> weights;
                    for (int64_t ky = 0; ky < k; ++ky) {
                        for (int64_t p = 0; p < pairs_per_row; ++p) {
                            const auto w = [&](int64_t kx) {
                                return kx >= k      ? 0
                                       : fill == 2 ? 127
                                       : fill == 3 ? -127
                                                   : int32_t(rng.uniform(-127, 127));
                            };
                            const int32_t w0 = w(2 * p), w1 = w(2 * p + 1);
                            weights.push_back(pair(w0, w1));
                        }
                    }
                    std::vector<int32_t> acc(size_t(written + 8), kGuard);
                    u.row[k == 5][s == 2](row_ptrs, weights.data(), count, acc.data());
                    for (int64_t o = 0; o < written + 8; ++o) {
                        if (o >= count && o < written) {
                            continue;  // vector lanes past the count: anything
                        }
                        int64_t want = kGuard;
                        if (o < count) {
                            want = 0;
                            for (int64_t ky = 0; ky < k; ++ky) {
                                for (int64_t p = 0; p < pairs_per_row; ++p) {
                                    const int32_t v = rows[size_t(ky)][size_t(o + 2 * p / s)];
                                    const int32_t w = weights[size_t(ky * pairs_per_row + p)];
                                    want += int64_t{first_of(v)} * first_of(w) +
                                            int64_t{second_of(v)} * second_of(w);
                                }
                            }
                        }
                        if (acc[size_t(o)] != want) {
                            qtk_test::report_failure(
                                __FILE__, __LINE__,
                                std::string(e.name) + " row k " + std::to_string(k) +
                                    " stride " + std::to_string(s) + " count " +
                                    std::to_string(count) + " acc[" + std::to_string(o) +
                                    "] is " + std::to_string(acc[size_t(o)]) + ", expected " +
                                    std::to_string(want));
                        }
                    }
                }
            }
        }
        std::printf("micro-kernel %s: checked\n", e.name);
    }
}
#endif

// A value in [lo, hi]: a third of the time an edge (lo, hi, their neighbours, -1, 0, 1 where they
// lie inside), else uniform or small.
int64_t draw(Rng& rng, int64_t lo, int64_t hi) {
    const int64_t edges[] = {lo, lo + 1, hi - 1, hi, -1, 0, 1};
    switch (rng.uniform(0, 2)) {
        case 0:
            return std::min(hi, std::max(lo, edges[rng.uniform(0, 6)]));
        case 1:
            return rng.uniform(lo, hi);
        default:
            return std::min(hi, std::max(lo, rng.uniform(-300000, 300000)));
    }
}

// The plain-data plans the vector kernels broadcast (kernels/drivers/int8_plans.cpp,
// int8_quantize_plan), each form computed in scalar from its plan alone and held against arith::
// for every zero point and clamp bound (requantize, quantize) or a grid of them (add), each shift,
// and the arguments at their extremes and at random.
void test_plans() {
    using qtk::detail::Int8Output;
    using qtk::detail::kHighHalfDroppedBits;
    using qtk::detail::kHighHalfMaxShift;
    using qtk::detail::kHighHalfMinShift;
    constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    const auto clamp = [](int64_t v, int64_t lo, int64_t hi) {
        return std::min(hi, std::max(lo, v));
    };
    Rng rng(23);
    int64_t requantize_wrong = 0, add_wrong = 0, quantize_wrong = 0;
    for (int32_t zero_point = -128; zero_point <= 127; ++zero_point) {
        for (int32_t lo = -128; lo <= 127; lo += 5) {
            for (int32_t hi = lo; hi <= 127; hi += 7) {
                const Int8Output out = {zero_point, lo, hi};
                for (int32_t shift = 1; shift <= 62; ++shift) {
                    for (int trial = 0; trial < 4; ++trial) {
                        const auto acc = static_cast<int32_t>(draw(rng, kMin, kMax));
                        const auto multiplier = static_cast<int32_t>(draw(rng, 0, kMax));
                        const int8_t want =
                            qtk::arith::requantize(acc, multiplier, shift, zero_point, lo, hi);
                        const int64_t product = int64_t{acc} * multiplier;
                        const int64_t wide =
                            clamp((product + (int64_t{1} << (shift - 1))) >> shift,
                                  out.lo_from_zero_point, out.hi_from_zero_point) +
                            out.zero_point;
                        requantize_wrong += wide != want;
                        if (shift < kHighHalfMinShift || shift > kHighHalfMaxShift) {
                            continue;
                        }
                        // The high-half form in int32, as the vector code computes it.
                        const int64_t round =
                            int64_t{out.round_odd} * (int64_t{1} << (shift - kHighHalfMinShift));
                        const int64_t sum = (product >> 32) + round;
                        requantize_wrong += round != static_cast<int32_t>(round);
                        requantize_wrong += sum != static_cast<int32_t>(sum);
                        requantize_wrong +=
                            clamp(sum >> (shift - kHighHalfDroppedBits), lo, hi) != want;
                    }
                }
            }
        }
        const qtk::detail::Int8QuantizePlan plan =
            qtk::detail::int8_quantize_plan(1.0f / 0.37f, zero_point);
        for (int i = -70000; i <= 70000; ++i) {
            const float x = float(i) * 0.01f;
            float r = std::nearbyint(x * plan.inv_scale);
            r = std::isnan(r) ? 0.0f : std::min(std::max(r, plan.lo), plan.hi);
            quantize_wrong +=
                int8_t(int32_t(r) + plan.zero_point) != qtk::arith::quantize(x, plan.inv_scale,
                                                                            zero_point);
        }
    }
    // The add: its int64 form and the 16-bit form, d = q - z over every pair of bytes.
    const int32_t multipliers[] = {0, 1, 32767, 32768, 65535, 65536, 1 << 30,
                                   int32_t(kMax) - 32769, int32_t(kMax) - 32768, int32_t(kMax)};
    for (int trial = 0; trial < 300; ++trial) {
        const int32_t shift = trial < 62 ? trial + 1 : static_cast<int32_t>(rng.uniform(14, 48));
        const int32_t a_multiplier = rng.uniform(0, 1) ? multipliers[rng.uniform(0, 9)]
                                                       : static_cast<int32_t>(draw(rng, 0, kMax));
        const int32_t b_multiplier = rng.uniform(0, 1) ? multipliers[rng.uniform(0, 9)]
                                                       : static_cast<int32_t>(draw(rng, 0, kMax));
        const auto a_zero_point = static_cast<int32_t>(draw(rng, -128, 127));
        const auto b_zero_point = static_cast<int32_t>(draw(rng, -128, 127));
        const auto zero_point = static_cast<int32_t>(draw(rng, -128, 127));
        const auto lo = static_cast<int32_t>(draw(rng, -128, 127));
        const auto hi = static_cast<int32_t>(draw(rng, lo, 127));
        const qtk::detail::Int8AddParams p = {a_zero_point, a_multiplier, b_zero_point,
                                              b_multiplier, shift,        zero_point,
                                              lo,           hi};
        // The 16-bit form's constants, derived here again from the header's comment (on
        // u = q + 128).
        const auto low_of = [](int64_t m) { return int64_t(int16_t(uint16_t(m & 0xFFFF))); };
        const auto high_of = [&](int64_t m) { return (m - low_of(m)) >> 16; };
        const int64_t ua_zero = a_zero_point + 128, ub_zero = b_zero_point + 128;
        const int64_t constant =
            (shift >= 17 ? int64_t{1} << (shift - 17) : 0) +
            zero_point * (shift >= 16 ? int64_t{1} << (shift - 16) : 0) -
            (ua_zero * high_of(a_multiplier) + ub_zero * high_of(b_multiplier));
        const bool pairs_fit = shift >= 17 && shift <= 46 && a_multiplier < kMax - 32767 &&
                               b_multiplier < kMax - 32767 &&
                               std::abs(constant) + (1 << 24) + (1 << 9) < (int64_t{1} << 31);
        add_wrong += p.pairs != pairs_fit;
        add_wrong += p.pairs && (p.pair_constant != constant ||
                                 p.pair_low_init != -(ua_zero * low_of(a_multiplier) +
                                                      ub_zero * low_of(b_multiplier)));
        const auto half = [](int32_t pair, int which) {
            return int32_t(int16_t(uint16_t(uint32_t(pair) >> (16 * which))));
        };
        const auto int32_range = [](int64_t v) { return v >= kMin && v <= kMax; };
        for (int a = -128; a <= 127; ++a) {
            for (int b = -128; b <= 127; ++b) {
                const int8_t want = qtk::arith::rescale_add(
                    int8_t(a), a_zero_point, a_multiplier, int8_t(b), b_zero_point, b_multiplier,
                    shift, zero_point, lo, hi);
                const int64_t da = a - a_zero_point, db = b - b_zero_point;
                const int64_t sum = da * a_multiplier + db * b_multiplier;
                add_wrong += clamp((sum + p.round) >> shift, p.lo_from_zero_point,
                                   p.hi_from_zero_point) + zero_point != want;
                if (!p.pairs) {
                    continue;
                }
                // As the vector code computes it, on u = q + 128, every step in int32.
                const int64_t ua = a + 128, ub = b + 128;
                const int64_t low = ua * half(p.low_pair, 0) + ub * half(p.low_pair, 1) +
                                    p.pair_low_init;
                const int64_t partial = (low >> 16) + p.pair_constant;
                const int64_t total =
                    partial + ua * half(p.high_pair, 0) + ub * half(p.high_pair, 1);
                add_wrong += !int32_range(low) || !int32_range(partial) || !int32_range(total);
                add_wrong += clamp(total >> p.pair_shift, lo, hi) != want;
            }
        }
    }
    // The per-channel high-half plan of the kernels that requantize in registers: each lane's
    // constants, used as the vector code uses them, and no plan where a shift leaves 33..54.
    for (int trial = 0; trial < 2000; ++trial) {
        const int64_t count = trial % 40 + 1;
        const auto lo = static_cast<int32_t>(draw(rng, -128, 127));
        const Int8Output out = {static_cast<int32_t>(draw(rng, -128, 127)), lo,
                                static_cast<int32_t>(draw(rng, lo, 127))};
        std::vector<int32_t> offset(static_cast<size_t>(count)), multiplier(offset), shift(offset);
        for (int64_t c = 0; c < count; ++c) {
            offset[size_t(c)] = static_cast<int32_t>(draw(rng, kMin, kMax));
            // half the trials signed, as a fused PReLU's negative side
            multiplier[size_t(c)] =
                static_cast<int32_t>(draw(rng, trial % 2 == 0 ? 0 : -kMax, kMax));
            shift[size_t(c)] =
                static_cast<int32_t>(rng.uniform(kHighHalfMinShift, kHighHalfMaxShift));
        }
        // A shift past 33..54 refuses the plan, but a zero multiplier's (any shift serves it).
        const bool outside = trial % 7 == 3;
        if (outside) {
            const size_t c = size_t(rng.uniform(0, count - 1));
            shift[c] = trial % 2 == 0 ? 32 : 55;
            multiplier[c] = multiplier[c] == 0 ? 1 : multiplier[c];
        }
        if (trial % 5 == 1 && !outside) {
            const size_t c = size_t(rng.uniform(0, count - 1));
            multiplier[c] = 0;
            shift[c] = trial % 2 == 0 ? 1 : 62;
        }
        std::vector<qtk::detail::Int8HighHalfBlock> blocks(size_t((count + 15) / 16));
        const bool built = qtk::detail::int8_high_half_blocks(
            offset.data(), multiplier.data(), shift.data(), count, out, blocks.data());
        requantize_wrong += built == outside;
        for (int64_t c = 0; c < count && built; ++c) {
            const qtk::detail::Int8HighHalfBlock& b = blocks[size_t(c / 16)];
            const int64_t i = c % 16;
            const int32_t m = i % 2 == 0 ? b.multiplier[i] : b.multiplier_odd[i - 1];
            const auto total = static_cast<int32_t>(draw(rng, kMin, kMax));  // acc + offset
            const int64_t sum = (int64_t{total} * m >> 32) + b.round[i];
            requantize_wrong += m != multiplier[size_t(c)] || b.offset[i] != offset[size_t(c)];
            requantize_wrong +=
                clamp(sum >> b.shift[i], out.lo, out.hi) !=
                qtk::arith::requantize(total, multiplier[size_t(c)], shift[size_t(c)],
                                       out.zero_point, out.lo, out.hi);
        }
    }
    CHECK_EQ(requantize_wrong, 0);
    CHECK_EQ(add_wrong, 0);
    CHECK_EQ(quantize_wrong, 0);
}

// Each requantization epilogue this CPU runs, both forms, against arith::requantize on the sum
// acc + offset: counts around the vector widths and the 64-value chunks, in rows of any width
// and stride, every argument at its extremes (acc at the int32 limits, M = 0 and 2^31 - 1,
// shifts 1 to 62, either side of the high-half form's 33 and 54, clamps down to one value) and at
// random.
void test_requantize() {
    using qtk::detail::Int8Output;
    using qtk::detail::Int8RequantizeUkernel;
    struct Entry {
        const char* name;
        IsaLevel isa;
        const Int8RequantizeUkernel* ukernel;
    };
    const Entry entries[] = {
#if QTK_X86_AVX2
        {"requantize_avx2", IsaLevel::kAvx2, &qtk::detail::kInt8RequantizeAvx2},
#endif
#if QTK_X86_AVX512_VNNI
        {"requantize_avx512", IsaLevel::kAvx512Vnni, &qtk::detail::kInt8RequantizeAvx512},
#endif
#if QTK_ARM_NEON
        {"requantize_neon", IsaLevel::kNeon, &qtk::detail::kInt8RequantizeNeon},
#endif
    };
    constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    const int32_t shifts[] = {1, 2, 30, 31, 32, 33, 34, 54, 55, 62};  // 33-54: high-half form
    Rng rng(11);
    for (const Entry& e : entries) {
        if (!cpu_supports(e.isa)) {
            std::printf("epilogue %s: skipped, this CPU lacks %s\n", e.name, isa_name(e.isa));
            continue;
        }
        for (int trial = 0; trial < 4000; ++trial) {
            const size_t count = size_t(trial % 140 + 1);  // up to two 64-value chunks and a tail
            const int32_t zero_point = static_cast<int32_t>(draw(rng, -128, 127));
            const int32_t lo = static_cast<int32_t>(draw(rng, -128, 127));
            const Int8Output out = {zero_point, lo, static_cast<int32_t>(draw(rng, lo, 127))};
            // Per value; the one-channel form takes those of value 0.
            std::vector<int32_t> acc(count), offset(count), multiplier(count), shift(count);
            // Spec 22's negative side (a fused PReLU's): signed multipliers, any shift.
            std::vector<int32_t> negative_multiplier(count), negative_shift(count);
            std::vector<int32_t> total(count);  // acc + offset: the accumulator of spec 4
            for (size_t i = 0; i < count; ++i) {
                offset[i] = static_cast<int32_t>(draw(rng, kMin, kMax));
                multiplier[i] = static_cast<int32_t>(draw(rng, 0, kMax));
                // A quarter of the trials all in the high-half form (64 channels a step there).
                shift[i] = trial % 4 == 1           ? static_cast<int32_t>(rng.uniform(33, 54))
                           : rng.uniform(0, 1) == 0 ? shifts[rng.uniform(0, 9)]
                                                    : static_cast<int32_t>(rng.uniform(1, 62));
                negative_multiplier[i] = static_cast<int32_t>(draw(rng, -kMax, kMax));
                negative_shift[i] = rng.uniform(0, 1) == 0
                                        ? shifts[rng.uniform(0, 9)]
                                        : static_cast<int32_t>(rng.uniform(1, 62));
            }
            // As rows of `width` values (a channel's row of pixels, or a pixel's channels in the
            // per-channel form), `gap` values apart: counts past one row come in rows, which each
            // start the vector lanes anew; the rest of the values are one more row.
            const int64_t width = trial % 3 == 0 ? int64_t(count) : trial % 13 + 1;
            const int64_t rows = int64_t(count) / width, gap = trial % 5, done = rows * width;
            for (int form = 0; form < 4; ++form) {
                // The one-channel and per-channel forms, each plain and by sign (where the ISA has
                // them).
                const bool per_channel = form % 2 == 1, by_sign = form >= 2;
                if (by_sign && (per_channel ? e.ukernel->channels_by_sign == nullptr
                                            : e.ukernel->channel_by_sign == nullptr)) {
                    continue;
                }
                const auto channel_of = [&](size_t i) {
                    return !per_channel ? 0 : int64_t(i) < done ? i % size_t(width) : i - done;
                };
                std::vector<int8_t> want(count), got(count + 1, 0x55);
                for (size_t i = 0; i < count; ++i) {
                    const size_t c = channel_of(i);
                    // acc + offset in int32, as the contract requires.
                    total[i] = static_cast<int32_t>(
                        draw(rng, kMin + std::max<int64_t>(offset[c], 0),
                             kMax + std::min<int64_t>(offset[c], 0)));
                    acc[i] = static_cast<int32_t>(int64_t{total[i]} - offset[c]);
                    want[i] = by_sign ? qtk::arith::requantize_by_sign(
                                            total[i], multiplier[c], shift[c],
                                            negative_multiplier[c], negative_shift[c],
                                            out.zero_point, out.lo, out.hi)
                                      : qtk::arith::requantize(total[i], multiplier[c], shift[c],
                                                               out.zero_point, out.lo, out.hi);
                }
                std::vector<int32_t> strided(size_t(rows * (width + gap)), 0x7EADBEEF);
                for (int64_t i = 0; i < done; ++i) {
                    strided[size_t(i / width * (width + gap) + i % width)] = acc[size_t(i)];
                }
                // rows of `n` values `stride` apart from `from`, into y (y_stride apart).
                const auto run = [&](const int32_t* from, int64_t stride, int64_t row_count,
                                     int64_t n, int8_t* y, int64_t y_stride) {
                    const Int8RequantizeUkernel& u = *e.ukernel;
                    if (per_channel && by_sign) {
                        u.channels_by_sign(from, stride, row_count, n, offset.data(),
                                           multiplier.data(), shift.data(),
                                           negative_multiplier.data(), negative_shift.data(), out,
                                           y, y_stride);
                    } else if (per_channel) {
                        u.channels(from, stride, row_count, n, offset.data(), multiplier.data(),
                                   shift.data(), out, y, y_stride);
                    } else if (by_sign) {
                        u.channel_by_sign(from, stride, row_count, n, offset[0], multiplier[0],
                                          shift[0], negative_multiplier[0], negative_shift[0],
                                          out, y);
                    } else {
                        u.channel(from, stride, row_count, n, offset[0], multiplier[0], shift[0],
                                  out, y);
                    }
                };
                // (with no rows, width may pass the count per-channel values)
                if (rows > 0) {
                    run(strided.data(), width + gap, rows, width, got.data(), width);
                }
                if (done < int64_t(count)) {
                    run(acc.data() + done, 0, 1, int64_t(count) - done, got.data() + done, 0);
                }
                for (size_t i = 0; i < count; ++i) {
                    const size_t c = channel_of(i);
                    if (got[i] != want[i]) {
                        qtk_test::report_failure(
                            __FILE__, __LINE__,
                            std::string(e.name) + (per_channel ? " channels" : " channel") +
                                (by_sign ? " by sign" : "") + ": acc " +
                                std::to_string(total[i]) + " M " +
                                std::to_string(multiplier[c]) + " n " + std::to_string(shift[c]) +
                                (by_sign ? " (negative M " +
                                               std::to_string(negative_multiplier[c]) + " n " +
                                               std::to_string(negative_shift[c]) + ")"
                                         : "") +
                                " z " + std::to_string(out.zero_point) + " [" +
                                std::to_string(out.lo) + ", " + std::to_string(out.hi) +
                                "] gives " + std::to_string(got[i]) + ", expected " +
                                std::to_string(want[i]));
                    }
                }
                CHECK(got[count] == 0x55);  // nothing written past count
            }
        }
        std::printf("epilogue %s: checked\n", e.name);
    }
}
#endif

enum class Fill { kRandom, kLowest, kHighest };  // activations all -128 / all 127, weights +-127
// Winograd's largest sums (docs/winograd.md), with an extreme fill: the input zero point at the
// other end, weights all 127 or all -127 (|U'| up to 1143); every |x - z| 255, or 254 and 255 at
// random so that sums past 2^24 would be odd and lose their last bit in float.
enum class WinogradWorst { kNo, kAll255, kMixed };

struct ConvCase : qtk_test::ConvGeometry {
    Fill fill = Fill::kRandom;
    WinogradWorst winograd_worst = WinogradWorst::kNo;

    bool valid() const { return window_fits(); }
    std::string describe() const {
        return ConvGeometry::describe() +
               (fill == Fill::kRandom   ? ""
                : fill == Fill::kLowest ? " all -128"
                                        : " all 127") +
               (winograd_worst == WinogradWorst::kNo       ? ""
                : winograd_worst == WinogradWorst::kAll255 ? " winograd worst"
                                                           : " winograd worst, odd");
    }
};

struct BuiltCase {
    std::vector<uint8_t> bytes;
    std::vector<int8_t> x;  // batch 3
    Shape x_shape;          // batch 3
    std::vector<int8_t> residual;  // batch 3, where an add follows the conv
    Shape residual_shape;
    bool fused_prelu = false;
};

// A fused PReLU's (spec 22) signed multipliers of the sums below zero: slopes of either sign, 0
// and above 1 over the channels, times the channel's positive multiplier.
std::vector<AttrSpec> negative_side_attrs(size_t channels, double positive) {
    const double slopes[] = {0.25, -0.5, 0.0, 1.5, 0.1, -2.0, 0.75};
    std::vector<int64_t> mults, shifts;
    for (size_t c = 0; c < channels; ++c) {
        const double slope = slopes[c % 7];
        const qtk_test::Requant r = slope == 0.0
                                        ? qtk_test::Requant{0, 1}
                                        : qtk_test::quantize_multiplier(std::abs(slope) * positive);
        mults.push_back(slope < 0 ? -int64_t{r.multiplier} : int64_t{r.multiplier});
        shifts.push_back(r.shift);
    }
    return {AttrSpec("negative_multiplier", mults), AttrSpec("negative_shift", shifts)};
}

// One conv2d node with random zero points, per-channel requantization aimed at the accumulator's
// typical size (so outputs spread over the int8 range), and sometimes a ReLU clamp or a fused
// PReLU. Extreme cases
// take extreme weights and the largest bias the accumulator check allows. A third of the cases add
// a second input to the conv's output (an add the graph pass fuses into the conv's epilogue), with
// the operands in either order.
BuiltCase build(const ConvCase& cc, uint64_t seed) {
    Rng rng(seed);
    const int64_t per_group = cc.in / cc.groups;
    const int64_t k_count = per_group * cc.kh * cc.kw;
    const size_t weight_count = size_t(cc.out * k_count);
    std::vector<int8_t> weights = qtk_test::random_weights(rng, weight_count);
    std::vector<int32_t> bias = qtk_test::random_bias(rng, size_t(cc.out));
    double typical = std::sqrt(double(k_count)) * 75 * 73;
    if (cc.fill != Fill::kRandom) {
        const int64_t largest_bias = (int64_t{1} << 31) - 1 - k_count * 255 * 127;
        for (size_t i = 0; i < weights.size(); ++i) {
            weights[i] = static_cast<int8_t>(rng.uniform(0, 3) == 0 ? -127 : 127);
        }
        for (int32_t& v : bias) {
            v = static_cast<int32_t>(rng.uniform(0, 1) == 0 ? -largest_bias : largest_bias);
        }
        typical = double(int64_t{1} << 31);
    }
    int32_t zx = static_cast<int32_t>(rng.uniform(-128, 127));
    if (cc.winograd_worst != WinogradWorst::kNo) {
        zx = cc.fill == Fill::kLowest ? 127 : -128;
        std::fill(weights.begin(), weights.end(), rng.uniform(0, 1) == 0 ? -127 : 127);
    }
    const int32_t zy = static_cast<int32_t>(rng.uniform(-128, 127));
    const bool relu = rng.uniform(0, 2) == 0;
    const bool prelu = !relu && rng.uniform(0, 1) == 0;

    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, cc.in, cc.height, cc.width}, 0.05f, zx);
    const uint32_t w = b.weight("conv.weight", {cc.out, per_group, cc.kh, cc.kw}, weights);
    const uint32_t bi = b.bias("conv.bias", {cc.out}, bias);
    const uint32_t y = b.activation("y", {1, cc.out, cc.out_h(), cc.out_w()}, 0.1f, zy);
    std::vector<AttrSpec> attrs =
        qtk_test::requant_attrs(size_t(cc.out), 1.0, 90.0 / typical, 1.0, relu ? zy : -128, 127);
    attrs.insert(attrs.begin(),
                 {AttrSpec("stride", {cc.sh, cc.sw}), AttrSpec("padding", {cc.ph, cc.pw}),
                  AttrSpec("dilation", {cc.dh, cc.dw}), AttrSpec("groups", {cc.groups})});
    if (prelu) {
        for (const AttrSpec& a : negative_side_attrs(size_t(cc.out), 90.0 / typical)) {
            attrs.push_back(a);
        }
    }
    b.node("conv2d", "conv", {x, w, bi}, {y}, attrs);
    b.inputs = {x};
    b.outputs = {y};
    const Shape y_shape = {3, cc.out, cc.out_h(), cc.out_w()};
    const bool residual = rng.uniform(0, 2) == 0;
    if (residual) {
        const uint32_t r = b.activation("r", {1, cc.out, cc.out_h(), cc.out_w()}, 0.07f,
                                        static_cast<int32_t>(rng.uniform(-128, 127)));
        const int32_t zs = static_cast<int32_t>(rng.uniform(-128, 127));
        const uint32_t sum = b.activation("sum", {1, cc.out, cc.out_h(), cc.out_w()}, 0.13f, zs);
        const auto add = qtk_test::rescale_multipliers({0.1, 0.07}, 0.13);
        const bool conv_first = rng.uniform(0, 1) == 0;
        b.node("add", "add", conv_first ? std::vector<uint32_t>{y, r} : std::vector<uint32_t>{r, y},
               {sum},
               {AttrSpec("multiplier", conv_first ? add.first
                                                  : std::vector<int64_t>{add.first[1],
                                                                         add.first[0]}),
                AttrSpec("shift", {add.second}), AttrSpec("clamp", {relu ? zs : -128, 127})});
        b.inputs = {x, r};
        b.outputs = {sum};
    }

    BuiltCase built{b.build(), {}, {3, cc.in, cc.height, cc.width}, {}, y_shape, prelu};
    if (residual) {
        built.residual = rng.int8s(size_t(3 * cc.out * cc.out_h() * cc.out_w()));
    }
    const size_t x_count = size_t(3 * cc.in * cc.height * cc.width);
    built.x = cc.fill == Fill::kRandom   ? rng.int8s(x_count)
              : cc.fill == Fill::kLowest ? std::vector<int8_t>(x_count, -128)
                                         : std::vector<int8_t>(x_count, 127);
    if (cc.winograd_worst == WinogradWorst::kMixed) {
        for (int8_t& v : built.x) {  // one step towards the zero point, half the time
            v = static_cast<int8_t>(v + (rng.uniform(0, 1) == 0 ? 0 : v < 0 ? 1 : -1));
        }
    }
    return built;
}

// Loads the model under QTK_CONV_ALGO=algo and runs `batch` samples of the case's input;
// `optimize_graph` false keeps a following add a node of its own.
std::vector<int8_t> run(const BuiltCase& c, const char* algo, int threads, int64_t batch,
                        bool optimize_graph = true) {
    set_env("QTK_CONV_ALGO", algo);
    qtk::LoadOptions options;
    options.optimize_graph = optimize_graph;
    const auto model = qtk::Model::from_bytes(c.bytes.data(), c.bytes.size(), options);
    const std::vector<std::string> used = model->algorithms();
    // A pin must take effect (a channels-last one through the layout pass).
    if (algo != nullptr && std::find(used.begin(), used.end(), algo) == used.end()) {
        qtk_test::report_failure(__FILE__, __LINE__,
                                 std::string(algo) + " was pinned but not used");
    }
    qtk::Session session(model, {threads});
    Shape shape = c.x_shape, residual_shape = c.residual_shape;
    shape[0] = residual_shape[0] = batch;
    if (c.residual.empty()) {
        return session.run({c.x.data()}, {shape})[0].data;
    }
    return session.run({c.x.data(), c.residual.data()}, {shape, residual_shape})[0].data;
}

// The algorithms other than the reference that this CPU runs.
std::vector<const Conv2dAlgo*> fast_algos() {
    return qtk_test::runnable_conv2d_algos(qtk::DType::kInt8, &qtk::detail::kConv2dInt8Reference);
}

int g_cases = 0;
std::map<std::string, int> g_algo_cases;  // cases each fast algorithm was checked on

// Each fast algorithm that fits, 1 and 2 threads, batch 3 and 1, against the reference's batch-3
// bytes.
void check_case(const ConvCase& cc, const std::vector<const Conv2dAlgo*>& algos) {
    if (!cc.valid()) {
        return;
    }
    ++g_cases;
    const BuiltCase c = build(cc, 1000 + uint64_t(g_cases));
    const std::vector<int8_t> want = run(c, "conv2d_int8_reference", 1, 3);
    const std::vector<int8_t> want_first(want.begin(), want.begin() + want.size() / 3);
    if (!c.residual.empty() && run(c, "conv2d_int8_reference", 1, 3, false) != want) {
        qtk_test::report_failure(__FILE__, __LINE__,
                                 "the reference with its add fused differs from conv then add "
                                 "on " + cc.describe());
    }
    qtk::detail::Conv2dParams params = cc.params();
    params.fused_prelu = c.fused_prelu;
    for (const Conv2dAlgo* algo : algos) {
        if (!algo->fits(params)) {
            continue;
        }
        ++g_algo_cases[algo->name];
        for (int threads : {1, 2}) {
            for (int64_t batch : {3, 1}) {
                if (run(c, algo->name, threads, batch) != (batch == 3 ? want : want_first)) {
                    qtk_test::report_failure(__FILE__, __LINE__,
                                             std::string(algo->name) + " differs from the " +
                                                 "reference on " + cc.describe() + ", threads " +
                                                 std::to_string(threads) + ", batch " +
                                                 std::to_string(batch));
                }
            }
        }
    }
}

void test_against_reference() {
    const std::vector<const Conv2dAlgo*> algos = fast_algos();
    const int64_t channels[] = {1, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64, 65};

    // Channel counts either side of the tile widths (mr 2/4/8, quads of 4 k).
    for (int64_t in : channels) {
        for (int64_t out : channels) {
            ConvCase cc;
            cc.in = in;
            cc.out = out;
            check_case(cc, algos);
        }
    }

    // Geometry: kernel x stride x padding x dilation x groups x spatial size.
    const int64_t kernels[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 3}};
    const int64_t sizes[][2] = {{1, 1}, {5, 7}, {13, 11}};
    for (const auto& k : kernels) {
        for (int64_t stride : {1, 2}) {
            for (int64_t pad : {0, 1, 2}) {
                for (int64_t dilation : {1, 2}) {
                    for (int groups_kind = 0; groups_kind < 5; ++groups_kind) {
                        for (const auto& size : sizes) {
                            ConvCase cc;
                            cc.kh = k[0];
                            cc.kw = k[1];
                            cc.sh = cc.sw = stride;
                            cc.ph = cc.pw = pad;
                            cc.dh = cc.dw = dilation;
                            cc.height = size[0];
                            cc.width = size[1];
                            // groups 1, 2, depthwise, depthwise with channel multiplier 2, and
                            // 2 of 65 channels (AMX's direct conv wants 64 or more)
                            const int64_t in[] = {5, 6, 8, 3, 130}, out[] = {7, 10, 8, 6, 70},
                                          groups[] = {1, 2, 8, 3, 2};
                            cc.in = in[groups_kind];
                            cc.out = out[groups_kind];
                            cc.groups = groups[groups_kind];
                            check_case(cc, algos);
                        }
                    }
                }
            }
        }
    }

    // Pixel counts either side of nr (16, 32) and planes cut into several blocks (large K).
    for (const auto& hw : {std::pair<int64_t, int64_t>{4, 4}, {4, 8}, {3, 11}, {5, 13}, {2, 17}}) {
        for (int64_t kernel : {1, 3}) {
            ConvCase cc;
            cc.height = hw.first;
            cc.width = hw.second;
            cc.kh = cc.kw = kernel;
            cc.ph = cc.pw = kernel / 2;
            cc.in = 9;
            cc.out = 17;
            check_case(cc, algos);
        }
    }
    // Stride 2 over output rows of 16 and more pixels (im2col takes 16 at a time from the padded
    // plane, the last reading one byte past the last tap): kernel 3, 7 (resnet's stem), dilated.
    for (const auto& k : {std::array<int64_t, 4>{3, 1, 1, 75}, {7, 3, 1, 70}, {3, 2, 2, 66},
                          {1, 0, 1, 64}}) {
        ConvCase cc;
        cc.kh = cc.kw = k[0];
        cc.ph = cc.pw = k[1];
        cc.dh = cc.dw = k[2];
        cc.sh = cc.sw = 2;
        cc.height = 9;
        cc.width = k[3];
        cc.in = 5;
        cc.out = 9;
        check_case(cc, algos);
    }
    // The direct conv's edges, kernel 3: output widths 1 to 35 and around 48 and 64 (its tiles of
    // nr 16 and 32 run over a grid one phase plane wide, so junk columns and the tile tails move
    // with the width), stride 1 and 2, padding 0 to 2, 1 to 5 output rows, channel counts around
    // the quads of 4 and the tiles of mr 2, 4, 8, groups 2, dilation 2 and extreme values
    // now and then.
    {
        const int64_t in_channels[] = {1, 3, 4, 5, 7, 9, 17};
        const int64_t out_channels[] = {1, 2, 7, 8, 9, 17, 33};
        std::vector<int64_t> out_widths;
        for (int64_t w = 1; w <= 35; ++w) {
            out_widths.push_back(w);
        }
        for (int64_t w : {47, 48, 49, 63, 64, 65}) {
            out_widths.push_back(w);
        }
        int index = 0;
        for (int64_t stride : {1, 2}) {
            for (int64_t pad : {0, 1, 2}) {
                for (int64_t out_w : out_widths) {
                    ConvCase cc;
                    cc.sh = cc.sw = stride;
                    cc.ph = cc.pw = pad;
                    cc.dh = cc.dw = index % 7 == 3 ? 2 : 1;
                    const int64_t out_h = 1 + index % 5;
                    cc.width = (out_w - 1) * stride + cc.dw * 2 + 1 - 2 * pad;
                    cc.height = (out_h - 1) * stride + cc.dh * 2 + 1 - 2 * pad + index % 2;
                    cc.in = in_channels[index % 7];
                    cc.out = out_channels[index * 3 % 7];
                    if (index % 6 == 5) {
                        cc.groups = 2;
                        cc.in *= 2;
                        cc.out *= 2;
                    }
                    cc.fill = index % 9 == 4 ? Fill::kLowest
                              : index % 9 == 8 ? Fill::kHighest
                                               : Fill::kRandom;
                    if (cc.width >= 1 && cc.height >= 1) {
                        check_case(cc, algos);
                    }
                    ++index;
                }
            }
        }
    }
    // resnet's 3x3 layers, smaller: several blocks per plane, several tiles of every width.
    for (int64_t stride : {1, 2}) {
        ConvCase cc;
        cc.in = 64;
        cc.out = 40;
        cc.sh = cc.sw = stride;
        cc.height = cc.width = 28;
        check_case(cc, algos);
    }
    ConvCase multi_block_3x3;  // K 576: 448 pixels per block at nr 32
    multi_block_3x3.in = 64;
    multi_block_3x3.out = 9;
    multi_block_3x3.height = multi_block_3x3.width = 23;
    check_case(multi_block_3x3, algos);
    // The channels-last implicit GEMM's padded planes (one per kernel column and row phase; groups
    // 1): every kernel, stride (some unequal), padding (some unequal) and dilation, over outputs
    // whose pixel counts fall either side of its tiles (AMX 32 pixels, VNNI 12 and the smaller
    // tail kernels), channel counts either side of AMX's 64-deep K blocks and the 32-wide channel
    // tiles.
    {
        const int64_t kernels_nhwc[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 3}, {7, 7}};
        const int64_t sizes_nhwc[][2] = {{5, 7}, {9, 13}, {14, 14}, {3, 31}};
        const int64_t in_nhwc[] = {33, 64, 65, 130}, out_nhwc[] = {17, 32, 33, 70};
        int index = 0;
        for (const auto& k : kernels_nhwc) {
            for (int64_t stride : {1, 2}) {
                for (int64_t pad : {0, 1, 2}) {
                    for (int64_t dilation : {1, 2}) {
                        ConvCase cc;
                        cc.kh = k[0];
                        cc.kw = k[1];
                        cc.sh = stride;
                        cc.sw = index % 5 == 2 ? 3 - stride : stride;
                        cc.ph = pad;
                        cc.pw = index % 7 == 3 ? (pad + 1) % 3 : pad;
                        cc.dh = cc.dw = dilation;
                        cc.height = sizes_nhwc[index % 4][0];
                        cc.width = sizes_nhwc[index % 4][1];
                        cc.in = in_nhwc[index % 4];
                        cc.out = out_nhwc[index / 4 % 4];
                        cc.fill = index % 9 == 4 ? Fill::kLowest
                                  : index % 9 == 8 ? Fill::kHighest
                                                   : Fill::kRandom;
                        check_case(cc, algos);
                        ++index;
                    }
                }
            }
        }
    }
    // The channels-last GEMM's window form (few input channels: a window's bytes one run of K,
    // each tile's kernel rows gathered pixel by pixel): resnet's 7x7 stem over 3 channels,
    // mobilenet's 3x3 one and their kin, 16, 32 and 64 bytes of a kernel row in the gather's
    // tables (5 to 8 rows, 3 or 4, 2), strides 1 and 2 (some unequal), padding 0 to 3 (some
    // unequal), output widths either side of the 12-pixel tiles and one gather chunk, output
    // channels either side of the 32-wide tiles.
    {
        const int64_t kernels_window[][3] = {{7, 7, 3}, {7, 7, 2}, {8, 5, 2}, {7, 5, 3},
                                             {6, 6, 3}, {6, 7, 2}, {5, 5, 2}, {3, 3, 3},
                                             {3, 3, 2}, {4, 3, 3}, {2, 7, 3}, {2, 3, 3}};
        const int64_t out_widths[] = {1, 11, 12, 13, 25, 56};
        const int64_t outs[] = {17, 32, 33, 64, 70};
        int index = 0;
        for (const auto& k : kernels_window) {
            for (int64_t stride : {1, 2}) {
                for (int64_t pad : {0, 1, 3}) {
                    ConvCase cc;
                    cc.kh = k[0];
                    cc.kw = k[1];
                    cc.in = k[2];
                    // Below K 64 the window form takes only layers where it pads less than the
                    // direct conv (fits_dense_windows): 32 or 64 channels there, so that every
                    // stride and padding reaches the gather.
                    const bool short_k = k[0] * k[1] * k[2] < 64;
                    cc.out = short_k ? 32 * (1 + index % 2) : outs[index % 5];
                    cc.sh = stride;
                    cc.sw = index % 4 == 3 ? 3 - stride : stride;
                    cc.ph = pad;
                    cc.pw = index % 5 == 2 ? (pad + 1) % 4 : pad;
                    const int64_t out_w = out_widths[index % 6], out_h = 1 + index % 4;
                    cc.width = std::max<int64_t>(1, (out_w - 1) * cc.sw + cc.kw - 2 * cc.pw);
                    cc.height = std::max<int64_t>(1, (out_h - 1) * cc.sh + cc.kh - 2 * cc.ph);
                    cc.fill = index % 9 == 4   ? Fill::kLowest
                              : index % 9 == 8 ? Fill::kHighest
                                               : Fill::kRandom;
                    check_case(cc, algos);
                    ++index;
                }
            }
        }
        // A slot per output pixel (stride_w >= kernel_w, the padded width a multiple of it),
        // where other forms' tiles run on across rows.
        ConvCase across;
        across.kh = 8;
        across.kw = across.sw = 3;
        across.in = 3;
        across.out = 40;
        across.ph = across.pw = 0;
        across.width = 39;
        across.height = 10;
        check_case(across, algos);
    }
    // 1x1: channel counts either side of the channels-last GEMM's 64-deep K blocks and 32-wide
    // channel tiles, pixel counts either side of its 32-pixel tiles (read in place, the plane's
    // last tile is copied where the K block would read past the plane).
    int pointwise_index = 0;
    for (int64_t in : {1, 3, 4, 16, 31, 63, 64, 65, 130}) {
        for (int64_t out : {1, 16, 31, 32, 33, 65}) {
            const int64_t sizes_1x1[][2] = {{1, 1}, {4, 8}, {5, 7}, {6, 11}, {9, 9}};
            ConvCase cc;
            cc.kh = cc.kw = 1;
            cc.ph = cc.pw = 0;
            cc.in = in;
            cc.out = out;
            const int i = pointwise_index++;
            cc.height = sizes_1x1[i % 5][0];
            cc.width = sizes_1x1[i % 5][1];
            cc.fill = i % 11 == 5 ? Fill::kLowest : i % 11 == 10 ? Fill::kHighest : Fill::kRandom;
            check_case(cc, algos);
        }
    }
    // The channels-last 24x16 tile (16 output channels or fewer): channel counts up to 16, K
    // either side of whole quads and of 16-quad blocks, pixel counts either side of 24 and 48
    // (last tiles of 1 to 23 pixels), 1x1 and 3x3 (padded: per-column planes, and at width 49
    // tiles by output row).
    int narrow_index = 0;
    for (int64_t kernel : {1, 3}) {
        for (int64_t in : {3, 13, 16, 31, 33, 65}) {
            for (int64_t out : {1, 7, 15, 16}) {
                const int64_t sizes_narrow[][2] = {{1, 23}, {5, 5}, {7, 7}, {1, 49}, {3, 17}};
                ConvCase cc;
                cc.kh = cc.kw = kernel;
                cc.ph = cc.pw = kernel / 2;
                cc.in = in;
                cc.out = out;
                const int i = narrow_index++;
                cc.height = sizes_narrow[i % 5][0];
                cc.width = sizes_narrow[i % 5][1];
                cc.fill = i % 11 == 5    ? Fill::kLowest
                          : i % 11 == 10 ? Fill::kHighest
                                         : Fill::kRandom;
                check_case(cc, algos);
            }
        }
    }
    ConvCase multi_block_1x1;  // K 1024 pointwise: 256 pixels per block at nr 32
    multi_block_1x1.in = 1024;
    multi_block_1x1.out = 9;
    multi_block_1x1.height = multi_block_1x1.width = 20;
    multi_block_1x1.kh = multi_block_1x1.kw = 1;
    multi_block_1x1.ph = multi_block_1x1.pw = 0;
    check_case(multi_block_1x1, algos);

    // Extremes: activations at -128 or 127 (zero points random), weights at +-127, bias at the
    // accumulator bound; K up to 54000, near the int32 limit K * 255 * 127 < 2^31.
    for (Fill fill : {Fill::kLowest, Fill::kHighest}) {
        for (int64_t in : {5, 64, 6000}) {
            ConvCase cc;
            cc.in = in;
            cc.out = 3;
            cc.height = in == 6000 ? 3 : 6;
            cc.width = in == 6000 ? 3 : 5;
            cc.fill = fill;
            check_case(cc, algos);
        }
    }

    // Depthwise (channel multiplier 1): kernel 3 and 5, stride 1 and 2, padding 0 to 2 (some
    // unequal), output widths either side of the vector widths (8, 16) and of 32 and 64, channel
    // counts odd and even up to 65, a quarter each all -128 and all 127.
    const Fill dw_fills[] = {Fill::kRandom, Fill::kRandom, Fill::kLowest, Fill::kHighest};
    // Every kernel, stride and padding over `widths`: case i takes channels[i % size], fill
    // dw_fills[i % 4], height kernel - 2 pad + i % height_steps, and where i % pw_every is pw_at
    // a column padding one more (mod 3) than its row padding.
    const auto sweep_depthwise = [&](const std::vector<int64_t>& channels,
                                     const std::vector<int64_t>& widths, int pw_every, int pw_at,
                                     int height_steps) {
        int index = 0;
        for (int64_t kernel : {3, 5}) {
            for (int64_t stride : {1, 2}) {
                for (int64_t pad : {0, 1, 2}) {
                    for (int64_t width : widths) {
                        ConvCase cc;
                        cc.kh = cc.kw = kernel;
                        cc.sh = cc.sw = stride;
                        cc.ph = pad;
                        cc.pw = index % pw_every == pw_at ? (pad + 1) % 3 : pad;
                        cc.width = width;
                        cc.height = std::max<int64_t>(1, kernel - 2 * pad + index % height_steps);
                        cc.in = cc.out = cc.groups = channels[size_t(index) % channels.size()];
                        cc.fill = dw_fills[index % 4];
                        check_case(cc, algos);
                        ++index;
                    }
                }
            }
        }
    };
    sweep_depthwise({1, 2, 3, 5, 8, 16, 17, 32, 33, 64, 65},
                    {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65}, 5, 4, 4);
    // Around the channel blocks of the channel-vectorized depthwise kernels (8 channels per vector
    // at AVX2, 64 or 32 of a pair per block at AVX-512, the last block partial): tiny planes, a
    // plane of several bands and two row groups (95x93 at stride 1; several NCHW bands of the c64
    // kernel too) and rows wider than a band (3x300; 5x2100, one row a band of the by-rows
    // kernel), every kernel, stride and padding.
    const int64_t block_channels[] = {1, 15, 16, 17, 33};
    const int64_t block_sizes[][2] = {{1, 1}, {2, 3}, {7, 7}, {95, 93}, {3, 300}, {5, 2100}};
    int index = 0;
    for (int64_t kernel : {3, 5}) {
        for (int64_t stride : {1, 2}) {
            for (int64_t pad : {0, 1, 2}) {
                for (const auto& size : block_sizes) {
                    const bool large = size[0] * size[1] > 100;
                    for (int64_t channels : block_channels) {
                        if (large && channels != block_channels[index % 5]) {
                            continue;  // one channel count per large plane
                        }
                        ConvCase cc;
                        cc.kh = cc.kw = kernel;
                        cc.sh = cc.sw = stride;
                        cc.ph = cc.pw = pad;
                        cc.height = size[0];
                        cc.width = size[1];
                        cc.in = cc.out = cc.groups = channels;
                        check_case(cc, algos);
                    }
                    ++index;
                }
            }
        }
    }
    // Around the channels-last kernel's tiles (conv2d_int8_depthwise_nhwc_c64_avx512_vnni): blocks
    // of 64 channels, a last block of 32 or fewer holding two pixels per vector; steps of 4 pixels
    // (or pairs), 16 steps per chunk of interleaved columns. Channel counts either side of 32, 64
    // and 128, output widths either side of 4, 8, 16 and 32 (and 64 pixels of pairs), every
    // kernel, stride and padding, a quarter each all -128 and all 127.
    sweep_depthwise({31, 32, 33, 63, 64, 65, 96, 127, 129, 144},
                    {1, 3, 4, 5, 8, 9, 15, 16, 17, 31, 32, 33, 34, 65, 66}, 7, 3, 3);
    // Whole planes of mobilenet's sizes: 57x57 and 56x56 (odd and even output widths).
    for (int64_t kernel : {3, 5}) {
        for (int64_t stride : {1, 2}) {
            ConvCase cc;
            cc.kh = cc.kw = kernel;
            cc.sh = cc.sw = stride;
            cc.ph = cc.pw = kernel / 2;
            cc.height = cc.width = 56 + stride % 2;
            cc.in = cc.out = cc.groups = 7;
            check_case(cc, algos);
        }
    }

    std::printf("%d conv cases checked against the reference:", g_cases);
    for (const auto& entry : g_algo_cases) {
        std::printf(" %s %d,", entry.first.c_str(), entry.second);
    }
    std::printf("\n");
}

#if QTK_X86_AVX2 || QTK_X86_AVX_VNNI || QTK_X86_AVX512_VNNI
// The Winograd chunk is the longest run of channels whose float partial sums stay within 2^24
// (docs/winograd.md), and the Winograd algorithms take channel counts up to the int32 bound only.
void test_winograd_bounds() {
    using qtk::detail::winograd_f2x3_chunk_channels;
    constexpr int64_t kExact = int64_t{1} << 24;
    for (int32_t z : {-128, -1, 0, 127}) {
        const int64_t max_v = 4 * std::max(128 + z, 127 - z);
        for (int64_t max_u : {1, 2, 127, 508, 1143}) {
            const int64_t chunk = winograd_f2x3_chunk_channels(max_u, z);
            CHECK(chunk * max_u * max_v <= kExact);
            CHECK((chunk + 1) * max_u * max_v > kExact);
        }
        CHECK(winograd_f2x3_chunk_channels(0, z) >= 1841);
    }
    CHECK(winograd_f2x3_chunk_channels(1143, -128) == 14);
    CHECK(winograd_f2x3_chunk_channels(1143, 127) == 14);
    CHECK(winograd_f2x3_chunk_channels(1143, 0) == 28);
    for (const Conv2dAlgo* algo : qtk::detail::conv2d_algos(qtk::DType::kInt8)) {
        if (std::string(algo->name).find("winograd") == std::string::npos) {
            continue;
        }
        // 4 * 9 C * 255 * 127 < 2^31 up to C = 1841.
        CHECK(algo->fits({8, 1841, 3, 3, 1, 1, 0, 0, 1, 1, 1}));
        CHECK(algo->fits({16, 1841, 3, 3, 1, 1, 2, 2, 1, 1, 2}));
        CHECK(!algo->fits({8, 1842, 3, 3, 1, 1, 1, 1, 1, 1, 1}));
        CHECK(!algo->fits({8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1}));
        CHECK(!algo->fits({8, 8, 3, 3, 1, 1, 1, 1, 2, 2, 1}));
        CHECK(!algo->fits({8, 8, 5, 5, 1, 1, 2, 2, 1, 1, 1}));
    }
}

// The Winograd micro-kernels on tiles transformed here, against the 2x2 outputs' sums of
// (x - z) w in int64, before any requantization (which could hide a lost last bit): random values
// and the largest sums (|x - z| 254 or 255, weights all 127 or all -127, so |U'| = 1143), channel
// counts around the float form's chunk of 14 and odd ones (the int16 form's padded channel pair).
// One channel more than the chunk must lose exactness on the largest float sums: the bound is
// tight and this check sees a lost bit.
void test_winograd_ukernels() {
    using qtk::detail::WinogradF2x3Int16Ukernel;
    using qtk::detail::WinogradF2x3Ukernel;
    // A micro-kernel of either form: run(u, v, channels, chunk, y) on U' and V given as
    // [16][channels][mr] and [16][channels][nr], packed here as the form reads them.
    struct Entry {
        IsaLevel isa;
        const char* form;
        int mr, nr;
        std::function<void(const std::vector<int32_t>&, const std::vector<int32_t>&, int64_t,
                           int64_t, int32_t*)>
            run;
    };
    std::vector<Entry> entries;
    const auto add_float = [&](IsaLevel isa, const WinogradF2x3Ukernel& k) {
        entries.push_back({isa, "float", k.mr, k.nr,
                           [&k](const std::vector<int32_t>& u, const std::vector<int32_t>& v,
                                int64_t channels, int64_t chunk, int32_t* y) {
                               const std::vector<float> fu(u.begin(), u.end());
                               const std::vector<float> fv(v.begin(), v.end());
                               k.run(fu.data(), fv.data(), channels, k.nr, chunk, y);
                           }});
    };
    const auto add_int16 = [&](IsaLevel isa, const WinogradF2x3Int16Ukernel& k) {
        entries.push_back(
            {isa, "int16", k.mr, k.nr,
             [&k](const std::vector<int32_t>& u, const std::vector<int32_t>& v, int64_t channels,
                  int64_t, int32_t* y) {
                 // [16][channels][n] -> [16][words][n][2], zeros in an odd count's last pair.
                 const int64_t words = (channels + 1) / 2;
                 const auto pairs = [&](const std::vector<int32_t>& a, int n) {
                     std::vector<int16_t> out(size_t(16 * words * n * 2), 0);
                     for (int e = 0; e < 16; ++e) {
                         for (int64_t c = 0; c < channels; ++c) {
                             for (int i = 0; i < n; ++i) {
                                 out[size_t(((e * words + c / 2) * n + i) * 2 + c % 2)] =
                                     int16_t(a[size_t((e * channels + c) * n + i)]);
                             }
                         }
                     }
                     return out;
                 };
                 const std::vector<int16_t> pu = pairs(u, k.mr), pv = pairs(v, k.nr);
                 k.run(pu.data(), pv.data(), words, k.nr, y);
             }});
    };
#if QTK_X86_AVX2
    add_int16(IsaLevel::kAvx2, qtk::detail::kWinogradF2x3Int16Avx2);
#endif
#if QTK_X86_AVX512_VNNI
    add_float(IsaLevel::kAvx512Vnni, qtk::detail::kWinogradF2x3Avx512);
#endif
    constexpr int kG[4][3] = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};
    constexpr int kBt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
    Rng rng(17);
    for (const Entry& e : entries) {
        if (!cpu_supports(e.isa)) {
            continue;
        }
        const bool is_float = std::string(e.form) == "float";
        const int mr = e.mr, nr = e.nr;
        for (int64_t channels : {1, 2, 13, 14, 15, 29, 200}) {
            for (bool worst : {false, true}) {
                const int32_t z = worst ? (rng.uniform(0, 1) == 0 ? -128 : 127)
                                        : static_cast<int32_t>(rng.uniform(-128, 127));
                const int8_t weight_sign = rng.uniform(0, 1) == 0 ? -1 : 1;
                std::vector<int32_t> g(size_t(mr * channels * 9)), d(size_t(channels * nr * 16));
                for (int32_t& w : g) {
                    w = worst ? 127 * weight_sign : static_cast<int32_t>(rng.uniform(-127, 127));
                }
                for (int32_t& v : d) {  // d = x - z of tile t, row i, column j at (c nr + t) 16
                    const int32_t x = worst ? (z < 0 ? 127 - rng.uniform(0, 1)
                                                     : -128 + rng.uniform(0, 1))
                                            : static_cast<int32_t>(rng.uniform(-128, 127));
                    v = x - z;
                }
                // U' = G' g G'^T as [16][channels][mr], V = B^T d B as [16][channels][nr].
                std::vector<int32_t> u(size_t(16 * channels * mr)), v(size_t(16 * channels * nr));
                int64_t max_abs_u = 0;
                for (int64_t c = 0; c < channels; ++c) {
                    for (int i = 0; i < 4; ++i) {
                        for (int j = 0; j < 4; ++j) {
                            for (int r = 0; r < mr; ++r) {
                                int32_t sum = 0;
                                for (int k = 0; k < 9; ++k) {
                                    sum += kG[i][k / 3] * kG[j][k % 3] *
                                           g[size_t((r * channels + c) * 9 + k)];
                                }
                                max_abs_u = std::max<int64_t>(max_abs_u, std::abs(sum));
                                u[size_t(((4 * i + j) * channels + c) * mr + r)] = sum;
                            }
                            for (int t = 0; t < nr; ++t) {
                                int32_t sum = 0;
                                for (int k = 0; k < 16; ++k) {
                                    sum += kBt[i][k / 4] * kBt[j][k % 4] *
                                           d[size_t((c * nr + t) * 16 + k)];
                                }
                                v[size_t(((4 * i + j) * channels + c) * nr + t)] = sum;
                            }
                        }
                    }
                }
                const int64_t chunk = qtk::detail::winograd_f2x3_chunk_channels(max_abs_u, z);
                const auto mismatches = [&](int64_t chunk_channels) {
                    std::vector<int32_t> y(size_t(mr * 4 * nr));
                    e.run(u, v, channels, chunk_channels, y.data());
                    int count = 0;
                    for (int r = 0; r < mr; ++r) {
                        for (int t = 0; t < nr; ++t) {
                            for (int p = 0; p < 4; ++p) {
                                const int oy = p / 2, ox = p % 2;
                                int64_t want = 0;
                                for (int64_t c = 0; c < channels; ++c) {
                                    for (int k = 0; k < 9; ++k) {
                                        want += int64_t{d[size_t((c * nr + t) * 16 +
                                                                 (oy + k / 3) * 4 + ox + k % 3)]} *
                                                g[size_t((r * channels + c) * 9 + k)];
                                    }
                                }
                                count += y[size_t((2 * r + oy) * 2 * nr + 2 * t + ox)] != want;
                            }
                        }
                    }
                    return count;
                };
                const std::string what = std::string(isa_name(e.isa)) + " " + e.form +
                                         " Winograd micro-kernel, " + std::to_string(channels) +
                                         " channels, z " + std::to_string(z) +
                                         (worst ? ", largest sums" : "");
                if (mismatches(std::min(chunk, channels)) != 0) {
                    qtk_test::report_failure(__FILE__, __LINE__, what + ": differs");
                }
                if (is_float && worst && channels > chunk && mismatches(chunk + 1) == 0) {
                    qtk_test::report_failure(__FILE__, __LINE__,
                                             what + ": exact with a chunk one channel longer");
                }
            }
        }
        std::printf("Winograd micro-kernel %s %s: checked\n", isa_name(e.isa), e.form);
    }
}

// Winograd F(2x2, 3x3) against the reference, stride 1: output sizes either side of the 2x2 tiles
// and of the micro-kernels' 16 and 32 tiles (1 to 9, 13, 14, 28, 56), padding 0 to 2, channel
// counts 1 to 17, 64 and 256, groups 2 now and then; then the largest sums: extreme fills with
// channel counts at the chunk edges (14 channels when |U'| = 1143 and |V| = 1020) and the largest
// count the algorithms take.
void test_winograd() {
    const std::vector<const Conv2dAlgo*> algos = fast_algos();
    const int cases_before = g_cases;
    const int64_t sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 14, 28, 56};
    int index = 0;
    for (int64_t pad : {0, 1, 2}) {
        for (int64_t out_w : sizes) {
            for (int64_t out_h : {sizes[index % 13], sizes[(index * 5 + 3) % 9]}) {
                ConvCase cc;
                cc.ph = cc.pw = pad;
                cc.width = out_w + 2 - 2 * pad;
                cc.height = out_h + 2 - 2 * pad;
                cc.in = 1 + index % 17;
                cc.out = 1 + index * 7 % 17;
                if (index % 5 == 4) {
                    cc.groups = 2;
                    cc.in *= 2;
                    cc.out *= 2;
                }
                cc.fill = index % 7 == 3 ? Fill::kLowest
                          : index % 7 == 6 ? Fill::kHighest
                                           : Fill::kRandom;
                if (cc.width >= 1 && cc.height >= 1) {
                    check_case(cc, algos);
                }
                ++index;
            }
        }
    }
    for (int64_t in = 1; in <= 17; ++in) {
        ConvCase cc;
        cc.in = in;
        cc.out = 18 - in;
        cc.height = 9;
        cc.width = 11;
        check_case(cc, algos);
    }
    for (int64_t in : {64, 256}) {
        ConvCase cc;
        cc.in = in;
        cc.out = in == 64 ? 40 : 9;
        cc.height = cc.width = 14;
        check_case(cc, algos);
    }
    for (WinogradWorst worst : {WinogradWorst::kAll255, WinogradWorst::kMixed}) {
        for (Fill fill : {Fill::kLowest, Fill::kHighest}) {
            for (int64_t in : {13, 14, 15, 28, 29, 43, 1841}) {
                ConvCase cc;
                cc.in = in;
                cc.out = in == 1841 ? 3 : 9;
                cc.height = in == 1841 ? 4 : 6;
                cc.width = 5;
                cc.fill = fill;
                cc.winograd_worst = worst;
                check_case(cc, algos);
            }
        }
    }
    std::printf("%d Winograd cases checked against the reference\n", g_cases - cases_before);
}
#endif

// QTK_ISA at each level (a cap the CPU lacks still allows the levels below it): the default choice
// is the first usable algorithm at or below the cap, and it gives the reference's bytes; for a
// depthwise layer too, where a depthwise algorithm serves wherever the CPU runs AVX2 (x86) or NEON
// (aarch64).
void test_isa_cap() {
    const IsaLevel caller_cap = qtk::detail::isa_cap();  // the caller's QTK_ISA, restored below
    ConvCase dense;
    dense.in = 17;
    dense.out = 33;
    ConvCase depthwise = dense;
    depthwise.in = depthwise.groups = 33;
    depthwise.sh = depthwise.sw = 2;
    for (const ConvCase& cc : {dense, depthwise}) {
        const BuiltCase c = build(cc, 5);
        const std::vector<int8_t> want = run(c, "conv2d_int8_reference", 1, 3);
        for (IsaLevel level : qtk::detail::kIsaLevels) {
            set_env("QTK_ISA", isa_name(level));
            CHECK(qtk::detail::isa_cap() == level);
            const Conv2dAlgo& chosen =
                qtk::detail::choose_conv2d_algo(qtk::DType::kInt8, cc.params(), level, nullptr);
            CHECK(chosen.isa <= level && cpu_supports(chosen.isa));
            for (const Conv2dAlgo* algo : qtk::detail::conv2d_algos(qtk::DType::kInt8)) {
                if (algo == &chosen) {
                    break;
                }
                CHECK(!algo->usable(cc.params(), level));  // nothing earlier was usable
            }
            const bool dw = std::string(chosen.name).find("depthwise") != std::string::npos;
#if QTK_X86_AVX2
            CHECK(dw == (cc.groups > 1 && level >= IsaLevel::kAvx2 &&
                         cpu_supports(IsaLevel::kAvx2)));
#elif QTK_ARM_NEON
            CHECK(dw == (cc.groups > 1 && level >= IsaLevel::kNeon &&
                         cpu_supports(IsaLevel::kNeon)));
#else
            CHECK(!dw);
#endif
            CHECK(run(c, nullptr, 2, 3) == want);
            std::printf("QTK_ISA=%s, %s: chose %s\n", isa_name(level),
                        cc.groups > 1 ? "depthwise" : "dense", chosen.name);
        }
    }
    set_env("QTK_ISA", nullptr);
    CHECK(qtk::detail::isa_cap() == caller_cap);
}

void test_errors() {
    ConvCase cc;
    const BuiltCase c = build(cc, 6);
    set_env("QTK_ISA", "avx3");
    CHECK_THROWS_WITH(run(c, nullptr, 1, 1),
                      "node 'conv' (conv2d): QTK_ISA='avx3' is not an ISA level; use one of: "
                      "scalar, avx2, avx_vnni, avx512_vnni, avx512_vbmi, amx_int8, neon, dotprod, i8mm");
    set_env("QTK_ISA", nullptr);
    CHECK_THROWS_WITH(run(c, "winograd", 1, 1),
                      "node 'conv' (conv2d): QTK_CONV_ALGO=winograd names no int8 conv2d "
                      "algorithm built here; use one of: ");
    CHECK_THROWS_WITH(run(c, "winograd", 1, 1), "conv2d_int8_reference");

    const Conv2dParams params = {4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    const auto choose = [&](IsaLevel cap, const char* pinned) {
        return &qtk::detail::choose_conv2d_algo(qtk::DType::kInt8, params, cap, pinned);
    };
    for (const Conv2dAlgo* algo : qtk::detail::conv2d_algos(qtk::DType::kInt8)) {
        if (!cpu_supports(algo->isa)) {
            CHECK_THROWS_WITH(
                choose(qtk::detail::kIsaTop, algo->name),
                "is not usable here: this CPU lacks " + std::string(isa_name(algo->isa)));
            continue;
        }
        // Depthwise or channels-last only: the (NCHW) layer keeps its usual choice.
        if (!algo->fits(params) || !algo->fits_layout(params)) {
            CHECK(choose(qtk::detail::kIsaTop, algo->name) ==
                  choose(qtk::detail::kIsaTop, nullptr));
            continue;
        }
        CHECK(choose(qtk::detail::kIsaTop, algo->name) == algo);
        if (algo->isa != IsaLevel::kScalar) {
            CHECK_THROWS_WITH(
                choose(IsaLevel::kScalar, algo->name),
                "is not usable here: QTK_ISA=scalar excludes " + std::string(isa_name(algo->isa)));
        }
    }
    set_env("QTK_CONV_ALGO", nullptr);
}

}  // namespace

int main() {
    for (IsaLevel level : qtk::detail::kIsaLevels) {
        std::printf("%s: %s\n", isa_name(level), cpu_supports(level) ? "yes" : "no");
    }
#if QTK_X86_AVX2 || QTK_X86_AVX_VNNI || QTK_X86_AVX512_VNNI || QTK_ARM_NEON
    test_ukernels();
    test_plans();
    test_requantize();
#endif
#if QTK_X86_AVX2 || QTK_ARM_NEON
    test_depthwise_ukernels();
#endif
    test_errors();
    test_isa_cap();
    test_against_reference();
#if QTK_X86_AVX2 || QTK_X86_AVX_VNNI || QTK_X86_AVX512_VNNI
    test_winograd_bounds();
    test_winograd_ukernels();
    test_winograd();
#endif
    return qtk_test::check_report();
}
