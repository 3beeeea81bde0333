# Cross-compiles the runtime for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu; ctest then
# runs every test under qemu user-mode emulation (apt-get install g++-aarch64-linux-gnu qemu-user):
#   cmake -S deploy_runtime -B build/arm -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=deploy_runtime/cmake/aarch64-linux-gnu.cmake
#   cmake --build build/arm && ctest --test-dir build/arm
# A relative path: CMake looks it up in the build directory, then in the source directory
# (deploy_runtime/), not in the directory cmake runs in; deploy_runtime/CMakeLists.txt also tries
# the repository root, so the line above works from there. An absolute path works from anywhere.
# -DQTK_QEMU_CPU=<name> picks the emulated CPU (default max: every extension qemu knows;
# cortex-a53 is a plain ARMv8.0-A core without dot product). Changing it needs only a reconfigure.
# Emulation checks correctness, not speed. Clang instead of gcc: aarch64-linux-gnu-clang.cmake.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu-common.cmake)
