"""Cross-layer equalization (qtk.ptq.equalize): the float model computes the same function on real
photos, and per-channel weight ranges become uniform, on torchvision's MobileNetV2 and ResNet-18."""
import functools

import numpy as np
import pytest
import torch
from torch import nn

import qtk
from conftest import require_module

torchvision = require_module("torchvision")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def photos():
    """scikit-image's bundled photos, resized to 224x224, ImageNet-normalized."""
    data = require_module("skimage.data")
    batch = []
    for name in ("astronaut", "coffee", "chelsea", "rocket"):
        image = torch.from_numpy(np.ascontiguousarray(getattr(data, name)()[..., :3]))
        x = image.permute(2, 0, 1)[None].float() / 255
        batch.append(nn.functional.interpolate(x, size=(224, 224), mode="bilinear",
                                               antialias=True, align_corners=False))
    mean = torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
    return (torch.cat(batch) - mean) / std


@pytest.fixture(scope="module")
def pretrained_like(photos):
    """Builds each model once for the module (equalize copies, never changes, its input)."""
    return functools.lru_cache(lambda name, relu6_to_relu: _pretrained_like(name, photos,
                                                                            relu6_to_relu))


def _pretrained_like(name, photos, relu6_to_relu):
    """A randomly initialized torchvision model whose BatchNorms look trained: gamma spread over
    orders of magnitude (per-channel ranges of folded weights then differ as in the DFQ paper's
    MobileNetV2), beta from -gamma to 4 gamma (some channels' 3-sigma range lies above 0, which
    bias absorption moves), statistics re-estimated on the photos."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)()
    for module in list(model.modules()):
        for child_name, child in module.named_children():
            if relu6_to_relu and isinstance(child, nn.ReLU6):
                setattr(module, child_name, nn.ReLU(inplace=True))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.weight.copy_(torch.exp(torch.randn(module.num_features)))
                module.bias.copy_(module.weight * (torch.rand(module.num_features) * 5 - 1))
                module.reset_running_stats()
                module.momentum = None  # a cumulative average over the photos
        model.train()(photos)
    return model.eval()


def _relative_change(model, equalized, photos):
    with torch.no_grad():
        expected, actual = model(photos), equalized(photos)
    assert expected.std() > 0.1, "degenerate reference output"
    return float((actual - expected).abs().max() / expected.abs().max())


def _depthwise_range_ratios(model):
    """max / median of the per-output-channel weight ranges of each depthwise conv."""
    ratios = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d) and module.groups == module.in_channels > 1:
            ranges = module.weight.detach().abs().flatten(1).amax(1)
            ratios.append(float(ranges.max() / ranges.median()))
    return ratios


# resnet18: both convs of each of the 8 basic blocks; mobilenet_v2: every conv of the 17 inverted
# residual blocks, the stem and the last 1x1 conv (every project conv that no residual add reads
# feeds the next conv)
RESCALED_CONVS = {"resnet18": 16, "mobilenet_v2": 52}


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18"])
def test_equalization_keeps_the_float_output(name, photos, pretrained_like):
    model = pretrained_like(name, True)
    folded = qtk.ptq.equalize(model, photos[:2], max_rounds=0, bias_absorption=False)
    equalized = qtk.ptq.equalize(model, photos[:2], bias_absorption=False)
    assert _relative_change(model, equalized, photos) < 1e-5
    assert not any(isinstance(m, nn.BatchNorm2d) for m in equalized.modules())
    rescaled = sum(not torch.allclose(e.weight, f.weight) for e, f in
                   zip(equalized.modules(), folded.modules()) if isinstance(e, nn.Conv2d))
    assert rescaled == RESCALED_CONVS[name]


def test_bias_absorption_moves_biases_within_the_three_sigma_approximation(photos, pretrained_like):
    model = pretrained_like("mobilenet_v2", True)
    plain = qtk.ptq.equalize(model, photos[:2], bias_absorption=False)
    with pytest.warns(qtk.ptq.EqualizationWarning):  # pre-activations below 3 sigma exist
        absorbed = qtk.ptq.equalize(model, photos[:2])
    moved = [float((a.bias - p.bias).detach().abs().max())
             for a, p in zip(absorbed.modules(), plain.modules()) if isinstance(a, nn.Conv2d)]
    assert sum(m > 1e-3 for m in moved) >= 10
    assert _relative_change(model, absorbed, photos) < 2e-2


def test_depthwise_ranges_become_uniform(photos, pretrained_like):
    model = pretrained_like("mobilenet_v2", True)
    folded = qtk.ptq.equalize(model, photos[:2], max_rounds=0, bias_absorption=False)
    equalized = qtk.ptq.equalize(model, photos[:2], bias_absorption=False)
    before, after = _depthwise_range_ratios(folded), _depthwise_range_ratios(equalized)
    assert len(before) == len(after) == 17
    assert np.median(before) > 20 and np.median(after) < np.median(before) / 10, (before, after)
    assert max(after) < max(before) / 10


def test_relu6_becomes_relu_by_default_or_is_kept(photos, pretrained_like):
    model = pretrained_like("mobilenet_v2", False)
    with pytest.warns(qtk.ptq.EqualizationWarning, match="ReLU6"):  # these ReLU6s clip
        replaced = qtk.ptq.equalize(model, photos[:2], bias_absorption=False)
    # all but the last conv's, which feeds the pooling, not a conv
    assert sum(isinstance(m, nn.ReLU6) for m in replaced.modules()) == 1
    kept = qtk.ptq.equalize(model, photos[:2], relu6_to_relu=False, bias_absorption=False)
    assert sum(isinstance(m, nn.ReLU6) for m in kept.modules()) == 35
    assert _relative_change(model, kept, photos) < 1e-5
    # every depthwise conv sits between two ReLU6s, so none is equalized
    folded = qtk.ptq.equalize(model, photos[:2], relu6_to_relu=False, max_rounds=0,
                              bias_absorption=False)
    assert _depthwise_range_ratios(kept) == _depthwise_range_ratios(folded)


def test_prelu_leaky_relu_and_max_pool_between_a_pair_are_equalized_across():
    # MTCNN's shape: conv -> PReLU -> max pool -> conv; all three commute with positive scaling
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.PReLU(8), nn.MaxPool2d(2, ceil_mode=True),
                          nn.Conv2d(8, 8, 3), nn.LeakyReLU(0.1), nn.Conv2d(8, 4, 1)).eval()
    with torch.no_grad():
        model[0].weight.mul_(torch.logspace(-2, 1, 8).reshape(8, 1, 1, 1))
    x = torch.randn(4, 3, 17, 17)
    equalized = qtk.ptq.equalize(model, x, bias_absorption=False)
    assert _relative_change(model, equalized, x) < 1e-5
    first = [m for m in equalized.modules() if isinstance(m, nn.Conv2d)][0]
    ranges = first.weight.abs().flatten(1).amax(1)
    assert float(ranges.max() / ranges.min()) < 100  # 1000 before; the geometric mean with conv 2
