#!/usr/bin/env bash
# Runs the kernel tests under qemu user-mode emulation at lower ISA levels than the host's, so the
# runtime CPU detection and every level's kernels are checked on one machine:
#   -cpu max      AVX2 (qemu 7.2 emulates no AVX-512 and no AVX-VNNI)
#   -cpu Nehalem  SSE4.2 only: the reference kernels alone
# Emulation is for correctness, not speed. Needs qemu-x86_64 (Debian: apt-get install qemu-user).
# Usage: deploy_runtime/tests/run_emulated.sh BUILD_DIR [TEST ...]   (default: test_conv2d_algos
# test_linear_algos test_kernels test_data_movement_algos test_graph_passes test_float_conv_algos)
set -euo pipefail
build_dir=${1:?usage: $0 BUILD_DIR [TEST ...]}
shift
if (($# == 0)); then
    set -- test_conv2d_algos test_linear_algos test_kernels test_data_movement_algos test_graph_passes \
        test_float_conv_algos
fi
command -v qemu-x86_64 >/dev/null || { echo "qemu-x86_64 not found (apt-get install qemu-user)"; exit 1; }

failed=0
for cpu in max Nehalem; do
    for t in "$@"; do
        echo "=== qemu-x86_64 -cpu $cpu $t"
        if ! qemu-x86_64 -cpu "$cpu" "$build_dir/$t"; then
            echo "FAILED: $t under -cpu $cpu"
            failed=1
        fi
    done
done
exit $failed
