"""Contract 1 of docs/contracts.md: random conv/pool/add/concat/linear configurations export and run byte-identical.

A hypothesis sweep over shapes that stress the kernels: channel counts that are not multiples of
8 or 16, kernels 1/3/5/7, strides, padding, dilation, grouped and depthwise convolution, odd
spatial sizes, batch 1 and larger, fused activations and folded BatchNorm.
"""
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
import torch.nn.functional as F
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime

TAILS = ["none", "max_pool", "avg_pool", "add", "concat", "global_pool_linear", "relu6",
         "squeeze_excite", "hardswish", "sigmoid", "nearest", "bilinear", "pad", "shuffle"]


@st.composite
def configurations(draw):
    c_in = draw(st.integers(1, 19))
    kernel = draw(st.sampled_from([1, 3, 5, 7]))
    dilation = draw(st.sampled_from([1, 2]))
    grouping = draw(st.sampled_from(["single", "depthwise", "other"]))
    if grouping == "single":
        groups, c_out = 1, draw(st.integers(1, 21))
    elif grouping == "depthwise":
        groups, c_out = c_in, c_in * draw(st.integers(1, 2))
    else:
        divisors = [d for d in range(2, c_in) if c_in % d == 0] or [1]
        groups = draw(st.sampled_from(divisors))
        c_out = groups * draw(st.integers(1, 4))
    return dict(
        batch=draw(st.sampled_from([1, 2, 3])), c_in=c_in, c_out=c_out, groups=groups,
        height=draw(st.integers(3, 17)), width=draw(st.integers(3, 17)), kernel=kernel,
        stride=draw(st.sampled_from([1, 2])), dilation=dilation,
        padding=draw(st.integers(0, (kernel // 2) * dilation)),
        batch_norm=draw(st.booleans()), bias=draw(st.booleans()),
        activation=draw(st.sampled_from([None, "relu", "relu6"])),
        tail=draw(st.sampled_from(TAILS)), pool_kernel=draw(st.sampled_from([2, 3])),
        count_include_pad=draw(st.booleans()), threads=draw(st.sampled_from([1, 2])),
        input_scale=draw(st.sampled_from([0.1, 1.0, 8.0])),
    )


class SweepNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        layers = [nn.Conv2d(cfg["c_in"], cfg["c_out"], cfg["kernel"], cfg["stride"],
                            cfg["padding"], cfg["dilation"], cfg["groups"], bias=cfg["bias"])]
        if cfg["batch_norm"]:
            bn = nn.BatchNorm2d(cfg["c_out"])
            with torch.no_grad():  # statistics that make the folding do something
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
            layers.append(bn)
        layers += {"relu": [nn.ReLU()], "relu6": [nn.ReLU6()], None: []}[cfg["activation"]]
        self.body = nn.Sequential(*layers)
        self.tail = cfg["tail"]
        c = cfg["c_out"]
        k = cfg["pool_kernel"]
        if self.tail == "max_pool":
            self.pool = nn.MaxPool2d(k, stride=cfg["stride"], padding=k // 2, dilation=1)
        elif self.tail == "avg_pool":
            self.pool = nn.AvgPool2d(k, stride=cfg["stride"], padding=k // 2,
                                     count_include_pad=cfg["count_include_pad"])
        elif self.tail in ("add", "concat"):
            self.branch = nn.Conv2d(c, c, 1)
            self.merge = qtk.modules.Add() if self.tail == "add" else qtk.modules.Concat(1)
        elif self.tail == "global_pool_linear":
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.flatten = nn.Flatten()
            self.linear = nn.Linear(c, 7)
        elif self.tail == "relu6":
            self.act = nn.ReLU6()
        elif self.tail == "squeeze_excite":
            self.excite = nn.Conv2d(c, c, 1)
        self.groups = 3 if c % 3 == 0 else (2 if c % 2 == 0 else 1)
        self.parts = min(c, 2)
        self.scale = cfg["pool_kernel"]
        self.align_corners = cfg["count_include_pad"]

    def forward(self, x):
        y = self.body(x)
        if self.tail in ("max_pool", "avg_pool"):
            return self.pool(y)
        if self.tail in ("add", "concat"):
            return self.merge(self.branch(y), y)
        if self.tail == "global_pool_linear":
            return self.linear(self.flatten(self.pool(y)))
        if self.tail == "relu6":
            return self.act(y)
        if self.tail == "squeeze_excite":
            return y * torch.sigmoid(self.excite(F.adaptive_avg_pool2d(y, 1)))
        if self.tail == "hardswish":
            return F.hardswish(y)
        if self.tail == "sigmoid":
            return torch.sigmoid(y)
        if self.tail == "nearest":
            return F.interpolate(y, scale_factor=self.scale, mode="nearest")
        if self.tail == "bilinear":
            return F.interpolate(y, scale_factor=self.scale, mode="bilinear",
                                 align_corners=self.align_corners)
        if self.tail == "pad":
            return F.pad(y, (1, 0, 2, self.scale))
        if self.tail == "shuffle":  # channel shuffle (torchvision's code), then split and rejoin
            n, c, h, w = y.size()
            y = y.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()
            y = y.view(n, c, h, w)
            if self.parts == 1:
                return F.relu(y)
            first, second = y.chunk(2, dim=1)
            return torch.cat([F.relu(second), first], dim=1)
        return y


def _output_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


@settings(max_examples=260, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(configurations())
def test_random_configurations_are_byte_identical(cfg):
    for size in (cfg["height"], cfg["width"]):
        assume(_output_size(size, cfg["kernel"], cfg["stride"], cfg["padding"], cfg["dilation"]) >= 2)
    torch.manual_seed(0)  # each example reproducible on its own
    model = SweepNet(cfg).eval()
    shape = (cfg["batch"], cfg["c_in"], cfg["height"], cfg["width"])
    calibration = [torch.randn(shape) * cfg["input_scale"] for _ in range(2)]
    quantized = calibrated(model, calibration)
    inputs = torch.randn(shape) * cfg["input_scale"]
    reference, runtime = reference_and_runtime(quantized, calibration[0], inputs, cfg["threads"])
    assert reference.dtype == runtime.dtype == torch.int8
    assert torch.equal(reference, runtime), f"runtime differs from the reference for {cfg}"
    # outputs whose float values spread over several quantization steps must not collapse
    stub = next(m for m in quantized.modules() if isinstance(m, qtk.modules.QuantizedDequantStub))
    with torch.no_grad():
        spread = float(model(inputs).std()) / stub.input_qparams[0].scale
    if reference.numel() >= 16 and spread > 4:
        assert_not_degenerate(reference)
