"""Sensitivity analysis: how much quantizing each layer alone costs, at the layer and at the
network output (``qtk.ptq.sensitivity``)."""
import contextlib
import dataclasses
import itertools
import math
from typing import List

import torch
from torch import fx, nn

from ..fake_quant import FakeQuantize
from ..modules import QATModule, QATQuantStub
from ..qconfig import default_ptq_qconfig
from ..quantize import calibrate, prepare_ptq


@dataclasses.dataclass
class SensitivityRow:
    name: str  # the layer's module path, as QConfigMapping(by_name=...) matches it
    op: str  # the float module's type (a fused container's, e.g. ConvBnReLU2d)
    layer_sqnr: float  # dB: the layer's own output, quantized alone, against its float output
    network_sqnr: float  # dB: the network output with only this layer quantized, against float


@dataclasses.dataclass
class SensitivityReport:
    """One row per quantizable layer, most sensitive (lowest network SQNR) first."""
    rows: List[SensitivityRow]

    @property
    def names(self):
        return [row.name for row in self.rows]

    def __str__(self):
        lines = [f"{'layer':44} {'op':18} {'layer SQNR':>10} {'network SQNR':>12}  (dB)"]
        lines += [f"{row.name[:44]:44} {row.op[:18]:18} {row.layer_sqnr:10.2f} "
                  f"{row.network_sqnr:12.2f}" for row in self.rows]
        return "\n".join(lines)


class Sqnr:
    """Signal-to-quantization-noise ratio in dB, accumulated over batches:
    10 log10(sum reference^2 / sum (reference - test)^2); infinite where they are equal."""

    def __init__(self):
        self.signal = self.noise = 0.0

    def add(self, reference, test):
        reference, test = reference.detach().double(), test.detach().double()
        self.signal += float((reference ** 2).sum())
        self.noise += float(((reference - test) ** 2).sum())

    @property
    def db(self):
        if self.noise == 0:
            return math.inf
        return 10 * math.log10(self.signal / self.noise) if self.signal else -math.inf


def input_batches(data, num_batches=None):
    """The input tensors of ``data`` (tensors or ``(input, ...)`` tuples), kept in memory: the
    analysis runs them many times."""
    return [batch[0] if isinstance(batch, (tuple, list)) else batch
            for batch in itertools.islice(data, num_batches)]


def output_tensor(output):
    """A model output as one [N, ...] tensor: a tuple, list or dict of tensors concatenated."""
    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if isinstance(output, dict) else output
    return torch.cat([output_tensor(value).flatten(1) for value in values], 1)


@torch.no_grad()
def run(model, inputs):
    return [output_tensor(model(x)) for x in inputs]


def quantizable_layers(prepared):
    """(node, module) of each call that a QConfigMapping can switch by the node's target and that
    quantizes its own output: the QAT modules, not the stubs, nor the ops that keep their input's
    quantization."""
    layers = []
    for node in prepared.graph.nodes:
        if node.op == "call_module":
            module = prepared.get_submodule(node.target)
            if (isinstance(module, QATModule) and not isinstance(module, QATQuantStub)
                    and hasattr(module, "activation_post_process")):
                layers.append((node, module))
    return layers


def set_fake_quant(modules, observe, fake_quantize):
    """Every fake quantizer among ``modules`` observes (or not) and fake-quantizes (or not)."""
    for module in modules:
        if isinstance(module, FakeQuantize):
            module.observer_enabled, module.fake_quant_enabled = observe, fake_quantize


def _map_tensors(args, function):
    """``args`` with each tensor (also inside lists and tuples) replaced by function(tensor)."""
    if isinstance(args, torch.Tensor):
        return function(args)
    if isinstance(args, (tuple, list)):
        return type(args)(_map_tensors(arg, function) for arg in args)
    return args


def _tensor_arguments(node):
    """How many tensors a call passes (a value passed twice counts twice)."""
    arguments = []
    fx.node.map_arg(node.args, arguments.append)
    return len(arguments)


class _InputQuantizers(nn.Module):
    """The quantizers a layer's inputs get when the layer alone is int8: prepare then puts a
    quantize stub with the layer's qconfig on each input, which sees the float values reaching
    the layer (after any reshape or pooling that stays float with it)."""

    def __init__(self, count, qconfig):
        super().__init__()
        self.quantizers = nn.ModuleList(qconfig.activation() for _ in range(count))

    def forward(self, args):
        position = itertools.count()
        return _map_tensors(args, lambda x: self.quantizers[next(position)](x)
                            if x.is_floating_point() else x)


def sensitivity(model, data, qconfig=None, method=None, num_batches=None):
    """Quantize each layer of ``model`` alone, every other layer float, and measure the SQNR of
    that layer's output and of the network output against the float model on ``data``.

    The model is prepared and calibrated once, with every layer int8, and each layer's fake
    quantization is then switched on alone: its weight, its output, and its inputs with
    quantizers of their own, as :func:`qtk.prepare_ptq` would put quantize stubs before a layer
    whose producers are float. This is the model prepared with only that layer int8, in fake
    quantization; the Quantized reference of that model differs from it only by integer rounding
    (bias rounding, requantization ties).

    Args:
        model: a trained float ``nn.Module``, put in eval mode (prepare copies it).
        data: calibration and evaluation batches, as for :func:`qtk.calibrate` (read once).
        qconfig: the :class:`qtk.QConfig` each layer is quantized with (default
            :data:`qtk.default_ptq_qconfig`), e.g. ``qtk.bits_qconfig(4, 4,
            base=qtk.default_ptq_qconfig)``.
        method: the calibration method (:func:`qtk.calibrate`).
        num_batches: use the first ``num_batches`` batches of ``data``.
    Returns:
        a :class:`SensitivityReport`, most sensitive layer first; ``print`` it for a table.
    """
    qconfig = qconfig or default_ptq_qconfig
    inputs = input_batches(data, num_batches)
    reference = run(model.eval(), inputs)
    prepared = prepare_ptq(model, qconfig)
    layers = quantizable_layers(prepared)
    borders = [_InputQuantizers(_tensor_arguments(node), qconfig) for node, _ in layers]
    prepared.sensitivity_inputs = nn.ModuleList(borders)  # calibrate sets their observers too
    set_fake_quant(prepared.modules(), observe=True, fake_quantize=False)  # float statistics
    hooks = [module.register_forward_pre_hook(lambda _, args, border=border: border(args))
             for (_, module), border in zip(layers, borders)]
    calibrate(prepared, inputs, method=method)
    for hook in hooks:
        hook.remove()
    set_fake_quant(prepared.modules(), observe=False, fake_quantize=False)
    rows = []
    for (node, module), border in zip(layers, borders):
        layer, network = _quantized_alone(prepared, module, border, inputs, reference)
        op = next(row.op for row in prepared.qtk_report if row.node == node.target)
        rows.append(SensitivityRow(node.target, op, layer, network))
    return SensitivityReport(sorted(rows, key=lambda row: (row.network_sqnr, row.layer_sqnr)))


def _quantized_alone(prepared, layer, border, inputs, reference):
    """(layer SQNR, network SQNR) with only ``layer`` (and its inputs) fake-quantized."""
    layer_sqnr, network_sqnr = Sqnr(), Sqnr()
    float_args = {}  # the layer's last float inputs, for its float output

    def quantize_inputs(module, args):
        float_args["last"] = args
        return border(args)

    def compare_with_float(module, args, output):
        with _fake_quantized(module.modules(), False):
            layer_sqnr.add(module.forward(*float_args["last"]), output)

    hooks = [layer.register_forward_pre_hook(quantize_inputs),
             layer.register_forward_hook(compare_with_float)]
    try:
        with _fake_quantized(itertools.chain(layer.modules(), border.modules()), True):
            for expected, actual in zip(reference, run(prepared, inputs)):
                network_sqnr.add(expected, actual)
    finally:
        for hook in hooks:
            hook.remove()
    return layer_sqnr.db, network_sqnr.db


@contextlib.contextmanager
def _fake_quantized(modules, enabled):
    """Fake quantization of ``modules`` on (or off) inside the block, restored after it."""
    quantizers = [m for m in modules if isinstance(m, FakeQuantize)]
    before = [m.fake_quant_enabled for m in quantizers]
    for quantizer in quantizers:
        quantizer.fake_quant_enabled = enabled
    try:
        yield
    finally:
        for quantizer, state in zip(quantizers, before):
            quantizer.fake_quant_enabled = state
