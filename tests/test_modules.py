"""Fusion, BatchNorm folding in QAT, observers and QConfig behave as documented (the trios'
numerics, op by op, are in test_every_op.py)."""
import copy

import pytest
import torch
from torch import nn

import qtk
from qtk import modules
from qtk.observers import (MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver,
                           qparams_from_range)


def test_fusion_folds_conv_bn_relu_into_one_module():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Linear(4, 3), nn.ReLU())
    qat = qtk.quantize_qat(model)
    kinds = [type(m) for m in qat.children()]
    assert modules.QATConvBn2d in kinds and modules.QATLinear in kinds
    assert nn.BatchNorm2d not in kinds and nn.ReLU not in kinds
    assert qat.get_submodule("0").activation == "relu" and qat.get_submodule("3").activation == "relu"


def test_qat_conv_bn_updates_then_freezes_statistics():
    qat = qtk.quantize_qat(nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3))).train()
    conv = qat.get_submodule("0")
    before = conv.bn.running_mean.clone()
    qat(torch.randn(4, 2, 6, 6) + 3)
    assert not torch.equal(before, conv.bn.running_mean)
    qtk.freeze_bn_stats(qat)
    qat.train()
    frozen = conv.bn.running_mean.clone()
    qat(torch.randn(4, 2, 6, 6) - 3)
    assert torch.equal(frozen, conv.bn.running_mean)


def test_qat_gradients_reach_weights_and_bn():
    qat = qtk.quantize_qat(nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU())).train()
    qat(torch.randn(4, 2, 6, 6)).sum().backward()
    conv = qat.get_submodule("0")
    assert conv.weight.grad is not None and conv.weight.grad.abs().sum() > 0
    assert conv.bn.weight.grad is not None


def test_observers_compute_documented_qparams():
    x = torch.tensor([-1.0, 0.5, 3.0])
    observer = MinMaxObserver()
    observer(x)
    scale, zero_point = observer.calculate_qparams()
    assert torch.isclose(scale, torch.tensor(4.0 / 255))
    assert int(zero_point) == -128 - round(-1.0 / float(scale))
    observer(torch.tensor([5.0]))
    assert float(observer.max_val) == 5.0 and float(observer.min_val) == -1.0

    ema = MovingAverageMinMaxObserver(averaging_constant=0.5)
    ema(torch.tensor([0.0, 2.0]))
    ema(torch.tensor([0.0, 4.0]))
    assert float(ema.max_val) == 3.0

    weight = torch.tensor([[1.0, -2.0], [0.5, 0.25]])
    per_channel = PerChannelMinMaxObserver(qmin=-127, qmax=127, symmetric=True)
    per_channel(weight)
    scale, zero_point = per_channel.calculate_qparams()
    torch.testing.assert_close(scale, torch.tensor([2.0 / 127, 0.5 / 127]))
    assert zero_point.tolist() == [0, 0]


def test_range_always_contains_zero():
    scale, zero_point = qparams_from_range(torch.tensor(2.0), torch.tensor(5.0), -128, 127, False)
    assert int(zero_point) == -128  # min widened to 0
    assert torch.isclose(scale, torch.tensor(5.0 / 255))


def test_observer_state_dict_round_trips():
    qat = qtk.quantize_qat(nn.Sequential(nn.Conv2d(1, 3, 3)))
    qat(torch.randn(2, 1, 5, 5))
    fresh = qtk.quantize_qat(nn.Sequential(nn.Conv2d(1, 3, 3)))
    fresh.load_state_dict(qat.state_dict())
    qat.eval(), fresh.eval()
    x = torch.randn(2, 1, 5, 5)
    assert torch.equal(qat(x), fresh(x))


def test_qconfig_rejects_instances():
    with pytest.raises(TypeError, match="factory"):
        qtk.QConfig(activation=qtk.fake_quant.FakeQuantize(MinMaxObserver), weight=MinMaxObserver)


def test_user_stubs_are_respected():
    model = nn.Sequential(modules.QuantStub(), nn.Conv2d(1, 2, 3), modules.DequantStub())
    qat = qtk.quantize_qat(model)
    assert not any("quant_input" in name for name, _ in qat.named_children())
    qat(torch.randn(1, 1, 5, 5))
    quantized = qtk.convert(qat.eval())
    assert quantized(torch.randn(1, 1, 5, 5)).dtype == torch.float32


def test_quantize_qat_does_not_modify_the_float_model():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    snapshot = copy.deepcopy(model.state_dict())
    qtk.quantize_qat(model)(torch.randn(2, 1, 5, 5))
    assert all(torch.equal(snapshot[k], v) for k, v in model.state_dict().items())
    assert isinstance(model[1], nn.BatchNorm2d)
