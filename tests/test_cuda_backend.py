"""The CUDA backend's checks that need no GPU (docs/cuda.md): nvcc compiles its kernels for sm_80
and sm_90 with every warning an error, and the GPU device (qtk_cuda) and the tools that run models
and layers on it build against them. Their tile code, run thread by thread on the CPU against the
reference conv, is the ctest test_cuda_host, which test_runtime_cmake.py's ctest and sanitizer runs
include. A machine without nvcc skips the compile, CI included: the runtime builds and tests
without CUDA."""
import re
import shutil

import pytest

from conftest import cmake_build


def test_cuda_kernels_compile_for_sm_80_and_sm_90(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found: the CUDA kernels are not compiled on this machine")
    build = cmake_build(tmp_path, "-DQTK_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=80;90",
                        "-DQTK_WERROR=ON", "-DQTK_BUILD_TESTS=OFF", "-DQTK_BUILD_TOOLS=ON",
                        targets=["qtk_cuda_kernels", "qtk_cuda", "qtk_cuda_models",
                                 "qtk_cuda_layers"])
    library = (build / "libqtk_cuda_kernels.a").read_bytes()
    assert set(re.findall(rb"sm_\d+", library)) >= {b"sm_80", b"sm_90"}
