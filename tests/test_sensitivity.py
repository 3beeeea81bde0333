"""Sensitivity analysis and automatic mixed precision (docs/quantizers.md, "Sensitivity and mixed
precision") on a small CNN trained on MNIST 5k, at w4a4 where PTQ hurts: the single-layer SQNRs
are the Quantized reference's, and the chosen mix meets its target in the deployed runtime."""
import math

import pytest
import torch

import qtk
from conftest import assert_not_degenerate, reference_and_runtime, trained_small_cnn
from qtk.ptq.mixed_precision import _fewest, _pruned, _sqnr
from qtk.ptq.sensitivity import run

W4A4 = qtk.bits_qconfig(4, 4, base=qtk.default_ptq_qconfig)
TARGET_DB = 14.0  # w4a4 PTQ of this model reaches about 13 dB, int8 about 33
INT8_TARGET_DB = 36.0  # needs a layer or more in float
LAYERS = {"0", "4", "7.conv1", "7.conv2", "7.add", "9", "15"}


@pytest.fixture(scope="module")
def digits():
    """(trained float model, evaluation batches): two epochs on the 4,000 training digits and
    256 test digits."""
    model, _, (test_images, _) = trained_small_cnn(2)
    return model, list(test_images[:256].split(128))

@pytest.fixture(scope="module")
def w4a4_mix(digits):
    model, data = digits
    return qtk.auto_mixed_precision(model, data, target=TARGET_DB, low_bits=4)


def _deployed_sqnr(model, data, mapping):
    prepared = qtk.calibrate(qtk.prepare_ptq(model, mapping), data)
    return _sqnr(run(model, data), run(qtk.convert(prepared), data))


def test_single_layer_sqnr_is_the_quantized_references(digits, w4a4_mix):
    model, data = digits
    report = w4a4_mix[1].sensitivity
    assert set(report.names) == LAYERS
    network = [row.network_sqnr for row in report.rows]
    assert network == sorted(network)
    assert all(math.isfinite(row.layer_sqnr) and math.isfinite(row.network_sqnr) and
               row.layer_sqnr > 5 for row in report.rows)
    assert str(report).splitlines()[1].startswith(report.rows[0].name)
    deployed = {row.name: _deployed_sqnr(model, data,
                                         qtk.QConfigMapping(None, by_name={row.name: W4A4}))
                for row in report.rows}
    assert min(deployed, key=deployed.get) == report.rows[0].name
    for row in report.rows:  # fake quantization differs from it by integer rounding only
        assert deployed[row.name] == pytest.approx(row.network_sqnr, abs=0.5), row.name


def test_auto_mixed_precision_meets_the_target_in_the_runtime(digits, w4a4_mix):
    model, data = digits
    prepared, report = w4a4_mix
    assert report.all_quantized < TARGET_DB <= report.achieved
    # No more layers at 8 bits than the usual recipe's two, the first and the last, which meets
    # the target where some CPUs train this model (15.6 dB) and misses it on others' (13).
    assert 1 <= len(report.kept) <= 2
    quantized = qtk.convert(prepared)
    x = torch.cat(data)
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=12)  # of the 16 a 4-bit output has
    output = qtk.int8_outputs(quantized).stubs[0].input_qparams[0]
    deployed = qtk.arithmetic.dequantize(runtime, output.scale, output.zero_point)
    assert _sqnr(run(model, [x]), [deployed]) >= TARGET_DB
    assert f"{len(report.kept)} layer(s) kept at 8 bits" in str(report)


def test_a_target_already_met_keeps_no_layer_in_float(digits):
    model, data = digits
    prepared, report = qtk.auto_mixed_precision(model, data, target=0.95, metric="agreement")
    assert report.kept == [] and report.sensitivity is None
    assert report.achieved == report.all_quantized >= 0.95
    assert all(row.precision == "int8" for row in qtk.report(prepared).rows)


def test_the_choice_is_minimal_after_pruning():
    needed = {"b", "d"}
    assert _fewest(["a", "b", "c", "d", "e"], lambda kept: needed <= set(kept)) == ["b", "d"]


def test_two_kept_layers_are_traded_for_one_that_meets_the_target_alone():
    """Ranked alone, "e" comes last, yet it alone meets the target where greedy kept "a" and
    "b" (neither of which can go by itself)."""
    def meets(kept):
        return "e" in kept or {"a", "b"} <= set(kept)
    assert _fewest(["a", "b", "c", "d", "e"], meets) == ["e"]
    # one pair and three others are 3 checks: over a cap of 2, no trade is tried
    assert _pruned(["a", "b"], ["a", "b", "c", "d", "e"], meets, max_trades=2) == ["a", "b"]


def test_float_mode_meets_the_target_in_the_runtime(digits):
    model, data = digits
    prepared, report = qtk.auto_mixed_precision(model, data, target=INT8_TARGET_DB)
    assert report.all_quantized < INT8_TARGET_DB <= report.achieved
    floats = {row.node for row in qtk.report(prepared).rows if row.precision == "float"}
    assert report.kept and set(report.kept) <= floats
    quantized = qtk.convert(prepared)
    x = torch.cat(data)
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    # the kept layers run float kernels, whose rounding may move a quantized value by a step
    # (spec 15); the int8 layers are byte-identical
    assert (reference.int() - runtime.int()).abs().max() <= 2
    assert (reference == runtime).float().mean() >= 0.9
    assert_not_degenerate(reference, min_distinct=100)
    output = qtk.int8_outputs(quantized).stubs[0].input_qparams[0]
    deployed = qtk.arithmetic.dequantize(runtime, output.scale, output.zero_point)
    assert _sqnr(run(model, [x]), [deployed]) >= INT8_TARGET_DB
