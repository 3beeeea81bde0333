// What the int8 and float32 conv sweeps (test_conv2d_algos.cpp, test_float_conv_algos.cpp) share:
// the geometry of one conv2d case, to which each adds its own fills, and the names both use.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "conv2d.h"
#include "cpu_features.h"
#include "model_builder.h"
#include "op_registry.h"

namespace qtk_test {

struct ConvGeometry {
    int64_t in = 4, out = 4, height = 5, width = 7;
    int64_t kh = 3, kw = 3, sh = 1, sw = 1, ph = 1, pw = 1, dh = 1, dw = 1, groups = 1;

    int64_t out_h() const { return (height + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
    int64_t out_w() const { return (width + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
    int64_t k_count() const { return in / groups * kh * kw; }
    // The padded input holds at least one dilated window.
    bool window_fits() const {
        return height + 2 * ph >= dh * (kh - 1) + 1 && width + 2 * pw >= dw * (kw - 1) + 1;
    }
    qtk::detail::Conv2dParams params() const {
        return {out, in / groups, kh, kw, sh, sw, ph, pw, dh, dw, groups};
    }
    std::string describe() const {
        return std::to_string(in) + "->" + std::to_string(out) + " " + std::to_string(height) +
               "x" + std::to_string(width) + " k" + std::to_string(kh) + "x" + std::to_string(kw) +
               " s" + std::to_string(sh) + "," + std::to_string(sw) + " p" + std::to_string(ph) +
               "," + std::to_string(pw) + " d" + std::to_string(dh) + "," + std::to_string(dw) +
               " g" + std::to_string(groups);
    }
};

// The conv2d algorithms of `dtype` that this CPU runs and QTK_ISA allows, but `skip`; says which
// it skips and why.
inline std::vector<const qtk::detail::Conv2dAlgo*> runnable_conv2d_algos(
    qtk::DType dtype, const qtk::detail::Conv2dAlgo* skip = nullptr) {
    std::vector<const qtk::detail::Conv2dAlgo*> algos;
    for (const qtk::detail::Conv2dAlgo* algo : qtk::detail::conv2d_algos(dtype)) {
        if (algo == skip) {
            continue;
        }
        if (!qtk::detail::cpu_supports(algo->isa)) {
            std::printf("%s: skipped, this CPU lacks %s\n", algo->name,
                        qtk::detail::isa_name(algo->isa));
            continue;
        }
        if (algo->isa > qtk::detail::isa_cap()) {  // the caller's QTK_ISA (a sanitizer run per cap)
            std::printf("%s: skipped, QTK_ISA caps below %s\n", algo->name,
                        qtk::detail::isa_name(algo->isa));
            continue;
        }
        algos.push_back(algo);
    }
    return algos;
}

}  // namespace qtk_test

using qtk::Shape;
using qtk::detail::Conv2dAlgo;
using qtk::detail::Conv2dParams;
using qtk::detail::cpu_supports;
using qtk::detail::isa_name;
using qtk::detail::IsaLevel;
using qtk_test::AttrSpec;
using qtk_test::ModelBuilder;
using qtk_test::Rng;
using qtk_test::set_env;
