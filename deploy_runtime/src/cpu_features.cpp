#include "cpu_features.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "qtk/runtime.h"

#if defined(__x86_64__) || defined(_M_X64)
#define QTK_X86_64 1
#if defined(_MSC_VER)
#include <immintrin.h>
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif
#if defined(__aarch64__) && defined(__linux__)
#define QTK_AARCH64_LINUX 1
#include <sys/auxv.h>
#endif

namespace qtk {
namespace detail {
namespace {

#if defined(QTK_X86_64)
struct Cpuid {
    uint32_t eax, ebx, ecx, edx;
};

Cpuid cpuid(uint32_t leaf, uint32_t subleaf) {
#if defined(_MSC_VER)
    int r[4];
    __cpuidex(r, static_cast<int>(leaf), static_cast<int>(subleaf));
    return {static_cast<uint32_t>(r[0]), static_cast<uint32_t>(r[1]), static_cast<uint32_t>(r[2]),
            static_cast<uint32_t>(r[3])};
#else
    Cpuid r{};
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
#endif
}

// XCR0: which register states the OS saves on a context switch. Only called when OSXSAVE is set.
uint64_t xgetbv0() {
#if defined(_MSC_VER)
    return _xgetbv(0);
#else
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t{hi} << 32) | lo;
#endif
}

bool bit(uint32_t word, int index) { return ((word >> index) & 1u) != 0; }

struct Support {
    bool avx2 = false, avx_vnni = false, avx512_vnni = false, avx512_vbmi = false,
         amx_int8 = false;
};

// Linux enables the AMX tile data state per process, on request (arch_prctl ARCH_REQ_XCOMP_PERM
// for XFEATURE_XTILEDATA); without it the first tile instruction faults.
bool os_grants_amx() {
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;  // not wired up elsewhere yet
#endif
}

Support detect() {
    Support s;
    const uint32_t max_leaf = cpuid(0, 0).eax;
    const Cpuid leaf1 = cpuid(1, 0);
    if (max_leaf < 7 || !bit(leaf1.ecx, 27) /* OSXSAVE */ || !bit(leaf1.ecx, 28) /* AVX */) {
        return s;
    }
    const uint64_t xcr0 = xgetbv0();
    const bool ymm_state = (xcr0 & 0x6) == 0x6;    // XMM and YMM
    const bool zmm_state = (xcr0 & 0xe6) == 0xe6;  // plus opmask, ZMM_Hi256, Hi16_ZMM
    const Cpuid leaf7 = cpuid(7, 0);
    const Cpuid leaf7_1 = cpuid(7, 1);
    s.avx2 = ymm_state && bit(leaf7.ebx, 5) && bit(leaf1.ecx, 12) /* FMA */;
    s.avx_vnni = s.avx2 && bit(leaf7_1.eax, 4);
    s.avx512_vnni = s.avx2 && zmm_state && bit(leaf7.ebx, 16) /* F */ &&
                    bit(leaf7.ebx, 30) /* BW */ && bit(leaf7.ebx, 31) /* VL */ &&
                    bit(leaf7.ecx, 11) /* VNNI */;
    s.avx512_vbmi = s.avx512_vnni && bit(leaf7.ecx, 1) /* VBMI */ &&
                    bit(leaf7.ecx, 14) /* VPOPCNTDQ */;
    const bool tile_state = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
    s.amx_int8 = s.avx512_vnni && tile_state && bit(leaf7.edx, 24) /* AMX-TILE */ &&
                 bit(leaf7.edx, 25) /* AMX-INT8 */ && os_grants_amx();
    return s;
}
#endif

#if defined(QTK_AARCH64_LINUX)
// Linux's AT_HWCAP and AT_HWCAP2 bits (asm/hwcap.h), spelled here so that an older libc's headers
// do not hide a level.
constexpr unsigned long kHwcapAsimd = 1ul << 1, kHwcapCpuid = 1ul << 11, kHwcapAsimddp = 1ul << 20;
constexpr unsigned long kHwcap2I8mm = 1ul << 13;

struct ArmSupport {
    bool neon = false, dotprod = false, i8mm = false;
};

ArmSupport detect_arm() {
    const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    ArmSupport s;
    s.neon = (hwcap & kHwcapAsimd) != 0;
    s.dotprod = s.neon && (hwcap & kHwcapAsimddp) != 0;
    s.i8mm = s.dotprod && (hwcap2 & kHwcap2I8mm) != 0;
    return s;
}
#endif

}  // namespace

const char* isa_name(IsaLevel level) {
    switch (level) {
        case IsaLevel::kScalar:
            return "scalar";
        case IsaLevel::kAvx2:
            return "avx2";
        case IsaLevel::kAvxVnni:
            return "avx_vnni";
        case IsaLevel::kAvx512Vnni:
            return "avx512_vnni";
        case IsaLevel::kAvx512Vbmi:
            return "avx512_vbmi";
        case IsaLevel::kAmxInt8:
            return "amx_int8";
        case IsaLevel::kNeon:
            return "neon";
        case IsaLevel::kDotprod:
            return "dotprod";
        case IsaLevel::kI8mm:
            return "i8mm";
    }
    return "?";
}

bool cpu_supports(IsaLevel level) {
#if defined(QTK_X86_64)
    static const Support s = detect();
    switch (level) {
        case IsaLevel::kScalar:
            return true;
        case IsaLevel::kAvx2:
            return s.avx2;
        case IsaLevel::kAvxVnni:
            return s.avx_vnni;
        case IsaLevel::kAvx512Vnni:
            return s.avx512_vnni;
        case IsaLevel::kAvx512Vbmi:
            return s.avx512_vbmi;
        case IsaLevel::kAmxInt8:
            return s.amx_int8;
        default:
            return false;
    }
#elif defined(QTK_AARCH64_LINUX)
    static const ArmSupport s = detect_arm();
    switch (level) {
        case IsaLevel::kScalar:
            return true;
        case IsaLevel::kNeon:
            return s.neon;
        case IsaLevel::kDotprod:
            return s.dotprod;
        case IsaLevel::kI8mm:
            return s.i8mm;
        default:
            return false;
    }
#else
    return level == IsaLevel::kScalar;
#endif
}

#if QTK_X86_AVX512_VNNI
int64_t int8_peak_chains_avx512_vnni(int64_t rounds);  // kernels/x86/gemm_int8_avx512_vnni.cpp
#endif
#if QTK_X86_AVX2
int64_t int8_peak_chains_avx2(int64_t rounds);  // kernels/x86/gemm_int8_avx2.cpp
int64_t binary_peak_chains_avx2(int64_t rounds);  // kernels/x86/popcount_binary_4x8_avx2.cpp
#endif
#if QTK_X86_AVX512_VBMI
// kernels/x86/popcount_binary_avx512_vbmi.cpp
int64_t binary_peak_chains_avx512_vbmi(int64_t rounds);
#endif

#if QTK_X86_AVX2  // every peak loop is x86 SIMD
namespace {

// Products per second of `chains(rounds)` (which returns its products), timed for `seconds`.
double products_per_second(int64_t (*chains)(int64_t), double seconds) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    int64_t products = 0;
    double elapsed = 0.0;
    while (elapsed < seconds || products == 0) {
        products += chains(4096);
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    return static_cast<double>(products) / elapsed;
}

}  // namespace
#endif
}  // namespace detail

double measure_int8_peak(double seconds) {
#if QTK_X86_AVX512_VNNI
    if (detail::cpu_supports(detail::IsaLevel::kAvx512Vnni)) {
        return detail::products_per_second(detail::int8_peak_chains_avx512_vnni, seconds);
    }
#endif
#if QTK_X86_AVX2
    if (detail::cpu_supports(detail::IsaLevel::kAvx2)) {
        return detail::products_per_second(detail::int8_peak_chains_avx2, seconds);
    }
#endif
    (void)seconds;
    return 0.0;
}

double measure_binary_peak(double seconds) {
#if QTK_X86_AVX512_VBMI
    if (detail::cpu_supports(detail::IsaLevel::kAvx512Vbmi)) {
        return detail::products_per_second(detail::binary_peak_chains_avx512_vbmi, seconds);
    }
#endif
#if QTK_X86_AVX2
    if (detail::cpu_supports(detail::IsaLevel::kAvx2)) {
        return detail::products_per_second(detail::binary_peak_chains_avx2, seconds);
    }
#endif
    (void)seconds;
    return 0.0;
}

CoreToCore measure_core_to_core(double seconds) {
    constexpr size_t kWords = 256 * 1024 / sizeof(uint64_t);
    std::vector<uint64_t> buffers[2] = {std::vector<uint64_t>(kWords),
                                        std::vector<uint64_t>(kWords)};
    std::atomic<int> arrived{0};
    std::atomic<uint64_t> sink{0};
    // Rounds of: each thread writes its buffer, both meet, each reads a buffer and times it.
    const auto rounds = [&](int thread, bool other, int count, double* read_seconds) {
        int phase = 0;
        const auto meet = [&] {
            phase += 2;
            arrived.fetch_add(1);
            while (arrived.load() < phase) {
                std::this_thread::yield();  // the other thread may share this CPU
            }
        };
        uint64_t sum = 0;
        for (int r = 0; r < count; ++r) {
            std::fill(buffers[thread].begin(), buffers[thread].end(), uint64_t(r));
            meet();
            const auto start = std::chrono::steady_clock::now();
            const std::vector<uint64_t>& read = buffers[other ? 1 - thread : thread];
            for (size_t i = 0; i < kWords; i += 8) {  // a word a cache line: the lines' cost
                sum += read[i];
            }
            *read_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                           start).count();
            meet();
        }
        sink += sum;
    };
    const auto measure = [&](bool other) {
        const int count = std::max(1, static_cast<int>(seconds / 2 / 20e-6));  // ~20 us a round
        double read_seconds[2] = {0.0, 0.0};
        arrived = 0;
        std::thread worker(rounds, 1, other, count, &read_seconds[1]);
        rounds(0, other, count, &read_seconds[0]);
        worker.join();
        return (read_seconds[0] + read_seconds[1]) / 2 / count / 256 * 1e9;
    };
    CoreToCore result;
    result.own_ns_per_kib = measure(false);
    result.other_ns_per_kib = measure(true);
    return result;
}

namespace detail {

std::string cpu_name() {
#if defined(QTK_X86_64)
    if (cpuid(0x80000000u, 0).eax < 0x80000004u) {
        return "x86-64";
    }
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
        const Cpuid r = cpuid(0x80000002u + i, 0);
        const uint32_t words[4] = {r.eax, r.ebx, r.ecx, r.edx};
        std::memcpy(brand + 16 * i, words, sizeof words);
    }
    std::string name(brand);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    return name;
#elif defined(QTK_AARCH64_LINUX)
    // MIDR_EL1 names the core design (implementer, part number, variant, revision); Linux emulates
    // its read from user space where HWCAP_CPUID says so.
    if ((getauxval(AT_HWCAP) & kHwcapCpuid) == 0) {
        return "aarch64";
    }
    uint64_t midr = 0;
    __asm__ volatile("mrs %0, MIDR_EL1" : "=r"(midr));
    char name[96];
    std::snprintf(name, sizeof name, "aarch64 implementer 0x%02x part 0x%03x r%dp%d",
                  unsigned(midr >> 24 & 0xff), unsigned(midr >> 4 & 0xfff),
                  int(midr >> 20 & 0xf), int(midr & 0xf));
    return name;
#elif defined(__aarch64__)
    return "aarch64";
#else
    return "unknown CPU";
#endif
}

IsaLevel isa_cap() {
    const char* value = std::getenv("QTK_ISA");
    if (value == nullptr || *value == '\0') {
        return kIsaTop;
    }
    std::string valid;
    for (IsaLevel level : kIsaLevels) {
        if (std::string(value) == isa_name(level)) {
            return level;
        }
        valid += std::string(valid.empty() ? "" : ", ") + isa_name(level);
    }
    throw Error("QTK_ISA='" + std::string(value) + "' is not an ISA level; use one of: " + valid);
}

}  // namespace detail
}  // namespace qtk
