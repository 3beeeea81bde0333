"""Mixed precision (docs/quantization_spec.md section 15): a block left float runs in the runtime
between a dequantize and a quantize; int8 parts are exact, float parts within tolerance."""
import numpy as np
import pytest
import torch
from torch import nn

import qtk


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8),
                                   nn.ReLU6(), nn.Conv2d(8, 8, 1), nn.Hardswish())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 6))

    def forward(self, x):
        y = self.stem(x)
        y = self.block(y) + y
        return self.head(y)


def _quantize(float_pattern):
    torch.manual_seed(0)
    model = Net().eval()
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_name={float_pattern: None})
    prepared = qtk.prepare_ptq(model, mapping)
    with torch.no_grad():
        for _ in range(3):
            prepared(torch.randn(4, 3, 10, 10))
    return qtk.convert(prepared)


def test_float_block_in_the_middle():
    quantized = _quantize("block")
    assert isinstance(quantized.get_submodule("block.0"), nn.Sequential)  # kept float (fused)
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 10, 10)))
    ops = session.model.op_names
    assert "quantize" in ops and "dequantize" in ops and "conv2d" in ops
    x = torch.randn(5, 3, 10, 10)
    with qtk.int8_outputs(quantized), torch.no_grad():
        reference = quantized(x).to(torch.int32)
    runtime = session.run(x, output="int8").to(torch.int32)
    # float rounding inside the block may move a quantized value by one step (spec 15)
    assert (reference - runtime).abs().max() <= 2
    assert (reference == runtime).float().mean() >= 0.9


def test_float_head_output_within_tolerance():
    quantized = _quantize("head")
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 10, 10)))
    assert session.outputs[0]["dtype"] == "float32"
    x = torch.randn(4, 3, 10, 10)
    with torch.no_grad():
        reference = quantized(x)
    runtime = session.run(x)
    # int8 stem and block exact, so only the float head's rounding differs
    np.testing.assert_allclose(runtime.numpy(), reference.numpy(), rtol=1e-4, atol=1e-4)


def test_float_input_stem():
    quantized = _quantize("stem")
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 10, 10)))
    assert session.inputs[0]["dtype"] == "float32"
    x = torch.randn(2, 3, 10, 10)
    with qtk.int8_outputs(quantized), torch.no_grad():
        reference = quantized(x).to(torch.int32)
    runtime = session.run(x, output="int8").to(torch.int32)
    # the float stem's rounding may move a quantized value by one step (spec 15)
    assert (reference - runtime).abs().max() <= 2
    assert (reference == runtime).float().mean() >= 0.9


def test_float_op_without_runtime_kernel_fails_export_with_a_way_out():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Softsign()).eval()
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_type={nn.Softsign: None})
    prepared = qtk.prepare_ptq(model, mapping)
    prepared(torch.randn(1, 1, 6, 6))
    quantized = qtk.convert(prepared)
    with pytest.raises(qtk.UnsupportedOpError, match=r"^1: Softsign .*no float kernel.*qconfig"):
        qtk.export(quantized, torch.randn(1, 1, 6, 6))
