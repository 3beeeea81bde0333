"""Add, concat and standalone activations: float, QAT and Quantized forms."""
import torch
from torch import nn

from .. import arithmetic
from .base import (QATModule, QModelOp, QuantizedModule, activation_kind, apply_activation,
                   clamp_attr, to_int8)


def _flatten_tensors(tensors):
    """Accept both module(a, b, c) and module([a, b, c])."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


# ---- float --------------------------------------------------------------------------------------

class Add(nn.Module):
    """``a + b`` as a module, so it gets its own output quantizer (use for residual connections)."""

    def forward(self, a, b):
        return a + b


class AddReLU(nn.Module):
    """``relu(a + b)``, quantized as one op. ``six=True`` gives ReLU6."""

    def __init__(self, six=False):
        super().__init__()
        self.six = six

    def forward(self, a, b):
        return apply_activation(a + b, "relu6" if self.six else "relu")


class Concat(nn.Module):
    """``torch.cat(tensors, dim)`` as a module; inputs of different scales are requantized."""

    def __init__(self, dim=1):
        super().__init__()
        self.dim = dim

    def forward(self, *tensors):
        return torch.cat(_flatten_tensors(tensors), self.dim)


# ---- QAT ----------------------------------------------------------------------------------------

class QATAdd(QATModule):
    """Add (+ ReLU/ReLU6) with a fake-quantized output."""
    FLOAT_TYPES = (Add, AddReLU)

    def __init__(self, activation, qconfig):
        super().__init__()
        self.activation = activation
        self.activation_post_process = qconfig.activation()

    @classmethod
    def from_float(cls, module, qconfig):
        activation = None
        if isinstance(module, AddReLU):
            activation = "relu6" if module.six else "relu"
        return cls(activation, qconfig)

    def forward(self, a, b):
        return self.activation_post_process(apply_activation(a + b, self.activation))


class QATConcat(QATModule):
    """Concat with a fake-quantized output."""
    FLOAT_TYPES = (Concat,)

    def __init__(self, dim, qconfig):
        super().__init__()
        self.dim = dim
        self.activation_post_process = qconfig.activation()

    @classmethod
    def from_float(cls, module, qconfig):
        return cls(module.dim, qconfig)

    def forward(self, *tensors):
        return self.activation_post_process(torch.cat(_flatten_tensors(tensors), self.dim))


# ---- Quantized ----------------------------------------------------------------------------------

class QuantizedAdd(QuantizedModule):
    """Rescaled sum of two int8 tensors with one rounding (spec 3), fused clamp (spec 5)."""
    SOURCE_TYPES = (QATAdd,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, module.output_qparams())
        s_y, z_y = layer.output_qparams
        layer.multipliers, layer.shift = arithmetic.shared_shift_multipliers(
            [float(q.scale) / float(s_y) for q in input_qparams])
        layer.lo, layer.hi = arithmetic.activation_bounds(module.activation, s_y, z_y)
        return layer

    def forward(self, a, b):
        terms = [(x, q.zero_point, m) for x, q, m in zip((a, b), self.input_qparams, self.multipliers)]
        return to_int8(arithmetic.rescaled_sum(terms, self.shift, self.output_qparams.zero_point,
                                               self.lo, self.hi))

    def qmodel_op(self, input_shapes):
        return QModelOp("add", attrs={"multiplier": list(self.multipliers), "shift": [self.shift],
                                      "clamp": clamp_attr(self.lo, self.hi)})


class QuantizedConcat(QuantizedModule):
    """Each input rescaled to the output's qparams on its own (spec 3), then concatenated."""
    SOURCE_TYPES = (QATConcat,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        if module.dim == 0:
            raise ValueError(f"{where}: concatenation along the batch dimension is not supported")
        layer = cls(input_qparams, module.output_qparams())
        layer.dim = module.dim
        pairs = [arithmetic.quantize_multiplier(float(q.scale) / float(layer.output_qparams.scale))
                 for q in input_qparams]
        layer.multipliers, layer.shifts = [p[0] for p in pairs], [p[1] for p in pairs]
        return layer

    def forward(self, *tensors):
        z_y = self.output_qparams.zero_point
        parts = [arithmetic.rescaled_sum([(x, q.zero_point, m)], n, z_y)
                 for x, q, m, n in zip(_flatten_tensors(tensors), self.input_qparams,
                                       self.multipliers, self.shifts)]
        return to_int8(torch.cat(parts, self.dim))

    def qmodel_op(self, input_shapes):
        axis = self.dim % len(input_shapes[0])
        return QModelOp("concat", attrs={"axis": [axis], "multiplier": list(self.multipliers),
                                         "shift": list(self.shifts)})


class QuantizedClamp(QuantizedModule):
    """Standalone ReLU / ReLU6 on int8 values: a clamp in the input's qparams (spec 5)."""
    SOURCE_TYPES = (nn.ReLU, nn.ReLU6)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, input_qparams[0])
        layer.lo, layer.hi = arithmetic.activation_bounds(activation_kind(module), *input_qparams[0])
        return layer

    def forward(self, x):
        return torch.clamp(x, self.lo, self.hi)

    def qmodel_op(self, input_shapes):
        return QModelOp("clamp", attrs={"clamp": clamp_attr(self.lo, self.hi)})
