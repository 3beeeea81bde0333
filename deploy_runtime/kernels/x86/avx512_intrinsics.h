// <immintrin.h> for the AVX-512 kernel files. GCC 12's AVX-512 headers trip -Wuninitialized on
// their own _mm512_undefined_epi32() once inlined (GCC bug 105593, a false positive); the warnings
// are silenced for the header's code only, not for the kernels that include it.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
