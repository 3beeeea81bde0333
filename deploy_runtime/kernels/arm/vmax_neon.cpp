// Row maximum (vmax.h) at Armv8 NEON: 16 int8 or 4 float32 per vector, the tail through a buffer.
#include <arm_neon.h>

#include <cstring>

#include "../contracts/vmax.h"

namespace qtk {
namespace detail {
namespace {

// float32_max of src/float32_max.h, lane by lane: x where x > best or x is a NaN, the bitwise AND
// where they are equal (+0 over -0), else best.
float32x4_t float32_max(float32x4_t best, float32x4_t x) {
    const uint32x4_t vtake_x = vorrq_u32(vcgtq_f32(x, best), vmvnq_u32(vceqq_f32(x, x)));
    const uint32x4_t vbest = vreinterpretq_u32_f32(best), vx = vreinterpretq_u32_f32(x);
    const uint32x4_t vequal = vbslq_u32(vceqq_f32(x, best), vandq_u32(vbest, vx), vbest);
    return vreinterpretq_f32_u32(vbslq_u32(vtake_x, vx, vequal));
}

int8x16_t max_of(int8x16_t a, int8x16_t b) { return vmaxq_s8(a, b); }
float32x4_t max_of(float32x4_t a, float32x4_t b) { return float32_max(a, b); }
int8x16_t load(const int8_t* p) { return vld1q_s8(p); }
float32x4_t load(const float* p) { return vld1q_f32(p); }
void store(int8_t* p, int8x16_t v) { vst1q_s8(p, v); }
void store(float* p, float32x4_t v) { vst1q_f32(p, v); }

template <typename T, int kLanes>
void vmax_rows(const T* const* rows, size_t count, int64_t width, T* y) {
    int64_t i = 0;
    for (; i + kLanes <= width; i += kLanes) {
        auto vmax = load(rows[0] + i);
        for (size_t r = 1; r < count; ++r) {
            vmax = max_of(vmax, load(rows[r] + i));
        }
        store(y + i, vmax);
    }
    if (i < width) {
        const size_t tail = static_cast<size_t>(width - i) * sizeof(T);
        T vtail[kLanes] = {};
        std::memcpy(vtail, rows[0] + i, tail);
        auto vmax = load(vtail);
        for (size_t r = 1; r < count; ++r) {
            std::memcpy(vtail, rows[r] + i, tail);
            vmax = max_of(vmax, load(vtail));
        }
        store(vtail, vmax);
        std::memcpy(y + i, vtail, tail);
    }
}

}  // namespace

extern const VmaxUkernel<int8_t> kInt8VmaxNeon = {vmax_rows<int8_t, 16>};
extern const VmaxUkernel<float> kFloat32VmaxNeon = {vmax_rows<float, 4>};

}  // namespace detail
}  // namespace qtk
