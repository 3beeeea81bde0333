"""Standalone activations: clamps that keep their input's qparams (ReLU, ReLU6, Hardtanh) and
functions quantized by table (HardSwish, HardSigmoid, Sigmoid, Tanh, SiLU, Mish, GELU, LeakyReLU,
ELU, Softplus; ReActNet's RPReLU, a table per channel); Softmax from a table of exponentials;
PReLU by two requantizations."""
import math
from typing import Callable, Dict, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .. import arithmetic
from ..errors import UnsupportedOpError
from .base import (QATFloatThenQuantize, QModelOp, QuantizedModule, clamp_attr, float_export,
                   to_int8)


class QuantizedClamp(QuantizedModule):
    """ReLU / ReLU6 / Hardtanh on int8 values: a clamp in the input's qparams (spec 5, 11)."""
    SOURCE_TYPES = (nn.ReLU, nn.ReLU6, nn.Hardtanh)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, input_qparams[0])
        if isinstance(module, nn.ReLU):
            low, high = 0.0, None
        else:  # ReLU6 is Hardtanh(0, 6)
            low, high = module.min_val, module.max_val
        qparams = input_qparams[0]  # quantize_scalar clamps to its integer range
        layer.lo = arithmetic.quantize_scalar(low, *qparams)
        layer.hi = qparams.qmax if high is None else arithmetic.quantize_scalar(high, *qparams)
        return layer

    def forward(self, x):
        return torch.clamp(x, self.lo, self.hi)

    def qmodel_op(self, input_shapes):
        return QModelOp("clamp", attrs={"clamp": clamp_attr(self.lo, self.hi)})


def _no_attrs(module):
    return {}


class TableFunction(NamedTuple):
    runtime_op: str  # the float32 runtime op, for a part kept in float
    calls: tuple  # the functional spellings in forward() that mean the module
    # The float32 op's attributes, each one f32 read from the module (LeakyReLU's slope as
    # ``alpha``); the runtime's kFloat32Functions line names the same keys.
    attrs: Callable[[nn.Module], Dict[str, float]] = _no_attrs


# Functions quantized by table (spec 10). A new one is a line here (its int8 form is the table),
# plus its float32 kernel in the runtime's registry. Functional spellings take the module's
# arguments in its order (``F.elu(x, alpha)`` is ``nn.ELU(alpha)``).
TABLE_FUNCTIONS = {
    nn.Hardswish: TableFunction("hardswish", (F.hardswish,)),
    nn.Hardsigmoid: TableFunction("hardsigmoid", (F.hardsigmoid,)),
    nn.Sigmoid: TableFunction("sigmoid", (torch.sigmoid, F.sigmoid, "sigmoid")),
    nn.Tanh: TableFunction("tanh", (torch.tanh, F.tanh, "tanh")),
    nn.SiLU: TableFunction("silu", (F.silu,)),
    nn.Mish: TableFunction("mish", (F.mish,)),
    nn.GELU: TableFunction("gelu", (F.gelu,)),
    nn.LeakyReLU: TableFunction("leaky_relu", (F.leaky_relu,),
                                lambda m: {"alpha": m.negative_slope}),
    nn.ELU: TableFunction("elu", (F.elu,), lambda m: {"alpha": m.alpha}),
    nn.Softplus: TableFunction("softplus", (F.softplus,),
                               lambda m: {"beta": m.beta, "threshold": m.threshold}),
}


# Where a float activation stops telling its input values apart: (floor, ceiling), every value
# below floor giving the output at floor, every value above ceiling the output at ceiling (None:
# no such point). Exact points only: Sigmoid and Tanh approach theirs and never reach them.
SATURATION = {
    nn.Hardswish: lambda m: (-3.0, None),
    nn.Hardsigmoid: lambda m: (-3.0, 3.0),
    nn.ReLU: lambda m: (0.0, None),
    nn.ReLU6: lambda m: (0.0, 6.0),
    nn.Hardtanh: lambda m: (float(m.min_val), float(m.max_val)),
}


def reader_bounds(module):
    """(floor, ceiling) of a float activation of SATURATION's types (exactly: a subclass may
    compute something else), or None."""
    saturation = SATURATION.get(type(module))
    return None if saturation is None else saturation(module)


class QATTableFunction(QATFloatThenQuantize):
    """A table function (HardSwish, Sigmoid, ...) in float with a fake-quantized output."""
    FLOAT_TYPES = tuple(TABLE_FUNCTIONS)


class RPReLU(nn.Module):
    """ReActNet's RPReLU, the activation of its blocks' real-valued path: ``PReLU(x - shift_in[c])
    + shift_out[c]``, shifts and slopes learned per channel (dim 1). Its int8 form is a table per
    channel (spec 10); kept in float, the runtime's sub, prelu and add."""

    def __init__(self, channels, init=0.25):
        super().__init__()
        self.shift_in = nn.Parameter(torch.zeros(channels))
        self.weight = nn.Parameter(torch.full((channels,), float(init)))
        self.shift_out = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        shape = [1, -1] + [1] * (x.dim() - 2)
        shifted = F.prelu(x - self.shift_in.reshape(shape), self.weight)
        return shifted + self.shift_out.reshape(shape)


class QATRPReLU(QATFloatThenQuantize):
    """RPReLU in float (shifts and slopes trained) with a fake-quantized output."""
    FLOAT_TYPES = (RPReLU,)


class QuantizedLookupTable(QuantizedModule):
    """Any one-input int8 function as a 256-entry table computed at convert time (spec 10), one
    per channel where its input or output is quantized per channel (spec 25) or the function
    differs per channel (RPReLU)."""
    SOURCE_TYPES = (QATTableFunction, QATRPReLU)
    CHANNEL_SCALES = True

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, module.output_qparams())
        x, y = input_qparams[0], layer.output_qparams
        channels = max(len(q.scale) if q.per_channel else 1 for q in (x, y))
        per_channel_function = isinstance(module.module, RPReLU)
        if per_channel_function:
            channels = len(module.module.weight)
        layer.register_buffer("table", arithmetic.lookup_table(
            module.module, x, y, channels, per_channel_function=per_channel_function))
        layer.function_name = type(module.module).__name__
        return layer

    def forward(self, x):
        return arithmetic.apply_lookup_table(x, self.table)

    def qmodel_op(self, input_shapes):
        return QModelOp("lut", [("table", self.table)])

    def extra_repr(self):
        return f"{self.function_name}, " + super().extra_repr()


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(nn.ReLU, nn.ReLU6, nn.Hardtanh)
def float_clamp(module, input_shapes, where):
    bounds = [0.0, math.inf] if isinstance(module, nn.ReLU) else [float(module.min_val),
                                                                   float(module.max_val)]
    return QModelOp("clamp", attrs={"bounds": bounds})


@float_export(*TABLE_FUNCTIONS)
def float_table_function(module, input_shapes, where):
    function = TABLE_FUNCTIONS[type(module)]
    op = function.runtime_op
    attrs = {key: [float(value)] for key, value in function.attrs(module).items()}
    return QModelOp(op + "_tanh" if getattr(module, "approximate", "none") == "tanh" else op,
                    attrs=attrs)


class QATSoftmax(QATFloatThenQuantize):
    """Softmax in float with a fake-quantized output."""
    FLOAT_TYPES = (nn.Softmax,)


class QuantizedSoftmax(QuantizedModule):
    """Softmax from a table of the 256 exponentials the input scale allows (spec 18)."""
    SOURCE_TYPES = (QATSoftmax,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, module.output_qparams())
        layer.dim, layer.where = module.module.dim, where
        layer.register_buffer("table", arithmetic.softmax_table(input_qparams[0].scale))
        layer.multiplier = arithmetic.softmax_output_multiplier(layer.output_qparams.scale, where)
        return layer

    def _axis(self, rank):
        if self.dim is None or self.dim % rank == 0:
            raise UnsupportedOpError(f"{self.where}: Softmax(dim={self.dim}) over the batch "
                                     f"dimension (or an implicit dim) is not supported")
        return self.dim % rank

    def forward(self, x):
        _, z_y, lo, hi = self.output_qparams
        return to_int8(arithmetic.integer_softmax(x, self._axis(x.dim()), self.table,
                                                  self.multiplier, z_y, lo, hi))

    def qmodel_op(self, input_shapes):
        axis = self._axis(len(input_shapes[0]))
        if input_shapes[0][axis] > arithmetic.SOFTMAX_MAX_ROW:
            raise UnsupportedOpError(f"{self.where}: softmax rows of {input_shapes[0][axis]} "
                                     f"values are longer than 2^20")
        _, _, lo, hi = self.output_qparams
        return QModelOp("softmax", [("table", self.table.to(torch.int32))],
                        {"axis": [axis], "multiplier": [self.multiplier],
                         "clamp": clamp_attr(lo, hi)})


@float_export(nn.Softmax)
def float_softmax(module, input_shapes, where):
    rank = len(input_shapes[0])
    if module.dim is None or module.dim % rank == 0:
        raise UnsupportedOpError(f"{where}: Softmax(dim={module.dim}) over the batch dimension (or "
                                 f"an implicit dim) is not supported; give the feature dim")
    return QModelOp("softmax", attrs={"axis": [module.dim % rank]})


class QATPReLU(QATFloatThenQuantize):
    """nn.PReLU in float (its slopes trained) with a fake-quantized output."""
    FLOAT_TYPES = (nn.PReLU,)


class QuantizedPReLU(QuantizedModule):
    """PReLU as two requantizations of ``q - z_x`` (spec 22): ``s_x / s_y`` at or above the zero
    point, ``a_c s_x / s_y`` (signed) below it, ``a_c`` one slope or one per channel (dim 1)."""
    SOURCE_TYPES = (QATPReLU,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, module.output_qparams())
        try:
            layer.positive, (multiplier, shift) = arithmetic.prelu_multipliers(
                module.module.weight, input_qparams[0].scale, layer.output_qparams.scale)
        except ValueError as error:
            raise ValueError(f"{where}: PReLU: {error}") from None
        layer.register_buffer("multiplier", multiplier)
        layer.register_buffer("shift", shift)
        layer.where = where
        return layer

    def _per_channel(self, t, rank):
        if t.numel() == 1:
            return t.reshape(())
        return t.reshape([1, -1] + [1] * (rank - 2))

    def forward(self, x):
        _, z_y, lo, hi = self.output_qparams
        return to_int8(arithmetic.prelu(
            x, self.input_qparams[0].zero_point, self.positive,
            self._per_channel(self.multiplier, x.dim()), self._per_channel(self.shift, x.dim()),
            z_y, lo, hi))

    def qmodel_op(self, input_shapes):
        _, _, lo, hi = self.output_qparams
        return QModelOp("prelu", attrs={
            "positive_multiplier": [self.positive[0]], "positive_shift": [self.positive[1]],
            "multiplier": self.multiplier.tolist(), "shift": self.shift.tolist(),
            "clamp": clamp_attr(lo, hi)})


@float_export(nn.PReLU)
def float_prelu(module, input_shapes, where):
    return QModelOp("prelu", [("weight", module.weight.detach().to(torch.float32).reshape(-1))])


@float_export(RPReLU)
def float_rprelu(module, input_shapes, where):
    """Three float32 ops in a chain: sub, prelu, add, the shifts with the activation's rank."""
    rank = len(input_shapes[0])

    def shift(parameter):
        return parameter.detach().to(torch.float32).reshape([1, -1] + [1] * (rank - 2))

    return [QModelOp("sub", [("shift_in", shift(module.shift_in))]),
            QModelOp("prelu", [("weight", module.weight.detach().to(torch.float32))]),
            QModelOp("add", [("shift_out", shift(module.shift_out))])]
