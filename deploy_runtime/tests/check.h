// A tiny check macro set for the ctest executables (no test framework dependency). Checks keep
// going after a failure; main returns check_report().
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <string>

#include "qtk/runtime.h"

namespace qtk_test {

// Sets an environment variable the runtime reads at model load (QTK_ISA, QTK_CONV_ALGO); nullptr
// gives it back the value the process started with (or removes it), so that a cap the caller set
// (QTK_ISA=avx2 ctest) holds again for the checks that follow.
inline void set_env(const char* key, const char* value) {
    static std::map<std::string, std::optional<std::string>> started_with;
    if (started_with.count(key) == 0) {
        const char* now = std::getenv(key);
        started_with[key] = now ? std::optional<std::string>(now) : std::nullopt;
    }
    const std::optional<std::string>& initial = started_with[key];
    if (value != nullptr) {
        setenv(key, value, 1);
    } else if (initial) {
        setenv(key, initial->c_str(), 1);
    } else {
        unsetenv(key);
    }
}

inline int& failure_count() {
    static int count = 0;
    return count;
}

inline void report_failure(const char* file, int line, const std::string& what) {
    std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
    ++failure_count();
}

inline int check_report() {
    if (failure_count() == 0) {
        std::printf("all checks passed\n");
        return 0;
    }
    std::fprintf(stderr, "%d check(s) failed\n", failure_count());
    return 1;
}

}  // namespace qtk_test

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) qtk_test::report_failure(__FILE__, __LINE__, #cond); \
    } while (0)

#define CHECK_EQ(a, b)                                                                           \
    do {                                                                                         \
        const auto check_a_ = (a);                                                               \
        const auto check_b_ = (b);                                                               \
        if (!(check_a_ == check_b_)) {                                                           \
            qtk_test::report_failure(__FILE__, __LINE__,                                         \
                                     std::string(#a " == " #b ": ") + std::to_string(check_a_) + \
                                         " vs " + std::to_string(check_b_));                     \
        }                                                                                        \
    } while (0)

// The statement must throw qtk::Error whose message contains `substring`.
#define CHECK_THROWS_WITH(statement, substring)                                               \
    do {                                                                                      \
        std::string check_message_;                                                           \
        bool check_threw_ = false;                                                            \
        try {                                                                                 \
            statement;                                                                        \
        } catch (const qtk::Error& e) {                                                       \
            check_threw_ = true;                                                              \
            check_message_ = e.what();                                                        \
        }                                                                                     \
        if (!check_threw_) {                                                                  \
            qtk_test::report_failure(__FILE__, __LINE__, "no qtk::Error from " #statement);   \
        } else if (check_message_.find(substring) == std::string::npos) {                     \
            qtk_test::report_failure(                                                         \
                __FILE__, __LINE__,                                                           \
                std::string("message '") + check_message_ + "' lacks '" + (substring) + "'"); \
        }                                                                                     \
    } while (0)
