"""Contract 6 of docs/contracts.md: deploy_runtime builds with CMake and a C++17 compiler alone
(with -Werror), and its ctest passes, also built with AddressSanitizer and UndefinedBehaviorSanitizer
at every QTK_ISA level the CPU runs (contract 4's "never a crash" for the loader, its fuzz driver
and every kernel sweep); libFuzzer finds no crash in a bounded run; the command-line runner runs an
exported model, on inputs from .npy files too. (Other compilers and aarch64: test_devices.py.)"""
import subprocess
from pathlib import Path

import numpy as np
import torch
from torch import nn

import qtk
from conftest import calibrated, cmake_build, missing, require, run_command as _run


def test_ctest_passes(runtime_build):
    output = _run(["ctest", "--test-dir", runtime_build, "--output-on-failure"])
    assert "100% tests passed" in output


def test_ctest_passes_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    # At the CPU's own level, then capped (QTK_ISA) at each lower level it runs (qtk_isa_levels
    # lists them), where the registry chooses other kernels and the sweeps pin only the algorithms
    # the cap allows; micro-kernel sweeps call every level the CPU has at each cap. Any report
    # fails its test (QTK_SANITIZE: -fno-sanitize-recover).
    build = cmake_build(tmp_path / "sanitized", "-DQTK_SANITIZE=ON")
    levels = _run([build / "qtk_isa_levels"]).split()
    assert levels[0] == "scalar"
    for cap in [None, *levels[:-1]]:
        output = _run(["ctest", "--test-dir", build, "--output-on-failure", "-j", "2"],
                      env=None if cap is None else {"QTK_ISA": cap})
        assert "100% tests passed" in output, f"QTK_ISA={cap}"


def _op_kinds_model():
    """One small model with a kernel of each family (fuzz seeds): conv + BatchNorm + ReLU6,
    depthwise, 1x1, hardswish and sigmoid tables, add, mul, concat, max and average pooling,
    linear."""
    class OpKinds(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6())
            self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.pointwise = nn.Conv2d(8, 8, 1)
            self.hardswish = nn.Hardswish()
            self.sigmoid = nn.Sigmoid()
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(16, 5)

        def forward(self, x):
            x = self.conv(x)
            y = self.hardswish(self.depthwise(x))
            x = x + self.pointwise(y)
            x = self.pool(torch.cat([x, y * self.sigmoid(y)], 1))
            return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))
    return OpKinds().eval()


def test_libfuzzer_bounded_run_finds_no_crash(runtime_build, tmp_path):
    """libFuzzer on the loader and one run of what loads, the runtime instrumented (coverage, ASan,
    UBSan; QTK_BUILD_LIBFUZZER), for 60 seconds, seeded with qtk_write_test_models' files and
    exported models of every op family, int8, mixed int8/float and float. Any crash, sanitizer
    report or exception other than qtk::Error fails it."""
    require("clang++")
    resource_dir = Path(_run(["clang++", "-print-resource-dir"]).strip())
    if not list(resource_dir.glob("lib/*/libclang_rt.fuzzer*.a")):
        missing(f"libFuzzer's runtime (in {resource_dir})")
    build = cmake_build(tmp_path / "libfuzzer", "-DCMAKE_CXX_COMPILER=clang++",
                        "-DQTK_BUILD_LIBFUZZER=ON", "-DQTK_BUILD_TESTS=OFF",
                        "-DQTK_BUILD_TOOLS=OFF", targets=["qtk_fuzz_loader_libfuzzer"])
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    _run([runtime_build / "qtk_write_test_models", seeds])
    example = torch.randn(1, 3, 8, 8)
    calibration = [torch.randn(2, 3, 8, 8)]
    qtk.export(calibrated(_op_kinds_model(), calibration), example, seeds / "op_kinds.qmodel")
    prepared = qtk.prepare_ptq(_op_kinds_model(), qtk.QConfigMapping(
        qtk.default_ptq_qconfig, by_type={nn.Linear: None, nn.Hardswish: None}))
    with torch.no_grad():
        prepared(calibration[0])
    qtk.export(qtk.convert(prepared), example, seeds / "mixed.qmodel")
    qtk.export(_op_kinds_model(), example, seeds / "float.qmodel")
    assert len(list(seeds.iterdir())) >= 5
    corpus = tmp_path / "corpus"  # new inputs go here; the seeds stay as they are
    corpus.mkdir()
    result = subprocess.run(
        [str(build / "qtk_fuzz_loader_libfuzzer"), str(corpus), str(seeds), "-max_total_time=60",
         "-timeout=60", "-rss_limit_mb=4096", f"-artifact_prefix={tmp_path}/",
         "-print_final_stats=1"], capture_output=True, text=True, timeout=600)
    log = result.stderr[-6000:]
    assert result.returncode == 0, f"libFuzzer found a failure:\n{log}"
    assert "Done" in result.stderr and "stat::number_of_executed_units" in result.stderr, log


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


def test_command_line_runner_reads_and_writes_npy(runtime_build, tmp_path):
    """qtk_run --input/--output: float32 or int8 .npy in, or raw bytes; the runtime's int8 bytes
    (or float32 values) out as .npy, equal to the Python runtime's; every bad input is refused
    with a message that names it and the fix, never a crash."""
    model = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    path = tmp_path / "m.qmodel"
    qtk.export(calibrated(model.eval(), [torch.randn(4, 2, 6, 6)]), torch.randn(1, 2, 6, 6), path)
    session = qtk.runtime.load(path)
    x = torch.randn(3, 2, 6, 6)
    want = session.run(x, output="int8").numpy()

    def qtk_run(*args):
        return subprocess.run([str(runtime_build / "qtk_run"), str(path), "--iters", "0",
                               *map(str, args)], capture_output=True, text=True)

    def output_of(input_path):
        result = qtk_run("--input", input_path, "--output", tmp_path / "out.npy")
        assert result.returncode == 0, result.stderr
        return np.load(tmp_path / "out.npy")

    np.save(tmp_path / "float.npy", x.numpy())
    got = output_of(tmp_path / "float.npy")
    assert got.dtype == np.int8 and got.shape == (3, 3) and np.array_equal(got, want)
    x_int8 = np.random.randint(-128, 128, size=(2, 2, 6, 6)).astype(np.int8)
    np.save(tmp_path / "int8.npy", x_int8)
    x_int8.tofile(tmp_path / "raw.bin")
    assert np.array_equal(output_of(tmp_path / "int8.npy"), output_of(tmp_path / "raw.bin"))

    np.save(tmp_path / "shape.npy", np.zeros((3, 2, 6, 5), np.float32))
    np.save(tmp_path / "float64.npy", np.zeros((3, 2, 6, 6)))
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.zeros((3, 2, 6, 6), np.float32)))
    (tmp_path / "short.bin").write_bytes(b"\0" * 71)
    (tmp_path / "cut.npy").write_bytes((tmp_path / "int8.npy").read_bytes()[:-1])
    for args, expected in [
        (["--input", tmp_path / "shape.npy"], "takes [N, 2, 6, 6]"),
        (["--input", tmp_path / "float64.npy"], "float32"),
        (["--input", tmp_path / "fortran.npy"], "ascontiguousarray"),
        (["--input", tmp_path / "short.bin"], "72 bytes"),
        (["--input", tmp_path / "cut.npy"], "data bytes"),
        (["--input", tmp_path / "missing.npy"], "cannot open"),
        (["--input", tmp_path / "int8.npy", "--input", tmp_path / "int8.npy"], "one --input per input"),
        (["--input", tmp_path / "int8.npy", "--batch", "2"], "give one or the other"),
    ]:
        result = qtk_run(*args)
        assert result.returncode == 1 and expected in result.stderr, (args, result.stderr)
