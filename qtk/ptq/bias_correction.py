"""Empirical bias correction: each layer's bias takes back the mean error that quantization leaves
in its output (Nagel et al. 2019, "Data-Free Quantization", sec. 4.2 with data; NNCF's fast bias
correction). :func:`qtk.calibrate`'s ``bias_correction`` corrects the weights' error alone,
``(W - Q(W)) E[x]``; this one measures the whole error of a layer's sums, its quantized inputs'
included, so a layer also makes up for the shift its quantized predecessors left."""
import copy

import torch
from torch.nn import functional as F
from tqdm import tqdm

from ..fake_quant import BinaryFakeQuantize
from ..modules.conv import QATConv2d
from ..quantize import shift_bias
from .adaround import (_folded_weight_and_bias, _GraphPass, _set_fake_quant, _weight_layer_calls,
                       fake_quantized_as_converted)
from .sensitivity import input_batches


def correct_biases(model, data, num_batches=None, progress=True, float_model=None):
    """Move every conv/linear layer's bias, in forward order, by the per-channel mean of its float
    sums minus its quantized sums on calibration data.

    The float sums are the float model's (fake quantization off) on its own inputs; the quantized
    ones are the layer's fake-quantized weight (as converted) on the inputs the quantized model
    gives with the layers before it already corrected. The sums are taken before the layer's
    bias and activation; a conv-BatchNorm layer's shift goes into the BatchNorm's beta, which the
    folded bias carries one to one. Binary layers (spec 24) are left as they are.

    Args:
        model: from :func:`qtk.prepare_ptq`, calibrated; changed in place and returned.
        data: an iterable of input tensors, or of ``(input, ...)`` tuples; held in memory.
        num_batches: use this many batches of ``data`` (default: all).
        progress: show a progress bar over the layers.
        float_model: the float reference, where ``model``'s weights are no longer the float ones
            (AdaRound wrote its rounded weights into them); default ``model`` with fake
            quantization off.
    Returns:
        the model, the shift of each layer (by module path) in ``model.qtk_bias_shifts``.
    """
    batches = input_batches(data, num_batches)
    model.eval()
    float_model = copy.deepcopy(model if float_model is None else float_model).eval()
    _set_fake_quant(float_model, enabled=False)
    float_pass, quantized_pass = _GraphPass(float_model, batches), _GraphPass(model, batches)
    shifts = {}
    with fake_quantized_as_converted(model), torch.no_grad():
        for call in tqdm(_weight_layer_calls(model), desc="bias correction", disable=not progress):
            layer = model.get_submodule(call.target)
            if (getattr(layer, "input_fake_quant", None) is not None
                    or isinstance(layer.weight_fake_quant, BinaryFakeQuantize)):
                continue
            float_weight, _ = _folded_weight_and_bias(float_model.get_submodule(call.target))
            weight, _ = _folded_weight_and_bias(layer)
            float_sums = _sums(layer, float_pass.run_to(call, output=False), float_weight)
            quantized_sums = _sums(layer, quantized_pass.run_to(call, output=False),
                                   layer.weight_fake_quant(weight))
            shifts[call.target] = float_sums - quantized_sums
            shift_bias(layer, shifts[call.target])
    model.qtk_bias_shifts = shifts
    return model


def _sums(layer, x, weight):
    """The per-channel mean of the layer's sums without bias: over the batch and positions."""
    if isinstance(layer, QATConv2d):
        return layer._conv_forward(x, weight, None).mean((0, 2, 3))
    return F.linear(x, weight).reshape(-1, weight.shape[0]).mean(0)
