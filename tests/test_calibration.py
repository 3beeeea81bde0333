"""PTQ calibration: the histogram rules choose tighter ranges than min/max on data with outliers
(kl, unguarded, too; its guard keeps outliers whose clipping costs more than it saves), and every
calibration method deploys byte-identical."""
import pytest
import torch
from torch import nn

import qtk
from qtk.observers import HistogramObserver, MinMaxObserver, get_observer


def _outlier_data():
    torch.manual_seed(0)
    return torch.cat([torch.randn(20000), torch.tensor([25.0, -18.0])])


def _observed(observer):
    """``observer`` after the outlier data in two batches, the later one wider (for a histogram,
    re-binned)."""
    data = _outlier_data()
    observer(data[:10000])
    observer(data[10000:] * 1.2)
    return observer


@pytest.mark.parametrize("method", ["percentile", "mse", "kl"])
def test_histogram_rules_clip_outliers(method):
    # kl's window without its guard: clipping the two outliers to it costs more squared error
    # than its finer steps save, so the guard keeps the observed range (the test below)
    histogram = _observed(HistogramObserver(method=method, kl_guard=False))
    minmax = _observed(MinMaxObserver())
    scale, zero_point = histogram.calculate_qparams()
    assert float(scale) < float(minmax.calculate_qparams()[0])
    assert -128 <= int(zero_point) <= 127


@pytest.mark.parametrize("method", ["minmax", "kl"])
def test_histogram_rule_keeps_the_observed_range(method):
    """The minmax rule reads the observed range itself. The guarded kl keeps it here: the two
    outliers (30 and -21.6) lie 4.8 and 3.4 times as far out as the KL window's edges (about 6.3),
    and clipped, their squared error exceeds what 20 000 values gain from the window's finer
    steps (docs/quantizers.md)."""
    histogram = _observed(HistogramObserver(method=method))
    minmax = _observed(MinMaxObserver())
    assert all(torch.equal(a, b) for a, b in zip(histogram.calculate_qparams(),
                                                 minmax.calculate_qparams()))


def test_histogram_observer_is_registered():
    assert get_observer("HistogramObserver") is HistogramObserver
    with pytest.raises(ValueError, match="unknown histogram method"):
        HistogramObserver(method="magic")


@pytest.mark.parametrize("method", ["minmax", "percentile", "mse", "kl"])
def test_calibrate_then_deploy_is_byte_identical(method):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten()).eval()
    loader = [(torch.randn(4, 3, 8, 8), torch.zeros(4)) for _ in range(5)]
    prepared = qtk.calibrate(qtk.prepare_ptq(model), loader, num_batches=3, method=method)
    quantized = qtk.convert(prepared)
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 8, 8)))
    x = torch.randn(6, 3, 8, 8)
    with qtk.int8_outputs(quantized):
        assert torch.equal(quantized(x), session.run(x, output="int8"))


def test_unknown_calibration_method_is_named():
    prepared = qtk.prepare_ptq(nn.Sequential(nn.Conv2d(1, 1, 1)).eval())
    with pytest.raises(ValueError, match="unknown calibration method 'best'"):
        qtk.calibrate(prepared, [torch.randn(1, 1, 2, 2)], method="best")


def test_bias_correction_removes_the_mean_output_error_of_coarse_weights():
    torch.manual_seed(0)
    for groups in (1, 2):
        model = nn.Sequential(nn.Conv2d(4, 8, 3, groups=groups), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.Flatten(), nn.Linear(8 * 36, 5)).eval()
        model[1].running_mean.uniform_(-1, 1)
        data = [torch.randn(64, 4, 8, 8) + torch.arange(4.0).reshape(1, 4, 1, 1)
                for _ in range(4)]
        x = torch.cat(data)
        errors = []
        for correct in (False, True):
            prepared = qtk.prepare_ptq(model, qtk.bits_qconfig(3, 8, qtk.default_ptq_qconfig))
            quantized = qtk.convert(qtk.calibrate(prepared, data, bias_correction=correct))
            with torch.no_grad():
                errors.append(abs(float((quantized(x) - model(x)).mean())))
        assert errors[1] < errors[0] / 5, errors
