// Test-only: the AVX-VNNI micro-kernel compiled for AVX-512 VL + VNNI instead, its one VEX-only
// intrinsic mapped to the EVEX form of the same instruction (same results), so that its logic is
// tested on CPUs that have AVX-512 VNNI but not AVX-VNNI (Ice Lake, Zen 4) and on qemu.
#include <immintrin.h>

#define _mm256_dpbusd_avx_epi32 _mm256_dpbusd_epi32
#define kInt8Gemm4x16c4AvxVnni kInt8Gemm4x16c4AvxVnniAsEvex
#include "../kernels/x86/gemm_int8_avx_vnni.cpp"
