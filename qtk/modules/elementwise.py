"""Add, multiply, concat and arithmetic with a constant or learned tensor: float, QAT and
Quantized forms; subtract and divide of two activations, float for now."""
import torch
from torch import nn

from .. import arithmetic
from ..errors import UnsupportedOpError
from .base import (QATFloatThenQuantize, QATModule, QModelOp, QuantizedModule, apply_activation,
                   clamp_attr, float_activation_attrs, float_export, to_int8)


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


class Mul(nn.Module):
    """``a * b`` as a module (broadcasting like torch: squeeze-excitation's per-channel scale)."""

    def forward(self, a, b):
        return a * b


class Sub(nn.Module):
    """``a - b`` of two activations."""

    def forward(self, a, b):
        return a - b


class Div(nn.Module):
    """``a / b`` of two activations."""

    def forward(self, a, b):
        return a / b


ELEMENTWISE = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}


class TensorExpression(nn.Module):
    """A tensor computed from the model's own parameters and buffers alone (a small traced
    graph), recomputed at each call so that QAT trains them; export writes its value."""

    def __init__(self, graph_module):
        super().__init__()
        self.compute = graph_module

    def forward(self):
        return self.compute()


class WithConstant(nn.Module):
    """``x <op> c`` (or ``c <op> x``) where ``c`` is a number or a tensor the model owns:
    ``x * 0.5``, ``x + pos_embedding``, ``layer_scale * x``, ``(x - mean) / std``. A learned ``c``
    stays the model's own parameter, so QAT trains it.

    Args:
        op: "add", "sub", "mul" or "div".
        constant: a number, a tensor, an ``nn.Parameter`` (shared, not copied) or a
            :class:`TensorExpression` of the model's tensors.
        constant_first: ``c <op> x`` rather than ``x <op> c``.
    """

    def __init__(self, op, constant, constant_first=False):
        super().__init__()
        self.op, self.constant_first = op, constant_first
        if isinstance(constant, (nn.Parameter, TensorExpression)):
            self.constant = constant
        else:
            self.register_buffer("constant", torch.as_tensor(constant, dtype=torch.float32))

    def value(self):
        return self.constant() if isinstance(self.constant, TensorExpression) else self.constant

    def forward(self, x):
        operands = (self.value(), x) if self.constant_first else (x, self.value())
        return ELEMENTWISE[self.op](*operands)

    def extra_repr(self):
        return f"{self.op}, constant_first={self.constant_first}"


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
        super().__init__(qconfig)
        self.activation = activation

    @classmethod
    def from_float(cls, module, qconfig):
        activation = None
        if isinstance(module, AddReLU):
            activation = "relu6" if module.six else "relu"
        return cls(activation, qconfig)

    def forward(self, a, b):
        return self.activation_post_process(apply_activation(a + b, self.activation))


class QATMul(QATModule):
    """Mul with a fake-quantized output."""
    FLOAT_TYPES = (Mul,)

    def forward(self, a, b):
        return self.activation_post_process(a * b)


class QATConcat(QATModule):
    """Concat with a fake-quantized output."""
    FLOAT_TYPES = (Concat,)

    def __init__(self, dim, qconfig):
        super().__init__(qconfig)
        self.dim = dim

    @classmethod
    def from_float(cls, module, qconfig):
        return cls(module.dim, qconfig)

    def forward(self, *tensors):
        return self.activation_post_process(torch.cat(_flatten_tensors(tensors), self.dim))


class QATWithConstant(QATFloatThenQuantize):
    """``x <op> c`` in float (``c`` still the model's own, so QAT trains it), its output
    fake-quantized."""
    FLOAT_TYPES = (WithConstant,)


# ---- Quantized ----------------------------------------------------------------------------------

class QuantizedAdd(QuantizedModule):
    """Rescaled sum of two int8 tensors with one rounding (spec 3), fused clamp (spec 5)."""
    SOURCE_TYPES = (QATAdd,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, module.output_qparams())
        layer.multipliers, layer.shift = arithmetic.rescale_multipliers(
            [q.scale for q in input_qparams], layer.output_qparams.scale, shared_shift=True)
        layer.lo, layer.hi = arithmetic.activation_bounds(module.activation, layer.output_qparams)
        return layer

    def forward(self, a, b):
        terms = [(x, q.zero_point, m) for x, q, m in zip((a, b), self.input_qparams, self.multipliers)]
        return to_int8(arithmetic.rescaled_sum(terms, self.shift, self.output_qparams.zero_point,
                                               self.lo, self.hi))

    def qmodel_op(self, input_shapes):
        return QModelOp("add", attrs={"multiplier": list(self.multipliers), "shift": [self.shift],
                                      "clamp": clamp_attr(self.lo, self.hi)})


class QuantizedMul(QuantizedModule):
    """Product of two int8 tensors, requantized once (spec 9)."""
    SOURCE_TYPES = (QATMul,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, module.output_qparams())
        layer.multiplier, layer.shift = arithmetic.mul_multiplier(
            input_qparams[0].scale, input_qparams[1].scale, layer.output_qparams.scale)
        return layer

    def forward(self, a, b):
        z_a, z_b = self.input_qparams[0].zero_point, self.input_qparams[1].zero_point
        product = (a.to(torch.int64) - z_a) * (b.to(torch.int64) - z_b)
        _, z_y, lo, hi = self.output_qparams
        return to_int8(arithmetic.requantize(product, self.multiplier, self.shift, z_y, lo, hi))

    def qmodel_op(self, input_shapes):
        return QModelOp("mul", attrs={"multiplier": [self.multiplier], "shift": [self.shift],
                                      "clamp": clamp_attr(*self.output_qparams[2:])})


class QuantizedConcat(QuantizedModule):
    """Each input rescaled to the output's qparams on its own (spec 3), then concatenated."""
    SOURCE_TYPES = (QATConcat,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        if module.dim == 0:
            raise ValueError(f"{where}: concatenation along the batch dimension is not supported")
        layer = cls(input_qparams, module.output_qparams())
        layer.dim = module.dim
        layer.multipliers, layer.shifts = arithmetic.rescale_multipliers(
            [q.scale for q in input_qparams], layer.output_qparams.scale, shared_shift=False)
        return layer

    def forward(self, *tensors):
        _, z_y, lo, hi = self.output_qparams
        parts = [arithmetic.rescaled_sum([(x, q.zero_point, m)], n, z_y, lo, hi)
                 for x, q, m, n in zip(_flatten_tensors(tensors), self.input_qparams,
                                       self.multipliers, self.shifts)]
        return to_int8(torch.cat(parts, self.dim))

    def qmodel_op(self, input_shapes):
        axis = self.dim % len(input_shapes[0])
        return QModelOp("concat", attrs={"axis": [axis], "multiplier": list(self.multipliers),
                                         "shift": list(self.shifts)})


class QuantizedWithConstant(QuantizedModule):
    """``x <op> c`` with ``c`` folded into the requantization, never quantized to int8 (spec 21):
    ``x * c`` and ``x / c`` as a signed (M, n) per element of ``c``; ``x + c``, ``x - c`` and
    ``c - x`` as ``+-(q - z) 2^k + B`` with ``B = round(+-c 2^k / s_x)`` and one (M, n);
    ``c / x`` for a ``c`` of one value as a table (spec 10)."""
    SOURCE_TYPES = (QATWithConstant,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        float_module = module.module
        layer = cls(input_qparams, module.output_qparams())
        layer.op, layer.where = float_module.op, where
        with torch.no_grad():
            constant = float_module.value().detach().to(torch.float32)
        s_x, s_y = input_qparams[0].scale, layer.output_qparams.scale
        if layer.op == "div" and float_module.constant_first:  # c / x: a function of x alone
            if not bool((constant == constant.reshape(-1)[0]).all()):
                raise ValueError(f"{where}: c / x with a c of unequal values has no int8 form; "
                                 f"give {where!r} a qconfig of None to keep it float")
            c = float(constant.reshape(-1)[0])
            layer.op = "reciprocal"
            layer.register_buffer("table", arithmetic.lookup_table(
                lambda v: c / v, input_qparams[0], layer.output_qparams))
        elif layer.op in ("mul", "div"):
            multiplier, shift = arithmetic.constant_mul_requantization(
                constant, s_x, s_y, where, divide=layer.op == "div")
            layer.register_buffer("multiplier", multiplier)
            layer.register_buffer("shift", shift)
        else:
            layer.negate = layer.op == "sub" and float_module.constant_first
            if layer.op == "sub" and not float_module.constant_first:
                constant = -constant
            bias, layer.input_shift, layer.multiplier, layer.shift = \
                arithmetic.constant_add_requantization(constant, s_x, s_y, where)
            layer.register_buffer("bias", bias)
        return layer

    def forward(self, x):
        z_x = self.input_qparams[0].zero_point
        _, z_y, lo, hi = self.output_qparams
        if self.op == "reciprocal":
            return arithmetic.apply_lookup_table(x, self.table)
        if self.op in ("mul", "div"):
            y = arithmetic.mul_constant(x, z_x, self.multiplier, self.shift, z_y, lo, hi)
        else:
            y = arithmetic.add_constant(x, z_x, self.negate, self.input_shift, self.bias,
                                        self.multiplier, self.shift, z_y, lo, hi)
        return to_int8(y)

    def qmodel_op(self, input_shapes):
        where = self.where
        clamp = clamp_attr(*self.output_qparams[2:])
        if self.op == "reciprocal":
            return QModelOp("lut", [("table", self.table)])
        if self.op in ("mul", "div"):
            multiplier = constant_operand(self.multiplier, input_shapes[0], where)
            shift = constant_operand(self.shift, input_shapes[0], where)
            return QModelOp("mul_constant", [("multiplier", multiplier.to(torch.int32)),
                                             ("shift", shift.to(torch.int32))], {"clamp": clamp})
        bias = constant_operand(self.bias, input_shapes[0], where)
        return QModelOp("add_constant", [("bias", bias.to(torch.int32))],
                        {"multiplier": [self.multiplier], "shift": [self.shift],
                         "input_shift": [self.input_shift], "negate": [int(self.negate)],
                         "clamp": clamp})

    def extra_repr(self):
        return f"{self.op}, {super().extra_repr()}"


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(Add, AddReLU)
def float_add(module, input_shapes, where):
    kind = ("relu6" if module.six else "relu") if isinstance(module, AddReLU) else None
    return QModelOp("add", attrs=float_activation_attrs({}, kind))


@float_export(Mul)
def float_mul(module, input_shapes, where):
    return QModelOp("mul")


@float_export(Sub)
def float_sub(module, input_shapes, where):
    return QModelOp("sub")


@float_export(Div)
def float_div(module, input_shapes, where):
    return QModelOp("div")


@float_export(WithConstant)
def float_with_constant(module, input_shapes, where):
    with torch.no_grad():
        constant = module.value()
    return constant_operand_op(module.op, constant, input_shapes[0], where, module.constant_first)


def constant_operand_op(op, constant, input_shape, where, constant_first=False):
    """The float32 op of ``x <op> c``: the constant gets the activation's rank (leading 1s), as
    the runtime broadcasts equal ranks, and may not reach into the batch dimension."""
    constant = constant_operand(constant.detach().float(), input_shape, where)
    return QModelOp(op, [("constant", constant)], constants_first=constant_first)


def constant_operand(constant, input_shape, where):
    """``constant`` with the activation's rank (leading 1s), as the runtime broadcasts equal
    ranks; refused where it would reach into the batch dimension."""
    rank = len(input_shape)
    if constant.dim() > rank or (constant.dim() == rank and constant.shape[0] != 1):
        raise UnsupportedOpError(f"{where}: a constant of shape {tuple(constant.shape)} with an "
                                 f"activation of shape {input_shape} would change the batch "
                                 f"dimension")
    return constant.reshape([1] * (rank - constant.dim()) + list(constant.shape))


@float_export(Concat)
def float_concat(module, input_shapes, where):
    return QModelOp("concat", attrs={"axis": [module.dim % len(input_shapes[0])]})
