# Cross-compiles the runtime for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu; ctest then
# runs every test under qemu user-mode emulation (apt-get install g++-aarch64-linux-gnu qemu-user):
#   cmake -S deploy_runtime -B build/arm -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=deploy_runtime/cmake/aarch64-linux-gnu.cmake
#   cmake --build build/arm && ctest --test-dir build/arm
# Emulation checks correctness, not speed.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu max)
