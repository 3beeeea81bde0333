// Prints the QTK_ISA levels this CPU runs, one a line, lowest first ("scalar" always): the test
// suite runs the sanitized ctest capped at each (tests/test_runtime_cmake.py).
#include <cstdio>

#include "cpu_features.h"

int main() {
    for (qtk::detail::IsaLevel level : qtk::detail::kIsaLevels) {
        if (qtk::detail::cpu_supports(level)) {
            std::printf("%s\n", qtk::detail::isa_name(level));
        }
    }
    return 0;
}
