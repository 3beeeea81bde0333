"""Resizing and padding: nearest resize and padding (constant, reflect, replicate) keep their
input's qparams; bilinear resize requantizes its fixed-point interpolation (spec 12, 13)."""
import torch
import torch.nn.functional as F
from torch import nn

from .. import arithmetic
from .base import QATFloatThenQuantize, QModelOp, QuantizedModule, float_export, to_int8


class UpsampleTo(nn.Upsample):
    """``F.interpolate(x, size=y.shape[-2:])``: the output size is an argument of each call, read
    from another tensor's shape (segmentation heads back to the input's size)."""

    def __init__(self, mode="nearest", align_corners=None):
        super().__init__(None, None, mode, align_corners)

    def forward(self, x, *size):
        return F.interpolate(x, size=call_size(size), mode=self.mode,
                             align_corners=self.align_corners)


def call_size(size):
    """A call's size arguments, (h, w) or a torch.Size of them, as a tuple of ints (or None)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(s) for s in size) if size else None


def _per_axis(value):
    return (value, value) if value is None or isinstance(value, (int, float)) else tuple(value)


def _check_upsample(module, where, modes):
    if module.mode not in modes:
        raise ValueError(f"{where}: interpolation mode {module.mode!r} is not supported; use "
                         f"'nearest' or 'bilinear'")
    if module.recompute_scale_factor:
        raise ValueError(f"{where}: recompute_scale_factor=True is not supported")


class _Resize(QuantizedModule):
    """Output size and per-axis source positions, from the module and the input's size."""

    def _set_geometry(self, module):
        self.size = _per_axis(module.size)
        self.scale_factor = _per_axis(module.scale_factor)

    def _size(self, size):
        """The module's size, or the call's (``UpsampleTo``)."""
        return _per_axis(call_size(size)) if size else self.size

    def _out_size(self, in_h, in_w, size):
        return tuple(arithmetic.resize_output_size(n, s, f) for n, s, f in
                     zip((in_h, in_w), self._size(size), self.scale_factor))


class QuantizedResizeNearest(_Resize):
    """Nearest resize: a gather by torch's own index rule (spec 12)."""
    SOURCE_TYPES = (nn.Upsample,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        _check_upsample(module, where, ("nearest",))
        layer = cls(input_qparams, input_qparams[0])
        layer._set_geometry(module)
        return layer

    def _indices(self, in_h, in_w, size):
        return nearest_source_indices(self._size(size), self.scale_factor, in_h, in_w)

    def forward(self, x, *size):
        index_h, index_w = self._indices(x.shape[2], x.shape[3], size)
        return x[:, :, index_h][:, :, :, index_w]

    def qmodel_op(self, input_shapes, *size):
        return nearest_op(*self._indices(*input_shapes[0][2:], size))


def nearest_source_indices(size, scale_factor, in_h, in_w):
    """Per axis, the source row / column of each output one (spec 12), for float and int8 alike."""
    out = [arithmetic.resize_output_size(n, s, f) for n, s, f in zip((in_h, in_w), size,
                                                                      scale_factor)]
    return (arithmetic.nearest_indices(in_h, out[0], scale_factor[0]),
            arithmetic.nearest_indices(in_w, out[1], scale_factor[1]))


def nearest_op(index_h, index_w):
    return QModelOp("resize_nearest", attrs={"index_h": index_h.tolist(),
                                             "index_w": index_w.tolist()})


class QATResizeBilinear(QATFloatThenQuantize):
    """Bilinear resize with a fake-quantized output. ``from_float`` leaves nearest resizing as
    the float module: it moves values and keeps its input's quantization."""
    FLOAT_TYPES = (nn.Upsample, UpsampleTo)

    @classmethod
    def from_float(cls, module, qconfig):
        return module if module.mode == "nearest" else cls(module, qconfig)


class QuantizedResizeBilinear(_Resize):
    """Bilinear resize with Q10 weights and one requantization (spec 12)."""
    SOURCE_TYPES = (QATResizeBilinear,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        _check_upsample(module.module, where, ("bilinear",))
        layer = cls(input_qparams, module.output_qparams())
        layer._set_geometry(module.module)
        layer.align_corners = bool(module.module.align_corners)
        layer.multiplier, layer.shift = arithmetic.bilinear_multiplier(
            input_qparams[0].scale, layer.output_qparams.scale)
        return layer

    def _taps(self, in_h, in_w, size):
        return bilinear_taps(in_h, in_w, self._out_size(in_h, in_w, size), self.scale_factor,
                             self.align_corners)

    def forward(self, x, *size):
        taps_h, taps_w = self._taps(x.shape[2], x.shape[3], size)
        acc = arithmetic.bilinear_accumulate(x, self.input_qparams[0].zero_point, taps_h, taps_w)
        _, z_y, lo, hi = self.output_qparams
        return to_int8(arithmetic.requantize(acc, self.multiplier, self.shift, z_y, lo, hi))

    def qmodel_op(self, input_shapes, *size):
        (h0, h1, wh), (w0, w1, ww) = self._taps(*input_shapes[0][2:], size)
        return QModelOp("resize_bilinear", attrs={
            "h0": h0.tolist(), "h1": h1.tolist(), "h_weight": wh.tolist(),
            "w0": w0.tolist(), "w1": w1.tolist(), "w_weight": ww.tolist(),
            "multiplier": [self.multiplier], "shift": [self.shift]})


def bilinear_taps(in_h, in_w, out_size, scale_factor, align_corners):
    return (arithmetic.bilinear_taps(in_h, out_size[0], scale_factor[0], align_corners),
            arithmetic.bilinear_taps(in_w, out_size[1], scale_factor[1], align_corners))


# The runtime pad op's `mode` attribute (docs/qmodel_format.md); constant is the default.
PAD_MODES = {nn.ConstantPad2d: 0, nn.ReflectionPad2d: 1, nn.ReplicationPad2d: 2}


def pad_source_indices(size, before, after, mode):
    """Spec 13: the input index each output index along one axis reads, for reflect (1) or
    replicate (2) padding: torch's rule, mirrored about the edge element (reflect needs each pad
    below ``size``) or clamped to it."""
    i = torch.arange(-before, size + after)
    if mode == 1:
        i = i.abs()
        return torch.where(i >= size, 2 * (size - 1) - i, i)
    return i.clamp(0, size - 1)


def pad_op(padding, mode, value):
    """The runtime pad node; ``value`` (constant padding only) is in the tensor's dtype: the
    quantized value for int8, the float for float32. torch refuses reflect pads as wide as their
    axis, and so does the runtime's loader."""
    attrs = {"pads": list(padding)}
    if mode == 0:
        attrs["value"] = [value]
    else:
        attrs["mode"] = [mode]
    return QModelOp("pad", attrs=attrs)


class QuantizedPad(QuantizedModule):
    """Padding of the last two dims (spec 13): constant padding with the quantized pad value, or
    reflect / replicate padding, which only move int8 values."""
    SOURCE_TYPES = tuple(PAD_MODES)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, input_qparams[0])
        layer.padding = tuple(module.padding)
        layer.mode = PAD_MODES[type(module)]
        layer.value_q = (arithmetic.quantize_scalar(module.value, *input_qparams[0])
                         if layer.mode == 0 else None)
        return layer

    def forward(self, x):
        if self.mode == 0:
            return F.pad(x, self.padding, value=self.value_q)
        left, right, top, bottom = self.padding
        rows = pad_source_indices(x.shape[-2], top, bottom, self.mode).to(x.device)
        columns = pad_source_indices(x.shape[-1], left, right, self.mode).to(x.device)
        return x[..., rows, :][..., columns]

    def qmodel_op(self, input_shapes):
        return pad_op(self.padding, self.mode, self.value_q)


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(nn.Upsample, UpsampleTo)
def float_resize(module, input_shapes, where, *size):
    _check_upsample(module, where, ("nearest", "bilinear"))
    size = _per_axis(call_size(size)) if size else _per_axis(module.size)
    scale_factor, (in_h, in_w) = _per_axis(module.scale_factor), input_shapes[0][2:]
    if module.mode == "nearest":
        return nearest_op(*nearest_source_indices(size, scale_factor, in_h, in_w))
    out_size = [arithmetic.resize_output_size(n, s, f)
                for n, s, f in zip((in_h, in_w), size, scale_factor)]
    (h0, h1, wh), (w0, w1, ww) = [
        [t.tolist() for t in arithmetic.bilinear_sources(n, m, f, bool(module.align_corners))]
        for n, m, f in zip((in_h, in_w), out_size, scale_factor)]
    return QModelOp("resize_bilinear", attrs={  # float weights: the fraction of index 1
        "h0": h0, "h1": h1, "h_weight": [float(w) for w in wh],
        "w0": w0, "w1": w1, "w_weight": [float(w) for w in ww]})


@float_export(*PAD_MODES)
def float_pad(module, input_shapes, where):
    return pad_op(tuple(module.padding), PAD_MODES[type(module)],
                  float(getattr(module, "value", 0.0)))
