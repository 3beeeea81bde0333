"""Issue 20, running on devices: the runtime built by clang with -Werror (gcc's -Werror build is the
shared runtime_build); cross-compiled for 64-bit ARM by gcc and by clang (-Werror), its ctest
under qemu-aarch64 at two CPUs; and torchvision models run by `qtk_run --input --output`, whose
output bytes on x86 equal the Python runtime's and the Quantized reference's and, under qemu, on
aarch64 equal x86's.

The models are small-input variants (32x32) chosen to cover the op kinds between them: resnet18
(strided 7x7 and 3x3 convs, residual adds, max pooling), mobilenet_v3_small (depthwise convs,
hardswish and hardsigmoid tables, squeeze-excite multiplies, adaptive average pooling, linear)
and shufflenet_v2_x0_5 (chunk, concat, channel shuffle's view/transpose).

Needs apt's qemu-user, g++-aarch64-linux-gnu and clang (conftest.APT_PACKAGES): without them these
tests skip, except in CI (CI=true), where they fail."""
import numpy as np
import pytest
import torch
import torchvision

import qtk
from conftest import ROOT, assert_not_degenerate, calibrated, cmake_build, require, run_command
from model_zoo.training import reestimate_batchnorm

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

MODELS = ["resnet18", "mobilenet_v3_small", "shufflenet_v2_x0_5"]
SIZE = 32
BATCH = 2
# qemu's "max" has every ARMv8/v9 extension it emulates (dot product included); cortex-a53 is a
# plain ARMv8.0-A core, the floor a NEON kernel may assume.
QEMU_CPUS = ["max", "cortex-a53"]
QEMU = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", "-cpu"]


@pytest.fixture(scope="module")
def arm_gcc_build(tmp_path_factory):
    require("aarch64-linux-gnu-g++", "qemu-aarch64")
    return cmake_build(tmp_path_factory.mktemp("aarch64_gcc"), "-DQTK_WERROR=ON",
                       f"-DCMAKE_TOOLCHAIN_FILE={ROOT}/deploy_runtime/cmake/aarch64-linux-gnu.cmake")


@pytest.fixture(scope="module")
def arm_clang_build(tmp_path_factory):
    require("clang++", "aarch64-linux-gnu-g++", "qemu-aarch64")
    # The README's relative path (from the repository root) must work too.
    return cmake_build(tmp_path_factory.mktemp("aarch64_clang"), "-DQTK_WERROR=ON",
                       "-DCMAKE_TOOLCHAIN_FILE=deploy_runtime/cmake/aarch64-linux-gnu-clang.cmake")


def test_clang_build_is_warning_free_and_passes_ctest(tmp_path):
    require("clang++")
    build = cmake_build(tmp_path / "clang", "-DQTK_WERROR=ON", "-DCMAKE_CXX_COMPILER=clang++")
    output = run_command(["ctest", "--test-dir", build, "--output-on-failure", "-j", "2"])
    assert "100% tests passed" in output


@pytest.mark.parametrize("cpu", QEMU_CPUS)
def test_aarch64_ctest_passes_under_qemu(arm_gcc_build, cpu):
    # QTK_QEMU_CPU only changes the emulator command ctest runs: a reconfigure, no rebuild.
    run_command(["cmake", "-S", ROOT / "deploy_runtime", "-B", arm_gcc_build, f"-DQTK_QEMU_CPU={cpu}"])
    assert f'"-cpu" "{cpu}"' in (arm_gcc_build / "CTestTestfile.cmake").read_text()
    output = run_command(["ctest", "--test-dir", arm_gcc_build, "--output-on-failure", "-j", "2"])
    assert "100% tests passed" in output


def test_aarch64_clang_build_runs_under_qemu(arm_clang_build):
    output = run_command(["ctest", "--test-dir", arm_clang_build, "--output-on-failure",
                          "-R", "^(test_arithmetic|test_kernels|test_loader)$"])
    assert "100% tests passed" in output and "out of 3" in output


@pytest.fixture(scope="module")
def exported_models(tmp_path_factory):
    """name -> (.qmodel path, float32 input .npy path, the Quantized reference's int8 output)."""
    directory = tmp_path_factory.mktemp("device_models")
    models = {}
    for name in MODELS:
        torch.manual_seed(0)
        model = reestimate_batchnorm(getattr(torchvision.models, name)(num_classes=10),
                                     (4, 3, SIZE, SIZE))
        quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE) for _ in range(2)])
        path = directory / f"{name}.qmodel"
        qtk.export(quantized, torch.randn(1, 3, SIZE, SIZE), path)
        x = torch.randn(BATCH, 3, SIZE, SIZE)
        np.save(directory / f"{name}_input.npy", x.numpy())
        with qtk.int8_outputs(quantized), torch.no_grad():
            reference = quantized(x)
        models[name] = (path, directory / f"{name}_input.npy", reference.numpy())
    return models


def qtk_run_outputs(qtk_run, models, directory, prefix=()):
    """name -> the int8 output qtk_run --input --output writes for that model."""
    outputs = {}
    for name, (path, input_path, _) in models.items():
        output_path = directory / f"{name}_output.npy"
        run_command([*prefix, qtk_run, path, "--iters", "0", "--input", input_path,
                     "--output", output_path])
        outputs[name] = np.load(output_path)
    return outputs


@pytest.fixture(scope="module")
def x86_outputs(runtime_build, exported_models, tmp_path_factory):
    return qtk_run_outputs(runtime_build / "qtk_run", exported_models,
                           tmp_path_factory.mktemp("x86_outputs"))


def test_qtk_run_outputs_equal_python_runtime_and_reference(exported_models, x86_outputs):
    ops = set()
    for name, (path, input_path, reference) in exported_models.items():
        session = qtk.runtime.load(path)
        ops.update(qtk.runtime.load(path, optimize_graph=False).model.op_names)
        python = session.run(torch.from_numpy(np.load(input_path)), output="int8").numpy()
        got = x86_outputs[name]
        assert got.dtype == np.int8 and got.shape == (BATCH, 10), name
        assert np.array_equal(got, python), f"{name}: qtk_run differs from the Python runtime"
        assert np.array_equal(got, reference), f"{name}: qtk_run differs from the reference"
        assert_not_degenerate(got, min_distinct=5)
    # The op kinds the aarch64 comparison below covers.
    assert {"conv2d", "add", "max_pool2d", "linear", "concat"} <= ops, sorted(ops)


@pytest.mark.parametrize("toolchain, cpu", [("gcc", "max"), ("gcc", "cortex-a53"),
                                            ("clang", "max")])
def test_aarch64_outputs_equal_x86(request, exported_models, x86_outputs, toolchain, cpu,
                                   tmp_path):
    build = request.getfixturevalue(f"arm_{toolchain}_build")
    outputs = qtk_run_outputs(build / "qtk_run", exported_models, tmp_path, prefix=[*QEMU, cpu])
    for name, got in outputs.items():
        assert got.dtype == np.int8 and got.shape == x86_outputs[name].shape, name
        assert np.array_equal(got, x86_outputs[name]), (
            f"{name}: aarch64 ({toolchain}, qemu -cpu {cpu}) output differs from x86's")
        assert_not_degenerate(got, min_distinct=5)
