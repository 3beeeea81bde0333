"""qtk.runtime.load(path, device=...) (docs/cuda.md): the file's nodes on qtk's CUDA kernels give
the CPU session's bytes. Without a GPU the device is "cuda-emulated", the kernels' host twins (the
GPU's own tile code run thread by thread), so the plan, the NCHW4 layouts, the weight packing and
the device arena are held here; deploy_runtime/tests/test_device_session.cpp and benchmarks/cuda.py
do the same on a GPU."""
import numpy as np
import pytest
import torch
import torchvision
from torch import nn

import qtk
from conftest import assert_not_degenerate
from test_torchvision_models import qat_convert

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "mobilenet_v3_small",
                                  "shufflenet_v2_x0_5"])
def test_torchvision_models_on_the_emulated_cuda_device_give_the_cpu_bytes(name):
    torch.manual_seed(0)
    quantized = qat_convert(getattr(torchvision.models, name)(num_classes=10), 32, steps=1)
    qmodel = qtk.export(quantized, torch.randn(1, 3, 32, 32))
    cpu = qtk.runtime.load(qmodel)
    device = qtk.runtime.load(qmodel, device="cuda-emulated")
    assert device.device_name.startswith("emulated CUDA")
    assert "conv2d_int8_mma" in device.kernels
    if name != "shufflenet_v2_x0_5":
        assert device.kernels.count("add_int8") > 0
    if name != "resnet18":
        assert "conv2d_int8_depthwise" in device.kernels
    if name == "mobilenet_v3_small":  # hardswish and hardsigmoid tables, squeeze-excite scales
        assert "lut_int8" in device.kernels and "mul_int8" in device.kernels
    if name == "shufflenet_v2_x0_5":  # channel shuffles' permutes and the branches' splits
        assert device.kernels.count("gather_channels_int8") >= 2 * 3
    for batch in (1, 3):
        x = torch.randn(batch, 3, 32, 32)
        want = cpu.run(x, output="int8")
        got = device.run(x, output="int8")
        assert torch.equal(got, want), f"batch {batch}: the device differs from the CPU"
        with qtk.int8_outputs(quantized), torch.no_grad():
            assert torch.equal(got, quantized(x))
        assert torch.equal(device.run(x), cpu.run(x))  # float outputs, dequantized alike
    assert_not_degenerate(want, min_distinct=8)
    assert device.arena_bytes > 0


def test_device_errors_name_the_fix():
    torch.manual_seed(0)
    upsampling = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                               nn.Upsample(scale_factor=2))
    x = torch.randn(4, 3, 8, 8)
    prepared = qtk.prepare_ptq(upsampling.eval(), example_inputs=(x[:1],))
    qmodel = qtk.export(qtk.convert(qtk.calibrate(prepared, [x])), x[:1])
    with pytest.raises(qtk.runtime.QtkError,
                       match=r"resize_nearest.* has no CUDA kernel yet .* qtk::Session on the CPU"):
        qtk.runtime.load(qmodel, device="cuda-emulated")
    with pytest.raises(qtk.runtime.QtkError, match="device must be 'cpu', 'cuda'"):
        qtk.runtime.load(qmodel, device="gpu")
    with pytest.raises(qtk.runtime.QtkError, match="CPU session options"):
        qtk.runtime.load(qmodel, device="cuda-emulated", profile=True)
    try:
        qtk.runtime.load(qmodel, device="cuda")
    except qtk.runtime.QtkError as e:  # built without CUDA, no GPU, or the op above
        assert any(fix in str(e) for fix in ("CMAKE_ARGS=-DQTK_CUDA=ON", "run on the CPU",
                                             "qtk::Session on the CPU")), str(e)


def test_device_session_checks_its_inputs():
    torch.manual_seed(0)
    quantized = qat_convert(torchvision.models.resnet18(num_classes=10), 32, steps=1)
    device = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 32, 32)),
                              device="cuda-emulated")
    with pytest.raises(qtk.runtime.QtkError, match=r"takes \[N, 3, 32, 32\] int8"):
        device.run(np.zeros((1, 3, 32, 31), np.int8))
    with pytest.raises(qtk.runtime.QtkError, match="takes 1 input"):
        device.run()
    with pytest.raises(qtk.runtime.QtkError, match="keeps no intermediates"):
        device.intermediates()


def test_fast_run_on_the_device_keys_its_cache_by_the_device(tmp_path):
    torch.manual_seed(0)
    quantized = qat_convert(torchvision.models.resnet18(num_classes=10), 32, steps=1)
    qmodel = qtk.export(quantized, torch.randn(1, 3, 32, 32))
    cache = tmp_path / "device.cache"
    x = torch.randn(2, 3, 32, 32)
    want = qtk.runtime.load(qmodel).run(x, output="int8")
    searched = qtk.runtime.load(qmodel, device="cuda-emulated", fast_run="search",
                                fast_run_cache=cache)
    assert torch.equal(searched.run(x, output="int8"), want)
    assert "emulated CUDA" in cache.read_text() and "conv2d x[2, 3, 32, 32]" in cache.read_text()
    used = qtk.runtime.load(qmodel, device="cuda-emulated", fast_run="use", fast_run_cache=cache)
    assert torch.equal(used.run(x, output="int8"), want)
    assert used.kernels == searched.kernels


def test_run_on_device_takes_tensors_in_the_devices_memory():
    """Device pointers in and out (the emulated device's memory is the host's, so CPU tensors):
    the same bytes as run, and tensors of the wrong kind are named."""
    torch.manual_seed(0)
    quantized = qat_convert(torchvision.models.resnet18(num_classes=10), 32, steps=1)
    qmodel = qtk.export(quantized, torch.randn(1, 3, 32, 32))
    device = qtk.runtime.load(qmodel, device="cuda-emulated")
    x = torch.randint(-128, 128, (2, 3, 32, 32), dtype=torch.int8)
    assert device.output_shapes(2) == [(2, 10)]
    y = torch.zeros(2, 10, dtype=torch.int8)
    device.run_on_device([x], [y])
    want = qtk.runtime.load(qmodel).run(x.numpy(), output="int8")
    assert torch.equal(y, torch.as_tensor(want))
    assert_not_degenerate(y, min_distinct=8)
    with pytest.raises(qtk.runtime.QtkError, match=r"each input must be a contiguous int8 torch "
                                                   r"tensor on cpu, got torch.float32"):
        device.run_on_device([x.float()], [y])
    with pytest.raises(qtk.runtime.QtkError, match=r"outputs must have shapes \[\(2, 10\)\]"):
        device.run_on_device([x], [torch.zeros(1, 10, dtype=torch.int8)])
