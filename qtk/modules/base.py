"""What every QAT and Quantized module shares: qparams records and the export hook."""
import dataclasses
import math
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import torch
from torch import nn

from .. import arithmetic
from ..errors import UnsupportedOpError
from ..fake_quant import BinaryFakeQuantize


class QParams(NamedTuple):
    """Quantization parameters of an activation stored as int8: its scale, zero point and integer
    range, which is narrower than [-128, 127] for sub-8-bit activations (spec 16). ``scale`` is a
    float, or a tuple of floats with one per channel along dim 1 (spec 25: only layers with
    ``CHANNEL_SCALES`` read or write such a tensor)."""
    scale: object
    zero_point: int
    qmin: int = arithmetic.INT8_MIN
    qmax: int = arithmetic.INT8_MAX

    @property
    def narrow(self):
        return (self.qmin, self.qmax) != (arithmetic.INT8_MIN, arithmetic.INT8_MAX)

    @property
    def per_channel(self):
        return isinstance(self.scale, tuple)

    def channel(self, c):
        """The per-tensor qparams of channel ``c`` (every channel's, when per tensor)."""
        return self._replace(scale=self.scale[c]) if self.per_channel else self

    def scales(self):
        """The scale as a float64 tensor: one value, or one per channel."""
        return torch.tensor(self.scale, dtype=torch.float64)


def deployed_qparams(fake_quant):
    """The output qparams a fake quantizer deploys as. An unsigned range such as [0, 255] moves
    down by 128 into the int8 container: (q - z) and so every real value stay the same. A
    per-channel activation quantizer (spec 25) gives a scale per channel and its one zero point."""
    scale, zero_point = fake_quant.calculate_qparams()
    arithmetic.check_finite_scale(scale, "output")
    qmin, qmax = fake_quant.qmin, fake_quant.qmax
    if qmax - qmin > arithmetic.INT8_MAX - arithmetic.INT8_MIN:
        raise ValueError(f"activation range [{qmin}, {qmax}] is wider than 8 bits")
    if getattr(fake_quant, "ch_axis", None) is None:
        scale, zero_point = float(scale.reshape(())), int(zero_point.reshape(()))
    elif fake_quant.ch_axis != 1 or not bool((zero_point == zero_point.reshape(-1)[0]).all()):
        raise ValueError(f"a per-channel activation quantizer needs ch_axis=1 and one zero point "
                         f"for every channel (observer shared_zero_point=True, spec 25); got "
                         f"ch_axis={fake_quant.ch_axis}, zero points "
                         f"{zero_point.reshape(-1).tolist()[:4]}")
    else:
        scale, zero_point = tuple(scale.reshape(-1).tolist()), int(zero_point.reshape(-1)[0])
    offset = max(0, qmax - arithmetic.INT8_MAX)
    return QParams(scale, zero_point - offset, qmin - offset, qmax - offset)


def activation_kind(module):
    """The fused activation a float activation module stands for: None, 'relu', 'relu6' or
    'prelu' (its slopes stay in the module)."""
    if module is None or isinstance(module, nn.Identity):
        return None
    if isinstance(module, nn.ReLU6):
        return "relu6"
    if isinstance(module, nn.ReLU):
        return "relu"
    if isinstance(module, nn.PReLU):
        return "prelu"
    raise TypeError(f"cannot fuse {type(module).__name__} as an activation; only ReLU, ReLU6 and "
                    f"PReLU")


def float_activation_attrs(attrs, kind):
    """A float32 op's attributes with its fused activation as ``bounds`` (docs/qmodel_format.md)."""
    bounds = {None: None, "relu": [0.0, math.inf], "relu6": [0.0, 6.0]}[kind]
    return attrs if bounds is None else {**attrs, "bounds": bounds}


def refuse_own_input_quantizer(qconfig, layer):
    """A weight layer that cannot quantize its own input (only Conv2d can: spec 16, 24) refuses
    QConfig.input."""
    if qconfig.input is not None:
        raise UnsupportedOpError(
            f"{layer} cannot quantize its own input (QConfig.input: 1-bit signs or an affine "
            f"quantizer; only Conv2d can, spec 16 and 24); give it a QConfig without input, e.g. "
            f"QConfigMapping(by_type={{nn.{layer}: qtk.bits_qconfig(1, 8)}}) for binary weights "
            f"on int8 inputs")


def apply_activation(x, kind, prelu=None):
    """The fused activation ``kind`` on x; 'prelu' by the nn.PReLU ``prelu`` (its slopes)."""
    if kind == "relu":
        return torch.relu(x)
    if kind == "relu6":
        return torch.nn.functional.relu6(x)
    if kind == "prelu":
        return prelu(x)
    return x


# Filled as the family files define their classes and functions (modules/__init__ imports them all).
QAT_MODULES: List[type] = []  # every QATModule class that declares FLOAT_TYPES
QUANTIZED_MODULES: List[type] = []  # every QuantizedModule class that declares SOURCE_TYPES
FLOAT_EXPORTS: Dict[type, Callable] = {}  # float module type -> its float32 runtime op


def float_export(*module_types):
    """Registers ``function(module, input_shapes, where) -> QModelOp or None`` (None: an identity;
    a list of one-input QModelOps: a chain of nodes) as the float32 runtime op of each of
    ``module_types``, for parts kept in float."""
    def register(function):
        FLOAT_EXPORTS.update(dict.fromkeys(module_types, function))
        return function
    return register


@dataclasses.dataclass
class QModelOp:
    """One node of the exported graph: the runtime op, its constant inputs and its attributes."""
    op: str
    constants: List[Tuple[str, torch.Tensor]] = dataclasses.field(default_factory=list)
    attrs: Dict[str, list] = dataclasses.field(default_factory=dict)
    constant_bits: Dict[str, int] = dataclasses.field(default_factory=dict)  # packed storage
    constants_first: bool = False  # the constants are the node's first inputs (``c - x``)
    # (QParams, M, n): input 0 is first requantized to these qparams and their range (spec 3 with
    # one input), a layer's own input quantizer; the exporter writes that step as its own node.
    requantized_input: Optional[tuple] = None


class QATModule(nn.Module):
    """A float module that fake-quantizes its output (and weight) for quantization-aware training.

    Subclasses list the float modules they replace in ``FLOAT_TYPES`` and build themselves from
    one with ``from_float(module, qconfig)``; given a qconfig, this base creates the output's
    fake quantizer.
    """
    FLOAT_TYPES: Tuple[type, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "FLOAT_TYPES" in cls.__dict__:
            QAT_MODULES.append(cls)

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig is not None:
            self.activation_post_process = qconfig.activation()

    @classmethod
    def from_float(cls, module, qconfig):
        return cls(qconfig)

    def output_qparams(self):
        return deployed_qparams(self.activation_post_process)


class QATFloatThenQuantize(QATModule):
    """The QAT form of an op whose int8 form is fixed at convert time from the float module (a
    table, interpolation weights): the float module as it is, its output fake-quantized."""

    def __init__(self, module, qconfig):
        super().__init__(qconfig)
        self.module = module

    @classmethod
    def from_float(cls, module, qconfig):
        return cls(module, qconfig)

    def forward(self, *inputs):
        return self.activation_post_process(self.module(*inputs))


class QuantizedModule(nn.Module):
    """int8 tensors in, int8 tensors out, with integer arithmetic from :mod:`qtk.arithmetic`.

    Subclasses list the modules they convert from in ``SOURCE_TYPES`` and build themselves with
    ``from_module(module, input_qparams)``; ``qmodel_op()`` describes the node for export.
    """
    SOURCE_TYPES: Tuple[type, ...] = ()
    CHANNEL_SCALES = False  # reads and writes tensors quantized per channel (spec 25)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "SOURCE_TYPES" in cls.__dict__:
            QUANTIZED_MODULES.append(cls)

    def __init__(self, input_qparams, output_qparams):
        super().__init__()
        self.input_qparams = list(input_qparams)
        self.output_qparams = output_qparams

    def qmodel_op(self, input_shapes) -> QModelOp:
        raise NotImplementedError

    def extra_repr(self):
        return f"in={self.input_qparams}, out={self.output_qparams}"


def to_int8(values):
    return values.to(torch.int8)


def clamp_attr(lo, hi):
    return [int(lo), int(hi)]


class QuantizedWeightLayer(QuantizedModule):
    """Shared by convolution and linear: int8 weight, int32 bias, per-channel requantization."""

    def __init__(self, weight, bias, weight_fake_quant, input_qparams, output_qparams, activation,
                 where, input_scale=None, input_bound=255, slopes=None):
        super().__init__(input_qparams, output_qparams)
        # the scale the layer reads its input at: its own input quantizer's (signs: 1, each at
        # most input_bound in magnitude), or the int8 input's
        s_x = input_qparams[0].scales() if input_scale is None else input_scale
        if input_qparams[0].per_channel and input_scale is None:
            # a depthwise layer's output channel o reads input channel o // (O / C) (spec 25)
            if weight.shape[1] != 1:
                raise UnsupportedOpError(f"{where}: only a depthwise convolution reads an input "
                                         f"quantized per channel (spec 25)")
            s_x = s_x.repeat_interleave(weight.shape[0] // s_x.numel())
        if isinstance(weight_fake_quant, BinaryFakeQuantize):  # +-1, a scale per channel
            w_scale = weight_fake_quant.channel_scale(weight)
            w_q = arithmetic.binary_sign(weight.detach())
            self.weight_bits = 1
        else:
            w_scale, w_q = self._affine_weight(weight, weight_fake_quant)
            self.weight_bits = arithmetic.storage_bits(weight_fake_quant.qmin,
                                                       weight_fake_quant.qmax)
        if bias is None:
            bias = torch.zeros(weight.shape[0])
        bias_q, multiplier, shift = arithmetic.weight_layer_requantization(
            bias, w_q, s_x, w_scale, output_qparams.scales(), where,
            input_bound=input_bound)
        self.register_buffer("weight_q", w_q.to(torch.int8))
        self.register_buffer("bias_q", bias_q.to(torch.int32))
        self.register_buffer("multiplier", multiplier)
        self.register_buffer("shift", shift)
        self.register_buffer("weight_scale", w_scale)
        self.register_buffer("bias_scale", arithmetic.bias_scales(
            w_q, s_x, w_scale, output_qparams.scales()))  # read by the ONNX QDQ exporter
        self.activation = activation
        self.lo, self.hi = arithmetic.activation_bounds(activation, output_qparams)
        # a fused PReLU's (M, n) of the sums below zero (spec 22), or None
        self.negative = None
        if activation == "prelu":
            self.negative = arithmetic.fused_prelu_multipliers(
                slopes, w_q, s_x, w_scale, output_qparams.scales(), f"{where}: fused PReLU")

    @staticmethod
    def _affine_weight(weight, weight_fake_quant):
        """(scale per output channel, integer weight) by the fake quantizer's qparams."""
        if getattr(weight_fake_quant, "observer_enabled", True):  # False: frozen (ptq.adaround)
            with torch.no_grad():
                weight_fake_quant.observer(weight)  # the final weight's, not the last step's
        w_scale, _ = weight_fake_quant.calculate_qparams()
        arithmetic.check_finite_scale(w_scale, "weight")
        # a per-tensor weight scale is the same scale for every output channel
        w_scale = w_scale.reshape(-1).expand(weight.shape[0]).contiguous()
        return w_scale, arithmetic.quantize(weight.detach(), w_scale, 0, weight_fake_quant.qmin,
                                            weight_fake_quant.qmax, axis=0)

    def _requantize(self, acc, channel_shape):
        m, n = self.multiplier.reshape(channel_shape), self.shift.reshape(channel_shape)
        z = self.output_qparams.zero_point
        if self.negative is None:
            return to_int8(arithmetic.requantize(acc, m, n, z, self.lo, self.hi))
        negative = tuple(t.reshape(channel_shape) for t in self.negative)
        return to_int8(arithmetic.requantize_by_sign(acc, (m, n), negative, z, self.lo, self.hi))

    def _weight_op(self, op, attrs):
        """The node: weight (packed below 8 bits) and bias, with requantization attributes."""
        attrs = {**attrs, "multiplier": self.multiplier.tolist(), "shift": self.shift.tolist(),
                 "clamp": clamp_attr(self.lo, self.hi)}
        if self.negative is not None:
            attrs["negative_multiplier"], attrs["negative_shift"] = (
                t.tolist() for t in self.negative)
        return QModelOp(op, [("weight", self.weight_q), ("bias", self.bias_q)], attrs,
                        {"weight": self.weight_bits})
