"""Automatic float fallback (docs/quantization_spec.md section 15): an op qtk has no int8 form for
stays float by default, prepare says so once, ``qtk.report`` lists every op and the int8 share of
MACs, and ``strict=True`` refuses instead."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated
from test_float_export import assert_runtime_matches_torch


class Mixed(nn.Module):
    """Convs, a module qtk has no int8 form for (Softsign), a functional call it has none for
    (log_sigmoid), and a linear head."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.squash = nn.Softsign()
        self.conv2 = nn.Conv2d(8, 8, 3)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = self.squash(self.conv(x))
        x = F.logsigmoid(self.conv2(x))
        return self.head(x.mean((2, 3)))


def test_ops_without_int8_form_stay_float_and_are_reported():
    with pytest.warns(qtk.FloatFallbackWarning, match=r"2 op\(s\) stay float .*Softsign, "
                                                      r"log_sigmoid.*strict=True"):
        prepared = qtk.prepare_ptq(Mixed().eval())
    report = qtk.report(prepared, torch.randn(1, 3, 10, 10))
    rows = {row.node: row for row in report.rows}
    assert rows["squash"].precision == "float" and rows["squash"].reason.startswith(
        "qtk has no int8 form")
    call = [row for row in report.rows if row.op == "log_sigmoid"]
    assert len(call) == 1 and call[0].precision == "float"
    assert [rows[n].precision for n in ("conv", "conv2", "head")] == ["int8"] * 3
    assert rows["conv"].macs == 100 * 8 * 27 and rows["head"].macs == 5 * 8
    assert report.int8_mac_share == 1.0  # every MAC is in a conv or linear, all int8
    assert "ops in int8, 100.0% of MACs" in str(report)


def test_float_conv_counts_against_the_int8_share():
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_name={"1": None})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a float part the user chose is no fallback: no warning
        prepared = qtk.prepare_ptq(nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3)).eval(),
                                   mapping)
    report = qtk.report(prepared, torch.randn(1, 3, 10, 10))
    conv1, conv2 = (64 * 8 * 27), (36 * 8 * 72)
    assert report.int8_mac_share == pytest.approx(conv1 / (conv1 + conv2))
    assert report.fallbacks == []


class LogSigmoidBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return F.logsigmoid(self.conv(x))


def test_strict_refuses_what_would_fall_back():
    with pytest.raises(qtk.UnsupportedOpError, match="^squash: Softsign has no quantized form"):
        qtk.prepare_ptq(Mixed().eval(), strict=True)
    with pytest.raises(qtk.UnsupportedOpError, match="^block: 'log_sigmoid' .* has no quantized "
                                                     "form.*qconfig of None"):
        model = nn.Sequential()
        model.add_module("block", LogSigmoidBlock())
        qtk.prepare_ptq(model.eval(), strict=True)


def test_strict_keeps_float_what_the_qconfig_keeps_float():
    """A call inside a module whose qconfig is None is the user's float part, not a refusal."""
    model = nn.Sequential()
    model.add_module("block", LogSigmoidBlock())
    model.add_module("head", nn.Conv2d(4, 4, 1))
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_name={"block": None})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepared = qtk.prepare_ptq(model.eval(), mapping, strict=True)
    rows = {row.node: row for row in qtk.report(prepared).rows}
    assert rows["block.log_sigmoid"].reason == "its qconfig is None"
    assert rows["block.conv"].precision == "float" and rows["head"].precision == "int8"


def test_fallback_without_a_float_kernel_is_named_at_export():
    """Softsign and log_sigmoid have no float32 runtime kernel yet: export names the first."""
    with pytest.warns(qtk.FloatFallbackWarning):
        quantized = calibrated(Mixed().eval(), [torch.randn(4, 3, 10, 10)])
    with pytest.raises(qtk.UnsupportedOpError, match=r"^squash: Softsign was kept in float but "
                                                     r"the runtime has no float kernel"):
        qtk.export(quantized, torch.randn(1, 3, 10, 10))


class StandaloneBatchNorm(nn.Module):
    """DenseNet's pattern: a BatchNorm after a concat (no conv to fold into), then ReLU."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 5, 1)
        self.norm, self.relu = nn.BatchNorm2d(9), nn.ReLU()
        self.conv = nn.Conv2d(9, 6, 3)

    def forward(self, x):
        return self.conv(self.relu(self.norm(torch.cat([self.a(x), self.b(x)], 1))))


def test_standalone_batchnorm_is_int8_as_a_per_channel_affine():
    from model_zoo.training import reestimate_batchnorm
    model = reestimate_batchnorm(StandaloneBatchNorm(), (8, 3, 10, 10))
    with torch.no_grad():
        model.norm.weight.uniform_(-2, 2)  # negative scales too
        model.norm.bias.uniform_(-1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepared = qtk.prepare_ptq(model)
    assert all(row.precision == "int8" for row in qtk.report(prepared).rows)
    quantized = calibrated(model, [torch.randn(8, 3, 10, 10)])
    x = torch.randn(3, 3, 10, 10)
    from conftest import reference_and_runtime
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=32)
    assert_runtime_matches_torch(model, 10)


def test_standalone_batchnorm_keeps_a_qconfig_given_by_its_type():
    model = StandaloneBatchNorm().eval()
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_type={nn.BatchNorm2d: None})
    rows = {row.node: row for row in qtk.report(qtk.prepare_ptq(model, mapping)).rows}
    assert rows["norm"].precision == "float" and rows["norm"].reason == "its qconfig is None"
    assert rows["conv"].precision == "int8"


def test_report_needs_a_prepared_model():
    with pytest.raises(TypeError, match="quantize_qat or qtk.prepare_ptq"):
        qtk.report(nn.Linear(2, 2))
