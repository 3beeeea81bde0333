"""Per-channel histogram calibration of weights: MSE ranges cut the 4-bit quantization error of
real trained layers below MinMax's, one symmetric scale per output channel (zero point 0), and a
model calibrated with calibrate(weight_method=...) deploys byte-identical."""
import pytest
import torch
from torch import nn

import qtk
from qtk import arithmetic
from qtk.observers import PerChannelHistogramObserver, PerChannelMinMaxObserver
from conftest import assert_not_degenerate, reference_and_runtime, trained_small_cnn

W4 = dict(qmin=-7, qmax=7, symmetric=True)  # 4-bit narrow range (spec: weights symmetric)


@pytest.fixture(scope="module")
def trained():
    model, (train_x, _), (test_x, _) = trained_small_cnn(1, 2000)
    return model, train_x[:256], test_x[:64]

def _weight_error(observer, weight):
    observer(weight)
    scale, zero_point = observer.calculate_qparams()
    q = arithmetic.quantize(weight, scale, zero_point, W4["qmin"], W4["qmax"], axis=0)
    restored = arithmetic.dequantize(q, scale.reshape(-1, *[1] * (weight.dim() - 1)), 0)
    return float(((weight - restored) ** 2).sum()), scale, zero_point


@pytest.mark.parametrize("method", ["mse", "percentile", "kl"])
def test_per_channel_rules_give_symmetric_per_channel_scales(trained, method):
    weight = trained[0][4].weight.detach()  # conv 16 -> 32
    _, scale, zero_point = _weight_error(PerChannelHistogramObserver(method=method, **W4), weight)
    assert scale.shape == (32,) and torch.unique(scale).numel() > 16
    assert torch.equal(zero_point, torch.zeros(32, dtype=torch.int64))


def test_per_channel_mse_weights_beat_minmax_at_4_bits(trained):
    model = trained[0]
    for layer in (model[4], model[9], model[15]):  # two convs and the classifier
        weight = layer.weight.detach()
        minmax, minmax_scale, _ = _weight_error(PerChannelMinMaxObserver(**W4), weight)
        mse, mse_scale, _ = _weight_error(PerChannelHistogramObserver(method="mse", **W4),
                                          weight)
        assert mse < 0.9 * minmax, (layer, mse, minmax)
        assert (mse_scale <= minmax_scale * (1 + 1e-6)).all()  # ranges only shrink


@pytest.mark.parametrize("weight_method", ["mse", "kl"])
def test_weight_method_deploys_byte_identical(trained, weight_method):
    model, calibration, test = trained
    prepared = qtk.prepare_ptq(model, qtk.bits_qconfig(4, 8, qtk.default_ptq_qconfig))
    quantized = qtk.convert(qtk.calibrate(prepared, calibration.split(64), method="percentile",
                                          weight_method=weight_method))
    conv = quantized.get_submodule("4")
    assert conv.weight_scale.shape == (32,) and torch.unique(conv.weight_scale).numel() > 16
    reference, runtime = reference_and_runtime(quantized, test[:1], test)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=16)


def test_unknown_weight_method_is_named():
    prepared = qtk.prepare_ptq(nn.Sequential(nn.Conv2d(1, 1, 1)).eval())
    with pytest.raises(ValueError, match="unknown calibration method 'best'"):
        qtk.calibrate(prepared, [torch.randn(1, 1, 2, 2)], weight_method="best")
