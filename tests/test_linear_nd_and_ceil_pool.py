"""What torchvision's models need beyond [N, K] linears and floor-mode pooling (issue 18).

nn.Linear on [N, H, W, C] (ConvNeXt's MLPs, between permutes to channels-last and back) and on
[N, T, C] (the transformers'): every leading dimension is rows, K the last. MaxPool2d with
ceil_mode=True (GoogLeNet, SqueezeNet): the last window may reach past the bottom/right padding.
For each, PTQ, export and the runtime are byte-identical to the Quantized reference at batch 3 and
2 threads; the float export runs within test_float_export.py's tolerance of torch.
"""
import itertools

import pytest
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime
from test_float_export import assert_runtime_matches_torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class ChannelsLastMlp(nn.Module):
    """ConvNeXt's block MLP: conv, permute to [N, H, W, C], Linear, ReLU, Linear, permute back."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc1, self.relu, self.fc2 = nn.Linear(8, 19), nn.ReLU(), nn.Linear(19, 5)

    def forward(self, x):
        x = self.conv(x).permute(0, 2, 3, 1)
        return self.fc2(self.relu(self.fc1(x))).permute(0, 3, 1, 2)


class TokenMlp(nn.Module):
    """A transformer's MLP on tokens: conv, flatten the plane to T tokens, [N, T, C], Linears."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, stride=2)
        self.fc1, self.fc2 = nn.Linear(6, 11), nn.Linear(11, 7)

    def forward(self, x):
        tokens = self.conv(x).flatten(2).transpose(1, 2)
        return self.fc2(self.fc1(tokens))


@pytest.mark.parametrize("make", [ChannelsLastMlp, TokenMlp], ids=lambda m: m.__name__)
def test_linear_on_leading_dimensions_is_byte_identical(make):
    model = make().eval()
    x = torch.randn(3, 3, 9, 11)
    quantized = calibrated(model, [torch.randn(4, 3, 9, 11) for _ in range(2)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert reference.dim() in (3, 4)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)


@pytest.mark.parametrize("make", [ChannelsLastMlp, TokenMlp], ids=lambda m: m.__name__)
def test_linear_on_leading_dimensions_float_export_matches_torch(make):
    assert_runtime_matches_torch(make().eval(), 11, batch=2)


def test_quantized_linear_names_the_features_it_expects():
    quantized = calibrated(TokenMlp().eval(), [torch.randn(2, 3, 9, 11)])
    with pytest.raises(ValueError, match=r"quantized Linear takes \[N, \.\.\., 6\] input "
                                         r"\(features last\), got shape \[2, 5, 4\]"):
        quantized.fc1(torch.zeros(2, 5, 4, dtype=torch.int8))


def _ceil_pool(kernel, stride, padding=0, dilation=1):
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1),
                         nn.MaxPool2d(kernel, stride, padding, dilation, ceil_mode=True))


# (pool, input size): sizes where ceil mode adds a row and a column of windows, strides 2 and 3,
# padding, dilation, a rectangular window; GoogLeNet's and SqueezeNet's 3x3 stride 2.
CEIL_POOLS = {
    "3x3_s2_googlenet": (lambda: _ceil_pool(3, 2), (14, 14)),
    "3x3_s2_odd": (lambda: _ceil_pool(3, 2), (10, 12)),
    "2x2_s2": (lambda: _ceil_pool(2, 2), (9, 11)),
    "3x3_s3_pad1": (lambda: _ceil_pool(3, 3, 1), (9, 9)),
    "3x2_s3x2_dilated": (lambda: _ceil_pool((3, 2), (3, 2), 0, 2), (12, 12)),
}


@pytest.mark.parametrize("name", CEIL_POOLS)
def test_max_pool_ceil_mode_is_byte_identical(name):
    make, (h, w) = CEIL_POOLS[name]
    model = make().eval()
    pool = model[1]
    floor = nn.MaxPool2d(pool.kernel_size, pool.stride, pool.padding, pool.dilation)
    x = torch.randn(3, 3, h, w)
    assert pool(x).shape[2:] != floor(x).shape[2:], "ceil mode adds no window here"
    quantized = calibrated(model, [torch.randn(4, 3, h, w) for _ in range(2)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert reference.shape == pool(model[0](x)).shape
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)


@pytest.mark.parametrize("name", [name for name, (_, (h, w)) in CEIL_POOLS.items() if h == w])
def test_max_pool_ceil_mode_float_export_matches_torch(name):
    """(assert_runtime_matches_torch takes square inputs.)"""
    make, (size, _) = CEIL_POOLS[name]
    assert_runtime_matches_torch(make().eval(), size, batch=2)


def _avg_pool(*args, **kwargs):
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.AvgPool2d(*args, **kwargs))


# AvgPool2d in ceil mode (its last windows divided by the part within the padded input) and with
# divisor_override, alone and together (spec 6).
AVG_POOLS = {
    "2x2_s2_ceil": (lambda: _avg_pool(2, ceil_mode=True), (9, 11)),
    "3x3_s2_pad1_ceil": (lambda: _avg_pool(3, 2, 1, ceil_mode=True), (10, 10)),
    "3x3_s2_pad1_ceil_in_bounds": (
        lambda: _avg_pool(3, 2, 1, ceil_mode=True, count_include_pad=False), (10, 12)),
    "3x3_s2_pad1_divisor_5": (lambda: _avg_pool(3, 2, 1, divisor_override=5), (10, 10)),
    "3x2_ceil_divisor_4": (
        lambda: _avg_pool((3, 2), (2, 3), (1, 0), ceil_mode=True, divisor_override=4), (11, 11)),
}


@pytest.mark.parametrize("name", AVG_POOLS)
def test_avg_pool_ceil_mode_and_divisor_override_are_byte_identical(name):
    make, (h, w) = AVG_POOLS[name]
    model = make().eval()
    x = torch.randn(3, 3, h, w)
    quantized = calibrated(model, [torch.randn(4, 3, h, w) for _ in range(2)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert reference.shape == model(x).shape
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)


@pytest.mark.parametrize("name", [name for name, (_, (h, w)) in AVG_POOLS.items() if h == w])
def test_avg_pool_ceil_mode_and_divisor_override_float_export_matches_torch(name):
    make, (size, _) = AVG_POOLS[name]
    assert_runtime_matches_torch(make().eval(), size, batch=2)


def test_quantized_avg_pool_is_torchs_average_rounded():
    """Spec 6's divisors against torch's over a sweep of geometries: the Quantized average pool
    is torch's float64 average of (q - z), rounded half away from zero, plus z, clamped."""
    from qtk.modules import QParams, QuantizedAvgPool2d
    generator = torch.Generator().manual_seed(0)
    cases = 0
    for h, k, s, p, ceil, include_pad, divisor in itertools.product(
            (1, 2, 5, 7, 8), (1, 2, 3), (1, 2, 3), (0, 1), (False, True), (False, True),
            (None, 1, 3, 7)):
        if p > k // 2 or h + 2 * p < k:
            continue
        pool = nn.AvgPool2d((k, 2), (s, 1), (p, 1), ceil, include_pad, divisor)
        q = torch.randint(-128, 128, (2, 2, h, h + 1), generator=generator, dtype=torch.int8)
        z = int(torch.randint(-20, 20, (1,), generator=generator))
        layer = QuantizedAvgPool2d.from_module(pool, [QParams(0.1, z)])
        average = pool((q.to(torch.float64) - z))
        expected = (torch.sign(average) * torch.floor(average.abs() + 0.5) + z).clamp(-128, 127)
        assert torch.equal(layer(q).to(torch.float64), expected), pool
        cases += 1
    assert cases > 500

class FunctionalAdaptiveMax(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        return torch.nn.functional.adaptive_max_pool2d(self.conv(x), (3, 4))


def test_functional_adaptive_max_pool_is_the_module():
    model = FunctionalAdaptiveMax().eval()
    quantized = calibrated(model, [torch.randn(4, 3, 12, 12)])
    x = torch.randn(3, 3, 12, 12)
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=16)
    assert_runtime_matches_torch(model, 12)
