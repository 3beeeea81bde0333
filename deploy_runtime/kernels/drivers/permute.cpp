// permute, for every dtype (pure data movement, docs/quantization_spec.md section 14), by runs and
// tiles instead of one element at a time. The output is walked as a strided view of the input;
// dims of size 1 are dropped and neighbours that stay adjacent in the input are merged, so the
// channel shuffle [N, 2, C/2, H, W] -> (0, 2, 1, 3, 4) becomes 2 x C/2 runs of H * W elements.
// Then either
// - the innermost output dim is contiguous in the input: one memcpy per run; or
// - it is not (NCHW -> NHWC): a tiled transpose of it and the output dim contiguous in the input,
//   int8 in 16 x 16 SSE2 blocks where x86-64 has them, or by unpacks into pixels where the
//   channels are 2 to 4 (an image; 64 pixels a step by byte permutes where the CPU has AVX-512
//   VBMI: interleave_int8.h, 22 -> 10.5 us for a 224x224 image on Zen 4).
// Threads split the runs, or the outer index times the tile rows.
#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../contracts/interleave_int8.h"
#include "beside_reference.h"
#include "op_algo.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {

std::unique_ptr<OpKernel> make_permute_reference(const NodeView& node);

namespace {

constexpr int64_t kTile = 32;  // a 32 x 32 tile of 4-byte elements stays in L1 on both sides

#if defined(__SSE2__)
// y[r * y_stride + c] = x[c * x_stride + r] for r, c < 16: four perfect shuffles (rows i and
// i + 8 interleaved byte by byte), SSE2, in every x86-64's baseline.
void transpose16x16(const uint8_t* x, int64_t x_stride, uint8_t* y, int64_t y_stride) {
    __m128i v[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
        v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i * x_stride));
    }
#pragma GCC unroll 4
    for (int round = 0; round < 4; ++round) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
            t[2 * i] = _mm_unpacklo_epi8(v[i], v[i + 8]);
            t[2 * i + 1] = _mm_unpackhi_epi8(v[i], v[i + 8]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
            v[i] = t[i];
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i * y_stride), v[i]);
    }
}

// y[r * C + c] = x[c * x_stride + r] for r < 16, c < C (2 to 4: an image's channels into pixels,
// which the 16 x 16 blocks would mostly waste): the channels' bytes unpacked into 4-byte pixels,
// stored C bytes a pixel. At C = 3 each 64-bit lane's two pixels close up to 6 bytes, each vector's
// two lanes to 12, and the four vectors' 12-byte runs are stitched into three 16-byte stores:
// storing each pixel's 4 bytes over the last one's spare byte took 2.2 times as long (224x224
// image, Zen 4). Exactly 16 C bytes are written.
template <int C>
void interleave16(const uint8_t* x, int64_t x_stride, uint8_t* y) {
    const auto row = [&](int c) {
        return c < C ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + c * x_stride))
                     : _mm_setzero_si128();
    };
    const __m128i a = row(0), b = row(1), c = row(2), d = row(3);
    const __m128i ab[2] = {_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)};
    if constexpr (C == 2) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y), ab[0]);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 16), ab[1]);
        return;
    }
    const __m128i cd[2] = {_mm_unpacklo_epi8(c, d), _mm_unpackhi_epi8(c, d)};
    __m128i quads[4];  // 4 pixels each, 4 bytes a pixel
    for (int half = 0; half < 2; ++half) {
        quads[2 * half] = _mm_unpacklo_epi16(ab[half], cd[half]);
        quads[2 * half + 1] = _mm_unpackhi_epi16(ab[half], cd[half]);
    }
    if constexpr (C == 4) {
        for (int q = 0; q < 4; ++q) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 16 * q), quads[q]);
        }
        return;
    }
    const __m128i first3 = _mm_set1_epi64x(0xFFFFFF), second3 = _mm_set1_epi64x(0xFFFFFF000000);
    const __m128i low6 = _mm_set_epi64x(0, 0xFFFFFFFFFFFF);
    const __m128i next6 = _mm_set_epi32(0, -1, static_cast<int>(0xFFFF0000), 0);  // bytes 6..11
    __m128i runs[4];  // 12 bytes each
    for (int q = 0; q < 4; ++q) {
        const __m128i lanes = _mm_or_si128(_mm_and_si128(quads[q], first3),
                                           _mm_and_si128(_mm_srli_epi64(quads[q], 8), second3));
        runs[q] = _mm_or_si128(_mm_and_si128(lanes, low6),
                               _mm_and_si128(_mm_srli_si128(lanes, 2), next6));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y),
                     _mm_or_si128(runs[0], _mm_slli_si128(runs[1], 12)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 16),
                     _mm_or_si128(_mm_srli_si128(runs[1], 4), _mm_slli_si128(runs[2], 8)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 32),
                     _mm_or_si128(_mm_srli_si128(runs[2], 8), _mm_slli_si128(runs[3], 4)));
}
#endif

// The output's dims and, per dim, the input's stride (in elements) along it; simplified.
struct View {
    Shape shape;
    std::vector<int64_t> x_strides;
};

View simplify(const Shape& ys, const std::vector<int64_t>& x_strides) {
    View v;
    for (size_t d = 0; d < ys.size(); ++d) {
        if (ys[d] == 1) {
            continue;
        }
        if (!v.shape.empty() && v.x_strides.back() == x_strides[d] * ys[d]) {
            v.shape.back() *= ys[d];  // adjacent in the input too: one dim
            v.x_strides.back() = x_strides[d];
        } else {
            v.shape.push_back(ys[d]);
            v.x_strides.push_back(x_strides[d]);
        }
    }
    if (v.shape.empty()) {  // a single element
        v = {{1}, {1}};
    }
    return v;
}

// The reference has checked that perm is a permutation of the input's dims.
std::vector<int64_t> read_perm(const NodeView& node) {
    const size_t rank = node.activation_input(0, node.dtype()).shape.size();
    return node.ints("perm", rank, 0, static_cast<int64_t>(rank) - 1);
}

class PermuteRuns final : public BesideReference {
 public:
    explicit PermuteRuns(const NodeView& node, const Int8InterleaveUkernel* wide = nullptr)
        : BesideReference(node, make_permute_reference),
          element_size_(dtype_size(node.dtype())),
          perm_(read_perm(node)),
          wide_(wide) {}

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const std::vector<int64_t> strides = row_major_strides(*io.input_shapes[0]);
        std::vector<int64_t> x_strides;
        for (int64_t p : perm_) {
            x_strides.push_back(strides[static_cast<size_t>(p)]);
        }
        const View v = simplify(*io.output_shapes[0], x_strides);
        if (v.x_strides.back() == 1) {
            copy_runs(io, pool, v);
        } else if (element_size_ == 1) {
            transpose<uint8_t>(io, pool, v);
        } else {
            transpose<uint32_t>(io, pool, v);  // float32: the dtypes are 1 or 4 bytes
        }
    }

 private:
    void copy_runs(const NodeIO& io, ThreadPool& pool, const View& v) const {
        const size_t bytes = static_cast<size_t>(v.shape.back()) * element_size_;
        const Shape outer(v.shape.begin(), v.shape.end() - 1);
        const StridedWalk<1>::Strides strides = {
            std::vector<int64_t>(v.x_strides.begin(), v.x_strides.end() - 1)};
        const uint8_t* x = io.input<uint8_t>(0);
        uint8_t* y = io.output<uint8_t>(0);
        pool.parallel_for(element_count(outer), [&](int64_t begin, int64_t end) {
            StridedWalk<1> walk(outer, strides, begin);
            for (int64_t o = begin; o < end; ++o, walk.next()) {
                std::memcpy(y + o * bytes, x + walk.offset(0) * element_size_, bytes);
            }
        });
    }

    // Output dims (..., t, ..., last): t reads the input contiguously, last with stride s. Tiles
    // of kTile x kTile (t, last) are copied so that both sides stay in cache; where last is short
    // (an image's 3 channels) a task takes as many more rows (whole 16-row blocks), or the tasks'
    // set-up would cost more than their copies.
    template <typename E>
    void transpose(const NodeIO& io, ThreadPool& pool, const View& v) const {
        const size_t last = v.shape.size() - 1;
        const size_t t = static_cast<size_t>(
            std::find(v.x_strides.begin(), v.x_strides.end(), 1) - v.x_strides.begin());
        const std::vector<int64_t> y_strides = row_major_strides(v.shape);
        Shape outer;
        StridedWalk<2>::Strides strides;  // input, output
        for (size_t d = 0; d < last; ++d) {
            if (d != t) {
                outer.push_back(v.shape[d]);
                strides[0].push_back(v.x_strides[d]);
                strides[1].push_back(y_strides[d]);
            }
        }
        const int64_t rows = v.shape[t], cols = v.shape[last], x_step = v.x_strides[last];
        const int64_t y_step = y_strides[t];
        // (an image's rows in whole steps of its interleave)
        const int64_t step = wide_ != nullptr && cols <= 4 ? wide_->pixels : 16;
        const int64_t tile_rows = std::max(kTile, kTile * kTile / cols / step * step);
        const int64_t row_tiles = (rows + tile_rows - 1) / tile_rows;
        const E* x = io.input<E>(0);
        E* y = io.output<E>(0);
        pool.parallel_for(element_count(outer) * row_tiles, [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
                const StridedWalk<2> walk(outer, strides, task / row_tiles);
                const int64_t r0 = task % row_tiles * tile_rows;
                const int64_t r1 = std::min(r0 + tile_rows, rows);
                const E* x_tile = x + walk.offset(0);
                E* y_tile = y + walk.offset(1);
                // Column by column: the inner loop is long even where the columns are few.
                const auto copy = [&](int64_t ra, int64_t rb, int64_t ca, int64_t cb) {
                    for (int64_t c = ca; c < cb; ++c) {
                        const E* from = x_tile + c * x_step;
                        E* to = y_tile + c;
                        for (int64_t r = ra; r < rb; ++r) {
                            to[r * y_step] = from[r];
                        }
                    }
                };
#if defined(__SSE2__)
                if constexpr (std::is_same_v<E, uint8_t>) {
                    const auto small = cols == 2   ? interleave16<2>
                                       : cols == 3 ? interleave16<3>
                                       : cols == 4 ? interleave16<4>
                                                   : nullptr;
                    if (small != nullptr && y_step == cols) {  // pixels of 2 to 4 channels
                        int64_t r = r0;
                        for (; wide_ != nullptr && r + wide_->pixels <= r1; r += wide_->pixels) {
                            wide_->run[cols - 2](x_tile + r, x_step, y_tile + r * cols);
                        }
                        for (; r + 16 <= r1; r += 16) {
                            small(x_tile + r, x_step, y_tile + r * cols);
                        }
                        copy(r, r1, 0, cols);
                        continue;
                    }
                }
#endif
                for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
                    const int64_t c1 = std::min(c0 + kTile, cols);
                    int64_t r = r0;
#if defined(__SSE2__)
                    if constexpr (std::is_same_v<E, uint8_t>) {  // whole 16 x 16 blocks
                        for (; r + 16 <= r1; r += 16) {
                            int64_t c = c0;
                            for (; c + 16 <= c1; c += 16) {
                                transpose16x16(x_tile + r + c * x_step, x_step,
                                               y_tile + r * y_step + c, y_step);
                            }
                            copy(r, r + 16, c, c1);
                        }
                    }
#endif
                    copy(r, r1, c0, c1);
                }
            }
        });
    }

    const size_t element_size_;
    const std::vector<int64_t> perm_;
    const Int8InterleaveUkernel* const wide_;  // an image's wider step, where the level has one
};

std::unique_ptr<OpKernel> make(const NodeView& node) {
    return std::make_unique<PermuteRuns>(node);
}

#if QTK_X86_AVX512_VBMI
std::unique_ptr<OpKernel> make_avx512_vbmi(const NodeView& node) {
    return std::make_unique<PermuteRuns>(node, &kInt8InterleaveAvx512Vbmi);
}
#endif

}  // namespace

#if QTK_X86_AVX512_VBMI
extern const OpAlgo kPermuteRunsAvx512Vbmi = {"permute_runs_avx512_vbmi", IsaLevel::kAvx512Vbmi,
                                              make_avx512_vbmi};
#endif
extern const OpAlgo kPermuteRuns = {"permute_runs", IsaLevel::kScalar, make};

}  // namespace detail
}  // namespace qtk
