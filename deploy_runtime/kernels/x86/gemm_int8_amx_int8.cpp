// int8 GEMM micro-kernel, 32 output channels x 32 pixels, AMX-INT8 (gemm_int8.h, quad_block 16).
// tdpbsud multiplies int8 weights (an A tile row: 16 quads of one output channel) by uint8
// activations (a B tile row: one quad of 16 pixels) and adds the products to int32 without
// saturation, so the sum is exact, as vpdpbusd's. Four accumulator tiles (2 x 2 of 16 x 16) take
// two A and two B tiles per 16 quads: all eight tile registers.
#include <immintrin.h>

#include <cstdint>

#include "../contracts/gemm_int8.h"

namespace qtk {
namespace detail {
namespace {

constexpr int kQuadBlock = 16;  // quads in one 64-byte tile row

// LDTILECFG's operand: palette 1, tiles 0-7 of 16 rows of 64 bytes. A constant in memory: GCC 12's
// _tile_loadconfig tells the compiler it reads 8 bytes, so a local's other stores may be dropped.
struct alignas(64) TileConfig {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

constexpr TileConfig kTileConfig = {1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64},
                                    {16, 16, 16, 16, 16, 16, 16, 16}};

void load_tile_config() { _tile_loadconfig(&kTileConfig); }

void int8_gemm_32x32c4_amx(const int8_t* a, const Int8GemmB& b, int32_t* c, int64_t c_stride) {
    _tile_zero(0);  // channels 0-15, pixels 0-15
    _tile_zero(1);  // channels 0-15, pixels 16-31
    _tile_zero(2);  // channels 16-31, pixels 0-15
    _tile_zero(3);  // channels 16-31, pixels 16-31
    const uint8_t* outer = b.base;
    for (int64_t o = 0; o < b.outer_count; o += kQuadBlock) {
        for (int64_t i = 0; i < b.inner_count; ++i) {
            const uint8_t* quads = outer + b.inner_offsets[i];  // rows outer_stride apart
            _tile_loadd(4, a, 64);
            _tile_loadd(5, a + 16 * 64, 64);
            _tile_loadd(6, quads, b.outer_stride);
            _tile_loadd(7, quads + 64, b.outer_stride);
            _tile_dpbsud(0, 4, 6);
            _tile_dpbsud(1, 4, 7);
            _tile_dpbsud(2, 5, 6);
            _tile_dpbsud(3, 5, 7);
            a += 32 * 64;
        }
        outer += kQuadBlock * b.outer_stride;
    }
    const int64_t row_bytes = c_stride * 4;
    _tile_stored(0, c, row_bytes);
    _tile_stored(1, c + 16, row_bytes);
    _tile_stored(2, c + 16 * c_stride, row_bytes);
    _tile_stored(3, c + 16 * c_stride + 16, row_bytes);
}

// The channels-last form: pixels are the A rows (64 channels of one pixel each, read in place at
// each tap), weights the B rows; tdpbssd multiplies int8 by int8, so no offset is needed on either
// side.
void int8_gemm_nhwc_32x32_amx(int64_t /*pixels: all 32 are computed*/, const int8_t* x,
                              int64_t x_stride, const int64_t* tap_offsets, int64_t taps,
                              int64_t quads, const int8_t* w, int32_t* c, int64_t c_stride) {
    _tile_zero(0);  // pixels 0-15, channels 0-15
    _tile_zero(1);  // pixels 0-15, channels 16-31
    _tile_zero(2);  // pixels 16-31, channels 0-15
    _tile_zero(3);  // pixels 16-31, channels 16-31
    for (int64_t t = 0; t < taps; ++t) {
        const int8_t* xt = x + tap_offsets[t];
        for (int64_t q = 0; q < quads; q += kQuadBlock, xt += 64, w += 2 * 16 * 64) {
            _tile_loadd(4, xt, x_stride);
            _tile_loadd(5, xt + 16 * x_stride, x_stride);
            _tile_loadd(6, w, 64);
            _tile_loadd(7, w + 16 * 64, 64);
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
    }
    const int64_t row_bytes = c_stride * 4;
    _tile_stored(0, c, row_bytes);
    _tile_stored(1, c + 16, row_bytes);
    _tile_stored(2, c + 16 * c_stride, row_bytes);
    _tile_stored(3, c + 16 * c_stride + 16, row_bytes);
}

}  // namespace

extern const Int8GemmNhwcUkernel kInt8GemmNhwc32x32Amx = {32, 32, kQuadBlock, 0,
                                                         int8_gemm_nhwc_32x32_amx,
                                                         load_tile_config};

extern const Int8GemmUkernel kInt8Gemm32x32c4Amx = {32, 32, int8_gemm_32x32c4_amx, kQuadBlock,
                                                    load_tile_config};

}  // namespace detail
}  // namespace qtk
