"""The model zoo: every model builds and runs at both input sizes, the full-size configurations
are torchvision's layer for layer, and every small model goes through QAT -> convert -> export ->
runtime with byte-identical int8 outputs."""
import pytest
import torch
import torchvision
from torch import nn

import qtk
from conftest import assert_not_degenerate, reference_and_runtime
from model_zoo import MODELS, create_model, mobilenet_v2, resnet, shufflenet_v1, shufflenet_v2

TINY = 0.125  # the smallest width every family supports


def _small(name, in_channels=1):
    return create_model(name, num_classes=10, in_channels=in_channels, width_mult=TINY,
                        small_input=True)


@pytest.mark.parametrize("name", list(MODELS))
def test_small_variant_runs_on_mnist_and_cifar_sizes(name):
    model = _small(name).eval()
    with torch.no_grad():
        assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)
        assert _small(name, in_channels=3).eval()(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_full_size_configuration_classifies_imagenet_input():
    # One forward at 224x224, on the cheapest family (ShuffleNet v2 0.5x: ~40 MFLOPs).
    model = shufflenet_v2(width_mult=0.5).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 224, 224)).shape == (1, 1000)


def _shapes(model):
    return sorted((key, tuple(value.shape)) for key, value in model.state_dict().items())


@pytest.mark.parametrize("ours, theirs", [
    (lambda: resnet(18), torchvision.models.resnet18),
    (lambda: resnet(50), torchvision.models.resnet50),
    (mobilenet_v2, torchvision.models.mobilenet_v2),
    (lambda: shufflenet_v2(width_mult=0.5), torchvision.models.shufflenet_v2_x0_5),
    (lambda: shufflenet_v2(width_mult=1.0), torchvision.models.shufflenet_v2_x1_0),
    (lambda: shufflenet_v2(width_mult=2.0), torchvision.models.shufflenet_v2_x2_0),
], ids=["resnet18", "resnet50", "mobilenet_v2", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
        "shufflenet_v2_x2_0"])
def test_full_size_configuration_has_torchvision_parameters(ours, theirs):
    with torch.device("meta"):  # shapes only: nothing is allocated or initialized
        assert _shapes(ours()) == _shapes(theirs())


@pytest.mark.parametrize("ours, theirs", [
    (lambda: resnet(18), torchvision.models.resnet18),
    (lambda: shufflenet_v2(width_mult=0.5), torchvision.models.shufflenet_v2_x0_5),
], ids=["resnet18", "shufflenet_v2_x0_5"])
def test_torchvision_weights_load_and_compute_the_same(ours, theirs):
    # Small input keeps it cheap: the full-size models take any size through global pooling.
    reference, model = theirs().eval(), ours().eval()
    model.load_state_dict(reference.state_dict())
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x))


def test_shufflenet_v1_follows_the_paper():
    # "ShuffleNet 1x (g = 3)": stages of 240, 480, 960 channels, about 1.9 M parameters.
    with torch.device("meta"):
        model = shufflenet_v1(groups=3)
    assert [getattr(model, f"stage{i}")[-1].expand[0].out_channels for i in (2, 3, 4)] == [
        240, 480, 960]
    assert 1.8e6 < sum(p.numel() for p in model.parameters()) < 1.95e6
    first, second = model.stage2[0], model.stage2[1]
    assert first.compress[0].groups == 1 and second.compress[0].groups == 3  # paper, section 3.3
    assert isinstance(first.shortcut, nn.AvgPool2d) and first.shortcut.kernel_size == 3


@pytest.mark.parametrize("name", list(MODELS))
def test_width_mult_scales_every_family(name):
    with torch.device("meta"):
        sizes = [sum(p.numel() for p in create_model(name, num_classes=10, width_mult=width,
                                                    small_input=True).parameters())
                 for width in (0.25, 0.5, 1.0)]
    assert sizes[0] < sizes[1] < sizes[2]


@pytest.mark.parametrize("name", list(MODELS))
def test_small_model_qat_to_runtime_is_byte_identical(name):
    torch.manual_seed(0)
    qat = qtk.quantize_qat(_small(name))
    optimizer = torch.optim.SGD(qat.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        loss = nn.functional.cross_entropy(qat(torch.randn(4, 1, 28, 28)),
                                           torch.randint(0, 10, (4,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    quantized = qtk.convert(qat.eval())
    reference, runtime = reference_and_runtime(quantized, torch.randn(1, 1, 28, 28),
                                               torch.randn(3, 1, 28, 28), threads=2)
    assert reference.shape == (3, 10)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=3)
