"""Pooling: pass-through in QAT (no own quantizer), integer kernels when Quantized (spec 6)."""
import torch
import torch.nn.functional as F
from torch import nn

from .. import arithmetic
from .base import QModelOp, QuantizedModule, to_int8


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class _WindowPool(QuantizedModule):
    """Shared by max and average pooling: the window's geometry, read from the torch module."""

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        if module.ceil_mode:
            raise ValueError(f"{where}: {type(module).__name__}(ceil_mode=True) is not supported; "
                             f"use ceil_mode=False (pad the input instead)")
        if getattr(module, "return_indices", False):
            raise ValueError(f"{where}: MaxPool2d(return_indices=True) is not supported")
        if getattr(module, "divisor_override", None) is not None:
            raise ValueError(f"{where}: AvgPool2d(divisor_override=...) is not supported")
        layer = cls(input_qparams, input_qparams[0])
        layer.kernel_size = _pair(module.kernel_size)
        layer.stride = _pair(module.stride if module.stride is not None else module.kernel_size)
        layer.padding = _pair(module.padding)
        layer.dilation = _pair(getattr(module, "dilation", 1))
        layer.count_include_pad = bool(getattr(module, "count_include_pad", True))
        return layer

    def _window_attrs(self):
        return {"kernel": list(self.kernel_size), "stride": list(self.stride),
                "padding": list(self.padding)}


class QuantizedMaxPool2d(_WindowPool):
    SOURCE_TYPES = (nn.MaxPool2d,)

    def forward(self, x):
        # int8 values are exact in float32; torch pads max pooling with -inf
        y = F.max_pool2d(x.to(torch.float32), self.kernel_size, self.stride, self.padding,
                         self.dilation)
        return to_int8(y)

    def qmodel_op(self, input_shapes):
        return QModelOp("max_pool2d", attrs={**self._window_attrs(),
                                             "dilation": list(self.dilation)})


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
        return QModelOp("avg_pool2d", attrs={**self._window_attrs(),
                                             "count_include_pad": [int(self.count_include_pad)]})


class QuantizedGlobalAvgPool2d(QuantizedModule):
    """AdaptiveAvgPool2d(1): the average of each whole plane."""
    SOURCE_TYPES = (nn.AdaptiveAvgPool2d,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        if _pair(module.output_size) != (1, 1):
            raise ValueError(f"{where}: AdaptiveAvgPool2d({module.output_size}) is not supported; "
                             f"only output size 1 (global average pooling)")
        return cls(input_qparams, input_qparams[0])

    def forward(self, x):
        z = self.input_qparams[0].zero_point
        total = (x.to(torch.int64) - z).sum(dim=(2, 3), keepdim=True)
        return to_int8(arithmetic.average(total, x.shape[2] * x.shape[3], z))

    def qmodel_op(self, input_shapes):
        return QModelOp("global_avg_pool2d")
