// Which instruction set levels (x86-64 or aarch64) this CPU and its OS can run, and the cap QTK_ISA
// puts on them.
// Kernel choice (algo_policy.cpp) asks here; kernels never probe the CPU themselves.
#pragma once

#include <string>

namespace qtk {
namespace detail {

// Ordered: a cap at one level allows every lower one. A CPU may lack a level below one it has
// (Ice Lake and Zen 4 run AVX-512 VNNI but not the VEX-encoded AVX-VNNI), so "usable" is always
// cpu_supports(level) && level <= cap, never a comparison with the highest level found.
// One order holds both architectures' levels, x86's then aarch64's: a CPU has levels of one
// architecture only, so a cap at an aarch64 level allows every x86 level below it to no effect, and
// a cap at an x86 level leaves an aarch64 CPU its portable kernels alone.
enum class IsaLevel {
    kScalar, kAvx2, kAvxVnni, kAvx512Vnni, kAvx512Vbmi, kAmxInt8, kNeon, kDotprod, kI8mm
};

constexpr IsaLevel kIsaLevels[] = {IsaLevel::kScalar,     IsaLevel::kAvx2,
                                   IsaLevel::kAvxVnni,    IsaLevel::kAvx512Vnni,
                                   IsaLevel::kAvx512Vbmi, IsaLevel::kAmxInt8,
                                   IsaLevel::kNeon,       IsaLevel::kDotprod,
                                   IsaLevel::kI8mm};

// The level an unset QTK_ISA allows: all of them.
constexpr IsaLevel kIsaTop = IsaLevel::kI8mm;

// "scalar", "avx2", "avx_vnni", "avx512_vnni", "avx512_vbmi", "amx_int8", "neon", "dotprod",
// "i8mm"
const char* isa_name(IsaLevel level);

// cpuid plus xgetbv (the OS must save the ymm / zmm state): avx2 needs AVX2 and FMA, avx_vnni
// adds AVX-VNNI, avx512_vnni needs AVX-512 F, BW, VL and VNNI, avx512_vbmi adds Ice Lake's VBMI
// byte permutes and VPOPCNTDQ (Ice Lake, Sapphire Rapids, Zen 4 and 5 have both, Cascade Lake
// neither), amx_int8 adds AMX-TILE
// and AMX-INT8
// with the OS's tile state (on Linux, granted to the process by arch_prctl when first asked here).
// On aarch64 (Linux's getauxval): neon is Advanced SIMD, in every aarch64 CPU; dotprod adds
// SDOT (Armv8.2's FEAT_DotProd); i8mm adds SMMLA (FEAT_I8MM) to dotprod.
// Detected once; always true for kScalar, false for the other architecture's levels.
bool cpu_supports(IsaLevel level);

// The CPU's brand string ("AMD EPYC 9R14 96-Core Processor"; on aarch64 its MIDR core design,
// "aarch64 implementer 0x41 part 0xd0c r4p1" for a Neoverse N1), which keys Fast-Run caches.
std::string cpu_name();

// The highest level QTK_ISA allows, read at each call (so a test can change it between model
// loads): unset or empty means no cap. Throws Error naming the valid values for anything else.
IsaLevel isa_cap();

}  // namespace detail
}  // namespace qtk
