// The descriptors of an int8 conv kernel class over the gemm_int8.h micro-kernels (the direct and
// the GEMM conv), written once: both list the same ISA levels (four of x86-64, three of aarch64)
// with the same micro-kernel and epilogue tables and differ only in their class, name and fits
// functions.
#pragma once

#include "../contracts/gemm_int8.h"
#include "conv2d.h"
#include "conv2d_int8_epilogue.h"
#include "op_kernel.h"

// QTK_WITH_<ISA>(...) keeps its arguments where this build compiles that ISA's micro-kernels and
// drops them elsewhere: a macro cannot hold #if.
#if QTK_X86_AMX_INT8 && QTK_X86_AVX512_VNNI
#define QTK_WITH_AMX_INT8(...) __VA_ARGS__
#else
#define QTK_WITH_AMX_INT8(...)
#endif
#if QTK_X86_AVX512_VNNI
#define QTK_WITH_AVX512_VNNI(...) __VA_ARGS__
#else
#define QTK_WITH_AVX512_VNNI(...)
#endif
#if QTK_X86_AVX_VNNI
#define QTK_WITH_AVX_VNNI(...) __VA_ARGS__
#else
#define QTK_WITH_AVX_VNNI(...)
#endif
#if QTK_X86_AVX2
#define QTK_WITH_AVX2(...) __VA_ARGS__
#else
#define QTK_WITH_AVX2(...)
#endif

#if QTK_ARM_I8MM
#define QTK_WITH_ARM_I8MM(...) __VA_ARGS__
#else
#define QTK_WITH_ARM_I8MM(...)
#endif
#if QTK_ARM_DOTPROD
#define QTK_WITH_ARM_DOTPROD(...) __VA_ARGS__
#else
#define QTK_WITH_ARM_DOTPROD(...)
#endif
#if QTK_ARM_NEON
#define QTK_WITH_ARM_NEON(...) __VA_ARGS__
#else
#define QTK_WITH_ARM_NEON(...)
#endif

// Defines kConv2dInt8<Name><tile><Isa> (the names src/algo_lists/conv2d_int8.inc lists), called
// "conv2d_int8_<name>_<tile>_<isa>", for Kernel(node, Int8GemmUkernel, Int8EpilogueUkernels); AMX
// takes fits_amx (its 64-channel tile rows want wider layers), the others fits.
#define QTK_CONV2D_INT8_GEMM_ALGOS(Kernel, Name, name, fits, fits_amx)                             \
    QTK_WITH_AMX_INT8(extern const Conv2dAlgo kConv2dInt8##Name##32x32c4Amx = {                    \
        "conv2d_int8_" name "_32x32c4_amx_int8", IsaLevel::kAmxInt8, fits_amx,                     \
        make_kernel<Kernel, kInt8Gemm32x32c4Amx, kInt8EpilogueAvx512>};)                           \
    QTK_WITH_AVX512_VNNI(extern const Conv2dAlgo kConv2dInt8##Name##8x32c4Avx512Vnni = {           \
        "conv2d_int8_" name "_8x32c4_avx512_vnni", IsaLevel::kAvx512Vnni, fits,                    \
        make_kernel<Kernel, kInt8Gemm8x32c4Avx512Vnni, kInt8EpilogueAvx512>};)                     \
    QTK_WITH_AVX_VNNI(extern const Conv2dAlgo kConv2dInt8##Name##4x16c4AvxVnni = {                 \
        "conv2d_int8_" name "_4x16c4_avx_vnni", IsaLevel::kAvxVnni, fits,                          \
        make_kernel<Kernel, kInt8Gemm4x16c4AvxVnni, kInt8EpilogueAvx2>};)                          \
    QTK_WITH_AVX2(extern const Conv2dAlgo kConv2dInt8##Name##2x16c4Avx2 = {                        \
        "conv2d_int8_" name "_2x16c4_avx2", IsaLevel::kAvx2, fits,                                 \
        make_kernel<Kernel, kInt8Gemm2x16c4Avx2, kInt8EpilogueAvx2>};)                            \
    QTK_WITH_ARM_I8MM(extern const Conv2dAlgo kConv2dInt8##Name##4x16c4I8mm = {                    \
        "conv2d_int8_" name "_4x16c4_i8mm", IsaLevel::kI8mm, fits,                                 \
        make_kernel<Kernel, kInt8Gemm4x16c4I8mm, kInt8EpilogueNeon>};)                             \
    QTK_WITH_ARM_DOTPROD(extern const Conv2dAlgo kConv2dInt8##Name##6x16c4Dotprod = {              \
        "conv2d_int8_" name "_6x16c4_dotprod", IsaLevel::kDotprod, fits,                           \
        make_kernel<Kernel, kInt8Gemm6x16c4Dotprod, kInt8EpilogueNeon>};)                          \
    QTK_WITH_ARM_NEON(extern const Conv2dAlgo kConv2dInt8##Name##4x16c4Neon = {                    \
        "conv2d_int8_" name "_4x16c4_neon", IsaLevel::kNeon, fits,                                 \
        make_kernel<Kernel, kInt8Gemm4x16c4Neon, kInt8EpilogueNeon>};)
