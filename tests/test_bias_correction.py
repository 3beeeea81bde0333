"""Empirical bias correction (qtk.ptq.correct_biases, docs/quantizers.md "PTQ in one call"): each
layer's quantized sums average to its float sums on the calibration data, the model stays
deployable byte-identical, and quantize_ptq keeps it only where held-out inputs come closer."""
import copy

import torch

import qtk
from conftest import assert_not_degenerate, reference_and_runtime, trained_small_cnn
from qtk.ptq import correct_biases, pipeline
from qtk.ptq.adaround import (_folded_weight_and_bias, _GraphPass, _set_fake_quant,
                              _weight_layer_calls, fake_quantized_as_converted)
from qtk.ptq.bias_correction import _sums
from qtk.ptq.sensitivity import run


def test_each_layer_sums_average_to_float_after_correction(one_torch_thread):
    model, (train_images, _), (test_images, _) = trained_small_cnn(1, 1000)
    batches = list(train_images[:256].split(64))
    qconfig = qtk.bits_qconfig(4, 8, base=qtk.default_ptq_qconfig)  # a visible weight error
    prepared = qtk.calibrate(qtk.prepare_ptq(model, qconfig, example_inputs=(batches[0][:1],)),
                             batches)
    before = copy.deepcopy(prepared)
    correct_biases(prepared, batches, progress=False)
    assert set(prepared.qtk_bias_shifts) == {c.target for c in _weight_layer_calls(prepared)}
    moved = [float(s.abs().max()) for s in prepared.qtk_bias_shifts.values()]
    assert max(moved) > 1e-3, "4-bit weights left no mean error to correct"
    # after the correction each layer's quantized sums plus its new bias average to the float
    # sums plus the old bias, layer after layer
    with fake_quantized_as_converted(prepared), torch.no_grad():
        float_model = copy.deepcopy(before)
        _set_fake_quant(float_model, enabled=False)
        float_pass = _GraphPass(float_model, batches)
        quantized_pass = _GraphPass(prepared, batches)
        for call in _weight_layer_calls(prepared):
            layer, original = prepared.get_submodule(call.target), before.get_submodule(call.target)
            weight, bias = _folded_weight_and_bias(layer)
            _, old_bias = _folded_weight_and_bias(original)
            float_mean = _sums(layer, float_pass.run_to(call, output=False), weight) + old_bias
            quantized_mean = _sums(layer, quantized_pass.run_to(call, output=False),
                                   layer.weight_fake_quant(weight)) + bias
            scale = float(float_mean.abs().max())
            assert torch.allclose(quantized_mean, float_mean, atol=1e-4 * scale), call.target
    # closer to float at the output, and deployed byte-identical
    test = test_images[:256]
    with torch.no_grad():
        reference = model(test)
        errors = [float((qtk.convert(copy.deepcopy(p))(test) - reference).mean(0).abs().mean())
                  for p in (before, prepared)]
    assert errors[1] < errors[0], errors
    quantized = qtk.convert(prepared)
    expected, deployed = reference_and_runtime(quantized, batches[0][:1], test[:64])
    assert torch.equal(torch.as_tensor(deployed), expected)
    assert_not_degenerate(expected, min_distinct=32)


def test_quantize_ptq_keeps_the_correction_only_if_held_out_inputs_come_closer(one_torch_thread):
    """The decision is the comparison of the corrected and the plain model on inputs the
    correction was not fitted to (here validation_data), computed apart from quantize_ptq."""
    model, (train_images, _), (test_images, _) = trained_small_cnn(1, 1000)
    batches, validation = list(train_images[:256].split(64)), list(test_images[:128].split(64))
    qconfig = qtk.bits_qconfig(4, 8, base=qtk.per_channel_activations(qtk.default_ptq_qconfig))
    plain = qtk.quantize_ptq(model, batches, validation_data=validation, qconfig=qconfig)
    assert plain.qtk_bias_corrected is None
    reference = run(model, validation)
    corrected = correct_biases(copy.deepcopy(plain), batches, progress=False)
    helps = (pipeline._score(corrected, validation, reference)
             > pipeline._score(plain, validation, reference))
    prepared = qtk.quantize_ptq(model, batches, validation_data=validation, qconfig=qconfig,
                                bias_correction=True)
    assert prepared.qtk_bias_corrected == helps
    assert hasattr(prepared, "qtk_bias_shifts") == helps
