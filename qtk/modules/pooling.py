"""Pooling: pass-through in QAT (no own quantizer), integer kernels when Quantized (spec 6)."""
import torch
import torch.nn.functional as F
from torch import nn

from .. import arithmetic
from .base import QModelOp, QuantizedModule, float_export, to_int8


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def window_geometry(module, where):
    """Kernel, stride, padding (and dilation / count_include_pad) of a torch pooling module, as
    the runtime's pooling attributes; unsupported modes are refused."""
    if module.ceil_mode:
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
        return layer


class QuantizedMaxPool2d(_WindowPool):
    SOURCE_TYPES = (nn.MaxPool2d,)

    def forward(self, x):
        # int8 values are exact in float32; torch pads max pooling with -inf
        y = F.max_pool2d(x.to(torch.float32), self.kernel_size, self.stride, self.padding,
                         self.dilation)
        return to_int8(y)

    def qmodel_op(self, input_shapes):
        return QModelOp("max_pool2d", attrs=self.attrs)


class QuantizedAvgPool2d(_WindowPool):
    SOURCE_TYPES = (nn.AvgPool2d,)

    def forward(self, x):
        z = self.input_qparams[0].zero_point
        centered = (x.to(torch.int64) - z).to(torch.float64)

        def window_sum(t):
            return F.avg_pool2d(t, self.kernel_size, self.stride, self.padding, divisor_override=1)

        total = window_sum(centered).to(torch.int64)
        if self.count_include_pad:
            divisor = self.kernel_size[0] * self.kernel_size[1]
        else:
            divisor = window_sum(torch.ones_like(centered)).to(torch.int64)
        return to_int8(arithmetic.average(total, divisor, z))

    def qmodel_op(self, input_shapes):
        return QModelOp("avg_pool2d", attrs=self.attrs)


class SpatialMean(nn.Module):
    """``x.mean((2, 3), keepdim)``: global average pooling that may drop the spatial dims."""

    def __init__(self, keepdim=False):
        super().__init__()
        self.keepdim = keepdim

    def forward(self, x):
        return x.mean((2, 3), keepdim=self.keepdim)


def global_pool_keepdim(module, where):
    if isinstance(module, nn.AdaptiveAvgPool2d) and _pair(module.output_size) != (1, 1):
        raise ValueError(f"{where}: AdaptiveAvgPool2d({module.output_size}) is not supported; "
                         f"only output size 1 (global average pooling)")
    return getattr(module, "keepdim", True)


class QuantizedGlobalAvgPool2d(QuantizedModule):
    """AdaptiveAvgPool2d(1) or a spatial mean: the average of each whole plane."""
    SOURCE_TYPES = (nn.AdaptiveAvgPool2d, SpatialMean)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, input_qparams[0])
        layer.keepdim = global_pool_keepdim(module, where)
        return layer

    def forward(self, x):
        z = self.input_qparams[0].zero_point
        total = (x.to(torch.int64) - z).sum(dim=(2, 3), keepdim=self.keepdim)
        return to_int8(arithmetic.average(total, x.shape[2] * x.shape[3], z))

    def qmodel_op(self, input_shapes):
        return QModelOp("global_avg_pool2d", attrs={"keepdim": [int(self.keepdim)]})


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(nn.MaxPool2d)
def float_max_pool2d(module, input_shapes, where):
    return QModelOp("max_pool2d", attrs=window_geometry(module, where))


@float_export(nn.AvgPool2d)
def float_avg_pool2d(module, input_shapes, where):
    return QModelOp("avg_pool2d", attrs=window_geometry(module, where))


@float_export(nn.AdaptiveAvgPool2d, SpatialMean)
def float_global_avg_pool2d(module, input_shapes, where):
    return QModelOp("global_avg_pool2d",
                    attrs={"keepdim": [int(global_pool_keepdim(module, where))]})
