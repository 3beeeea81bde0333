"""Contract 6 of docs/contracts.md: deploy_runtime builds with CMake and a C++17 compiler alone, and its ctest passes,
also built with AddressSanitizer and UndefinedBehaviorSanitizer (contract 4's "never a crash" for the
loader, its fuzz driver and every kernel sweep); the command-line runner runs an exported model."""
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn

import qtk
from conftest import calibrated

ROOT = Path(__file__).resolve().parents[1]


def _run(command):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def runtime_build(tmp_path_factory):
    build = tmp_path_factory.mktemp("runtime")
    _run(["cmake", "-S", ROOT / "deploy_runtime", "-B", build, "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release"])
    _run(["cmake", "--build", build, "-j", "2"])
    return build


def test_ctest_passes(runtime_build):
    output = _run(["ctest", "--test-dir", runtime_build, "--output-on-failure"])
    assert "100% tests passed" in output


def test_ctest_passes_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    # One run covers every ISA level this CPU has: the kernel sweeps run each level's kernels
    # themselves. Any report fails its test (QTK_SANITIZE: -fno-sanitize-recover).
    build = tmp_path / "sanitized"
    _run(["cmake", "-S", ROOT / "deploy_runtime", "-B", build, "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release", "-DQTK_SANITIZE=ON"])
    _run(["cmake", "--build", build, "-j", "2"])
    output = _run(["ctest", "--test-dir", build, "--output-on-failure"])
    assert "100% tests passed" in output


def test_command_line_runner(runtime_build, tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    path = tmp_path / "m.qmodel"
    qtk.export(calibrated(model.eval(), [torch.randn(2, 1, 9, 9)]), torch.randn(1, 1, 9, 9), path)
    output = _run([runtime_build / "qtk_run", path, "--threads", "2", "--batch", "3", "--iters", "5"])
    assert "arena" in output.lower()
    bad = tmp_path / "bad.qmodel"
    bad.write_bytes(b"garbage")
    result = subprocess.run([str(runtime_build / "qtk_run"), str(bad)], capture_output=True, text=True)
    message = (result.stdout + result.stderr).lower()
    assert result.returncode == 1 and ("magic" in message or "header" in message)
