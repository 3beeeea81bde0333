"""Shared helpers: quantize a float model by PTQ or QAT, export it, run it in the runtime; build
deploy_runtime with CMake; require the tools the device tests need."""
import functools
import importlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import qtk

ROOT = Path(__file__).resolve().parents[1]

# In CI (CI=true) a missing tool fails its test: the device tests must not pass by skipping.
IN_CI = os.environ.get("CI") == "true"
APT_PACKAGES = "qemu-user g++-aarch64-linux-gnu clang libclang-rt-14-dev libfuzzer-14-dev"


def missing(what, fix=f"apt-get install --no-install-recommends {APT_PACKAGES}"):
    """Skips the test (or the module, where it is missed at import) for lack of ``what``, or
    fails it in CI, where .ci/run installs everything."""
    message = f"{what} not found: {fix} (.ci/run does this in CI)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message, allow_module_level=True)


def require(*tools):
    """Skips the test (fails it in CI) unless every one of ``tools`` is on PATH."""
    absent = [tool for tool in tools if shutil.which(tool) is None]
    if absent:
        missing(", ".join(absent))


def require_module(name):
    """The module ``name``; skips the test (fails it in CI) where it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"the Python module {name}", "pip install -e '.[test]'")


def run_command(command, env=None, timeout=None):
    """stdout of ``command``; a non-zero exit fails the test with its output."""
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                            env=None if env is None else {**os.environ, **env}, timeout=timeout)
    assert result.returncode == 0, (f"{' '.join(map(str, command))} failed:\n"
                                    f"{result.stdout[-8000:]}\n{result.stderr[-8000:]}")
    return result.stdout


def cmake_build(build, *options, targets=()):
    """Configures deploy_runtime/ alone into ``build`` (Release, Ninja) and builds ``targets``
    (default all), two jobs."""
    run_command(["cmake", "-S", ROOT / "deploy_runtime", "-B", build, "-G", "Ninja",
                 "-DCMAKE_BUILD_TYPE=Release", *options])
    run_command(["cmake", "--build", build, "-j", "2",
                 *[arg for target in targets for arg in ("--target", target)]])
    return build


@pytest.fixture(scope="session")
def runtime_build(tmp_path_factory):
    """The runtime built with the default compiler and -Werror (QTK_WERROR): ctest, qtk_run."""
    return cmake_build(tmp_path_factory.mktemp("runtime"), "-DQTK_WERROR=ON")


def calibrated(float_model, calibration_batches):
    """PTQ: prepare, run the calibration batches, convert."""
    prepared = qtk.prepare_ptq(float_model)
    with torch.no_grad():
        for batch in calibration_batches:
            prepared(batch)
    return qtk.convert(prepared)


@functools.lru_cache(maxsize=None)
def trained_small_cnn(epochs=1, train_size=None):
    """The demo's small CNN trained ``epochs`` epochs (Adam, lr 3e-3) on MNIST 5k's training split
    (its first ``train_size`` digits), on one torch thread: on two, one seed gave different models
    from run to run. Returns ``(model in eval mode, (train images, labels), (test images,
    labels))``; cached, shared by the modules that ask for the same model, so do not change it."""
    from model_zoo.data import mnist_5k
    from model_zoo.mnist import small_cnn
    from model_zoo.training import train

    (train_x, train_y), test = mnist_5k()
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = train(small_cnn(), (train_x[:train_size], train_y[:train_size]), epochs, 3e-3,
                      "float")
    finally:
        torch.set_num_threads(threads)
    return model.eval(), (train_x, train_y), test


def reference_and_runtime(quantized, example, inputs, threads=1):
    """(reference int8 output, runtime int8 output) for ``inputs`` through an exported model."""
    session = qtk.runtime.load(qtk.export(quantized, example), threads=threads)
    with qtk.int8_outputs(quantized), torch.no_grad():
        reference = quantized(inputs)
    return reference, session.run(inputs, output="int8")


def assert_not_degenerate(values, min_distinct=2):
    distinct = torch.unique(torch.as_tensor(values)).numel()
    assert distinct >= min_distinct, f"output is degenerate: only {distinct} distinct int8 values"


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a module's tests: small layers run up to ten times faster than on
    two threads that another process competes for."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    np.random.seed(0)
