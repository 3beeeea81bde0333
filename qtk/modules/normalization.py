"""LayerNorm, GroupNorm (statistics, square root and affine part in integers, spec 19) and L2
normalization (spec 19.1)."""
import torch
from torch import nn

from .. import arithmetic
from ..errors import UnsupportedOpError
from .base import (QATFloatThenQuantize, QModelOp, QuantizedModule, clamp_attr, float_export,
                   to_int8)


class QATNorm(QATFloatThenQuantize):
    """LayerNorm or GroupNorm in float (gamma and beta train as usual), output fake-quantized."""
    FLOAT_TYPES = (nn.LayerNorm, nn.GroupNorm)


def _affine(module, channels):
    weight = module.weight if module.weight is not None else torch.ones(channels)
    bias = module.bias if module.bias is not None else torch.zeros(channels)
    return weight.detach().reshape(-1), bias.detach().reshape(-1)


class QuantizedNorm(QuantizedModule):
    """Spec 19: a row's sums and sum of squares, an integer square root, the normalized values in
    Q16, then a per-channel layer (gamma exact at +-127, beta as its bias)."""
    SOURCE_TYPES = (QATNorm,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        norm = module.module
        layer = cls(input_qparams, module.output_qparams())
        layer.where, layer.eps = where, norm.eps
        if isinstance(norm, nn.GroupNorm):
            layer.groups, layer.axes, channels = norm.num_groups, None, norm.num_channels
        else:
            layer.groups, layer.axes = None, len(norm.normalized_shape)
            channels = int(torch.Size(norm.normalized_shape).numel())
        layer.gamma, layer.beta = _affine(norm, channels)
        return layer

    def _rows(self, shape):
        """(dims normalized together, values per row); GroupNorm's rows are dims 2.. of the
        input viewed as [N, groups, C / groups, ...]."""
        rank = len(shape)
        if self.groups is None:
            dims = tuple(range(rank - self.axes, rank))
            count = int(torch.Size(shape[rank - self.axes:]).numel())
            return dims, count
        count = int(torch.Size(shape[1:]).numel()) // self.groups
        return tuple(range(2, rank + 1)), count

    def _plan(self, shape):
        dims, count = self._rows(shape)
        if count > arithmetic.NORM_MAX_ROW:
            raise UnsupportedOpError(f"{self.where}: rows of {count} values are longer than the "
                                     f"2^14 the integer normalization bounds (spec 19); keep it "
                                     f"float with a qconfig of None")
        s_x, s_y = self.input_qparams[0].scale, self.output_qparams.scale
        eps_term = arithmetic.norm_eps_term(count, self.eps, s_x, self.where)
        gamma_q, bias_q, multiplier, shift = arithmetic.norm_affine_requantization(
            self.gamma, self.beta, s_y, count, self.where)
        return dims, eps_term, gamma_q, bias_q, multiplier, shift

    def forward(self, x):
        dims, eps_term, gamma_q, bias_q, multiplier, shift = self._plan(tuple(x.shape))
        grouped = x if self.groups is None else x.reshape(x.shape[0], self.groups, -1,
                                                          *x.shape[2:])
        t = arithmetic.normalized_q16(grouped, self.input_qparams[0].zero_point, dims, eps_term)
        t = t.reshape(x.shape)
        channel = (1,) * (x.dim() - self.axes) + tuple(x.shape[x.dim() - self.axes:]) \
            if self.groups is None else (1, -1) + (1,) * (x.dim() - 2)
        acc = t * gamma_q.reshape(channel) + bias_q.reshape(channel)
        _, z_y, lo, hi = self.output_qparams
        return to_int8(arithmetic.requantize(acc, multiplier.reshape(channel),
                                             shift.reshape(channel), z_y, lo, hi))

    def qmodel_op(self, input_shapes):
        _, eps_term, gamma_q, bias_q, multiplier, shift = self._plan(tuple(input_shapes[0]))
        attrs = {"eps_term": [eps_term], "multiplier": multiplier.tolist(),
                 "shift": shift.tolist(), "clamp": clamp_attr(*self.output_qparams[2:])}
        if self.groups is None:
            op, attrs = "layer_norm", {"axes": [self.axes], **attrs}
        else:
            op, attrs = "group_norm", {"groups": [self.groups], **attrs}
        return QModelOp(op, [("weight", gamma_q.to(torch.int8)), ("bias", bias_q.to(torch.int32))],
                        attrs)


# ---- float32 runtime op (a part kept in float) ---------------------------------------------------

@float_export(nn.LayerNorm)
def float_layer_norm(module, input_shapes, where):
    """Normalizes over the last ``len(normalized_shape)`` dims; no affine part is weight 1, bias 0."""
    shape = tuple(module.normalized_shape)
    weight = module.weight if module.weight is not None else torch.ones(shape)
    bias = module.bias if module.bias is not None else torch.zeros(shape)
    return QModelOp("layer_norm", [("weight", weight.detach().float()),
                                   ("bias", bias.detach().float())],
                    {"axes": [len(shape)], "eps": [float(module.eps)]})


@float_export(nn.GroupNorm)
def float_group_norm(module, input_shapes, where):
    """torch's F.group_norm over [N, C, ...]; no affine part is weight 1, bias 0."""
    channels = module.num_channels
    weight = module.weight if module.weight is not None else torch.ones(channels)
    bias = module.bias if module.bias is not None else torch.zeros(channels)
    return QModelOp("group_norm", [("weight", weight.detach().float().reshape(-1)),
                                   ("bias", bias.detach().float().reshape(-1))],
                    {"groups": [module.num_groups], "eps": [float(module.eps)]})


class L2Normalize(nn.Module):
    """``F.normalize(x, p=2, dim, eps)``: x / max(||x||_2 over ``dim``, eps) (SSD's VGG
    backbone). int8 by spec 19.1 (``QuantizedL2Normalize``), float32 as the runtime's
    ``l2_normalize``.

    Args:
        dim: the dim normalized over; not the batch dim.
        eps: the smallest norm divided by.
    """

    def __init__(self, dim=1, eps=1e-12):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x):
        return nn.functional.normalize(x, p=2.0, dim=self.dim, eps=self.eps)


def l2_normalize_form(input, p=2.0, dim=1, eps=1e-12, out=None):
    """The module form of ``F.normalize`` (``MODULE_FORMS`` of qtk/graph/functional.py)."""
    if p != 2 or out is not None:
        raise UnsupportedOpError(f"normalize(p={p}) has no form in qtk; only p=2 (without out=)")
    return L2Normalize(dim, eps), (input,)


def _l2_axis(dim, rank, where):
    if dim % rank == 0:
        raise UnsupportedOpError(f"{where}: normalize(dim={dim}) over the batch dimension "
                                 f"is not supported")
    return dim % rank


class QATL2Normalize(QATFloatThenQuantize):
    """L2Normalize in float, output fake-quantized."""
    FLOAT_TYPES = (L2Normalize,)


class QuantizedL2Normalize(QuantizedModule):
    """Spec 19.1: a row's sum of squares, the integer square root of spec 19 (no mean, no affine
    part), the values in Q16, then one requantization by 2^-16 / s_y."""
    SOURCE_TYPES = (QATL2Normalize,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, module.output_qparams())
        layer.where, layer.dim, layer.eps = where, module.module.dim, module.module.eps
        return layer

    def _plan(self, rank):
        axis = _l2_axis(self.dim, rank, self.where)
        eps_term = arithmetic.l2_eps_term(self.eps, self.input_qparams[0].scale, self.where)
        multiplier, shift = arithmetic.quantize_multiplier(
            2.0**-arithmetic.NORM_FRACTION_BITS / float(self.output_qparams.scale))
        return axis, eps_term, multiplier, shift

    def forward(self, x):
        axis, eps_term, multiplier, shift = self._plan(x.dim())
        t = arithmetic.l2_normalized_q16(x, self.input_qparams[0].zero_point, (axis,), eps_term)
        _, z_y, lo, hi = self.output_qparams
        return to_int8(arithmetic.requantize(t, multiplier, shift, z_y, lo, hi))

    def qmodel_op(self, input_shapes):
        axis, eps_term, multiplier, shift = self._plan(len(input_shapes[0]))
        return QModelOp("l2_normalize", attrs={
            "axis": [axis], "eps_term": [eps_term], "multiplier": [multiplier], "shift": [shift],
            "clamp": clamp_attr(*self.output_qparams[2:])})


@float_export(L2Normalize)
def float_l2_normalize(module, input_shapes, where):
    axis = _l2_axis(module.dim, len(input_shapes[0]), where)
    return QModelOp("l2_normalize", attrs={"axis": [axis], "eps": [float(module.eps)]})
