# Cross-compiles the runtime for 64-bit ARM Linux with clang (--target=aarch64-linux-gnu), against
# Debian's aarch64 sysroot /usr/aarch64-linux-gnu and the libstdc++ and libgcc of its cross gcc
# (clang's driver finds them under /usr/lib/gcc-cross/aarch64-linux-gnu/<version>) and linking with
# its aarch64-linux-gnu-ld. Needs apt-get install clang g++-aarch64-linux-gnu qemu-user:
#   cmake -S deploy_runtime -B build/arm-clang -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=$PWD/deploy_runtime/cmake/aarch64-linux-gnu-clang.cmake
#   cmake --build build/arm-clang && ctest --test-dir build/arm-clang
# A relative path and -DQTK_QEMU_CPU work as in aarch64-linux-gnu.cmake. -DQTK_CLANG=clang++-14
# picks a clang other than the one on PATH.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
if(NOT QTK_CLANG)
  set(QTK_CLANG clang++)
endif()
set(CMAKE_CXX_COMPILER ${QTK_CLANG})
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu-common.cmake)
