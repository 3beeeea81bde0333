# What the two aarch64 toolchain files share: Debian's aarch64 sysroot for find_* and qemu
# user-mode emulation for ctest (CMAKE_CROSSCOMPILING_EMULATOR), on the CPU QTK_QEMU_CPU names.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(QTK_QEMU_CPU max CACHE STRING "The CPU qemu-aarch64 emulates for ctest (qemu-aarch64 -cpu help)")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu ${QTK_QEMU_CPU})
