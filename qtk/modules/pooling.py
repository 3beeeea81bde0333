"""Pooling: pass-through in QAT (no own quantizer), integer kernels when Quantized (spec 6)."""
import torch
import torch.nn.functional as F
from torch import nn

from .. import arithmetic
from ..errors import UnsupportedOpError
from .base import QModelOp, QuantizedModule, float_export, to_int8


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def window_geometry(module, where):
    """Kernel, stride, padding (and dilation and ceil_mode / count_include_pad) of a torch pooling
    module, as the runtime's pooling attributes; unsupported modes are refused. MaxPool2d's ceil
    mode is its attribute ``ceil_mode`` = 1, written only when set (spec 6); AvgPool2d's is
    refused: torch's ceil-mode divisor counts the padding but not what lies past it."""
    if module.ceil_mode and not isinstance(module, nn.MaxPool2d):
        raise ValueError(f"{where}: {type(module).__name__}(ceil_mode=True) is not supported; "
                         f"use ceil_mode=False (pad the input instead)")
    if getattr(module, "return_indices", False):
        raise ValueError(f"{where}: MaxPool2d(return_indices=True) is not supported")
    if getattr(module, "divisor_override", None) is not None:
        raise ValueError(f"{where}: AvgPool2d(divisor_override=...) is not supported")
    stride = module.stride if module.stride is not None else module.kernel_size
    attrs = {"kernel": list(_pair(module.kernel_size)), "stride": list(_pair(stride)),
             "padding": list(_pair(module.padding))}
    if isinstance(module, nn.MaxPool2d):
        attrs["dilation"] = list(_pair(module.dilation))
        if module.ceil_mode:
            attrs["ceil_mode"] = [1]
    else:
        attrs["count_include_pad"] = [int(module.count_include_pad)]
    return attrs


class _WindowPool(QuantizedModule):
    """Shared by max and average pooling: the window's geometry, read from the torch module."""

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, input_qparams[0])
        layer.attrs = window_geometry(module, where)
        layer.kernel_size, layer.stride = tuple(layer.attrs["kernel"]), tuple(layer.attrs["stride"])
        layer.padding = tuple(layer.attrs["padding"])
        layer.dilation = tuple(layer.attrs.get("dilation", (1, 1)))
        layer.count_include_pad = bool(layer.attrs.get("count_include_pad", [1])[0])
        layer.ceil_mode = bool(layer.attrs.get("ceil_mode", [0])[0])
        return layer


class QuantizedMaxPool2d(_WindowPool):
    SOURCE_TYPES = (nn.MaxPool2d,)

    def forward(self, x):
        # int8 values are exact in float32; torch pads max pooling with -inf
        y = F.max_pool2d(x.to(torch.float32), self.kernel_size, self.stride, self.padding,
                         self.dilation, ceil_mode=self.ceil_mode)
        return to_int8(y)

    def qmodel_op(self, input_shapes):
        return QModelOp("max_pool2d", attrs=self.attrs)


def _window_average(x, zero_point, kernel_size, stride, padding, count_include_pad):
    centered = (x.to(torch.int64) - zero_point).to(torch.float64)

    def window_sum(t):
        return F.avg_pool2d(t, kernel_size, stride, padding, divisor_override=1)

    total = window_sum(centered).to(torch.int64)
    if count_include_pad:
        divisor = kernel_size[0] * kernel_size[1]
    else:
        divisor = window_sum(torch.ones_like(centered)).to(torch.int64)
    return to_int8(arithmetic.average(total, divisor, zero_point))


class QuantizedAvgPool2d(_WindowPool):
    SOURCE_TYPES = (nn.AvgPool2d,)

    def forward(self, x):
        return _window_average(x, self.input_qparams[0].zero_point, self.kernel_size, self.stride,
                               self.padding, self.count_include_pad)

    def qmodel_op(self, input_shapes):
        return QModelOp("avg_pool2d", attrs=self.attrs)


class SpatialMean(nn.Module):
    """``x.mean((2, 3), keepdim)``: global average pooling that may drop the spatial dims."""

    def __init__(self, keepdim=False):
        super().__init__()
        self.keepdim = keepdim

    def forward(self, x):
        return x.mean((2, 3), keepdim=self.keepdim)


def adaptive_window(output_size, input_shape, where):
    """AdaptiveAvgPool2d to a size that divides the input's: torch's windows then tile the plane,
    so it is the average pool of kernel = stride = in / out (spec 6). Other sizes give windows of
    unequal size, which the runtime does not run yet."""
    in_h, in_w = input_shape[-2:]
    out = [i if o is None else o for i, o in zip((in_h, in_w), _pair(output_size))]
    if in_h % out[0] or in_w % out[1]:
        raise UnsupportedOpError(
            f"{where}: AdaptiveAvgPool2d({output_size}) of a {in_h}x{in_w} plane has windows of "
            f"unequal size, which qtk does not run yet; use an input whose size is a multiple of "
            f"{tuple(out)}, or keep the module in float")
    kernel = [in_h // out[0], in_w // out[1]]
    return {"kernel": kernel, "stride": kernel, "padding": [0, 0], "count_include_pad": [1]}


def _is_global(module):
    return isinstance(module, SpatialMean) or _pair(module.output_size) == (1, 1)


def _global_average(x, zero_point, keepdim):
    total = (x.to(torch.int64) - zero_point).sum(dim=(2, 3), keepdim=keepdim)
    return to_int8(arithmetic.average(total, x.shape[2] * x.shape[3], zero_point))


class QuantizedAdaptiveAvgPool2d(QuantizedModule):
    """AdaptiveAvgPool2d or a spatial mean: the average of each whole plane (output size 1), or
    of each tile of it (``adaptive_window``)."""
    SOURCE_TYPES = (nn.AdaptiveAvgPool2d, SpatialMean)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, input_qparams[0])
        layer.is_global, layer.where = _is_global(module), where
        layer.keepdim = getattr(module, "keepdim", True)
        layer.output_size = getattr(module, "output_size", 1)
        return layer

    def forward(self, x):
        z = self.input_qparams[0].zero_point
        if self.is_global:
            return _global_average(x, z, self.keepdim)
        attrs = adaptive_window(self.output_size, x.shape, self.where)
        return _window_average(x, z, attrs["kernel"], attrs["stride"], 0, True)

    def qmodel_op(self, input_shapes):
        if self.is_global:
            return QModelOp("global_avg_pool2d", attrs={"keepdim": [int(self.keepdim)]})
        return QModelOp("avg_pool2d", attrs=adaptive_window(self.output_size, input_shapes[0],
                                                            self.where))


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(nn.MaxPool2d)
def float_max_pool2d(module, input_shapes, where):
    return QModelOp("max_pool2d", attrs=window_geometry(module, where))


@float_export(nn.AvgPool2d)
def float_avg_pool2d(module, input_shapes, where):
    return QModelOp("avg_pool2d", attrs=window_geometry(module, where))


@float_export(nn.AdaptiveAvgPool2d, SpatialMean)
def float_adaptive_avg_pool2d(module, input_shapes, where):
    if _is_global(module):
        return QModelOp("global_avg_pool2d",
                        attrs={"keepdim": [int(getattr(module, "keepdim", True))]})
    return QModelOp("avg_pool2d", attrs=adaptive_window(module.output_size, input_shapes[0], where))
