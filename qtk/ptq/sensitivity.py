"""Sensitivity analysis: how much quantizing each layer alone costs, at the layer and at the
network output (``qtk.ptq.sensitivity``)."""
import contextlib
import dataclasses
import itertools
import math
from typing import List

import torch

from ..fake_quant import FakeQuantize
from ..qconfig import default_ptq_qconfig
from .layer_switch import LayerSwitch


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


def input_batches(data, num_batches=None, name="data"):
    """The input tensors of ``data`` (tensors or ``(input, ...)`` tuples), kept in memory: the
    analysis runs them many times. ``name`` is the argument an empty ``data`` is reported as."""
    batches = [batch[0] if isinstance(batch, (tuple, list)) else batch
               for batch in itertools.islice(data, num_batches)]
    if not batches:
        raise ValueError(f"{name} holds no batches: pass a list (or DataLoader) of input tensors")
    return batches


def output_tensor(output):
    """A model output as one [N, ...] tensor: a tuple, list or dict of tensors concatenated."""
    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if isinstance(output, dict) else output
    return torch.cat([output_tensor(value).flatten(1) for value in values], 1)


@torch.no_grad()
def run(model, inputs):
    return [output_tensor(model(x)) for x in inputs]


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
    inputs = input_batches(data, num_batches)
    switch = LayerSwitch(model.eval(), qconfig or default_ptq_qconfig, inputs, method)
    return layer_sensitivity(switch, inputs, run(model, inputs))


def layer_sensitivity(switch, inputs, reference, progress=None):
    """:func:`sensitivity` on a calibrated :class:`LayerSwitch` against the float outputs
    ``reference``; ``progress`` (a tqdm bar) counts the layers measured."""
    rows = []
    for name, layer in switch.layers.items():
        alone = switch.use(float_layers=set(switch.layers) - {name})
        layer_sqnr, network_sqnr = _quantized_alone(alone, layer, inputs, reference)
        op = next(row.op for row in switch.prepared.qtk_report if row.node == name)
        rows.append(SensitivityRow(name, op, layer_sqnr, network_sqnr))
        if progress is not None:
            progress.update()
    return SensitivityReport(sorted(rows, key=lambda row: (row.network_sqnr, row.layer_sqnr)))


def _quantized_alone(prepared, layer, inputs, reference):
    """(layer SQNR, network SQNR) of ``prepared``, in which only ``layer`` is quantized."""
    layer_sqnr, network_sqnr = Sqnr(), Sqnr()
    float_args = {}  # the layer's last inputs before its input quantizers, for its float output

    def record_float_inputs(module, args):
        float_args["last"] = args

    def compare_with_float(module, args, output):
        with _fake_quantized(module.modules(), False):
            layer_sqnr.add(module.forward(*float_args["last"]), output)

    hooks = [layer.register_forward_pre_hook(record_float_inputs, prepend=True),
             layer.register_forward_hook(compare_with_float)]
    try:
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
