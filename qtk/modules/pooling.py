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
    """Kernel, stride, padding (and dilation and ceil_mode / count_include_pad / divisor_override)
    of a torch pooling module, as the runtime's pooling attributes; unsupported modes are refused.
    ``ceil_mode`` = 1 and ``divisor_override`` = d are written only when set (spec 6)."""
    if getattr(module, "return_indices", False):
        raise ValueError(f"{where}: MaxPool2d(return_indices=True) is not supported")
    divisor_override = getattr(module, "divisor_override", None)
    if divisor_override is not None and not 1 <= divisor_override < 2**31:
        raise ValueError(f"{where}: AvgPool2d(divisor_override={divisor_override}) is not "
                         f"supported; the divisor must be in [1, 2^31)")
    stride = module.stride if module.stride is not None else module.kernel_size
    attrs = {"kernel": list(_pair(module.kernel_size)), "stride": list(_pair(stride)),
             "padding": list(_pair(module.padding))}
    if isinstance(module, nn.MaxPool2d):
        attrs["dilation"] = list(_pair(module.dilation))
    else:
        attrs["count_include_pad"] = [int(module.count_include_pad)]
    if module.ceil_mode:
        attrs["ceil_mode"] = [1]
    if divisor_override is not None:
        attrs["divisor_override"] = [int(divisor_override)]
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
        layer.divisor_override = layer.attrs.get("divisor_override", [None])[0]
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


def _padded_extents(size, kernel, stride, padding, out_size):
    """Spec 6: each window's length along one axis clipped to the padded input, ``min(a + k,
    H + p) - a`` for a window starting at ``a`` (k but for ceil mode's last windows)."""
    start = torch.arange(out_size, dtype=torch.int64) * stride - padding
    return torch.clamp(start + kernel, max=size + padding) - start


def _window_sum(x, kernel_size, stride, padding, ceil_mode):
    """Sums over torch's average-pooling windows, in float64 (sums of integers: exact)."""
    return F.avg_pool2d(x, kernel_size, stride, _pair(padding), ceil_mode, divisor_override=1)


def average_pool_divisors(height, width, kernel_size, stride, padding, count_include_pad,
                          ceil_mode=False, divisor_override=None):
    """Spec 6: the divisor of each window of an average pool over a ``height x width`` plane, an
    int64 ``[Ho, Wo]`` tensor (the same for every sample and channel), or ``divisor_override``."""
    if divisor_override is not None:
        return divisor_override
    counts = _window_sum(torch.ones(1, 1, height, width, dtype=torch.float64), kernel_size,
                         stride, padding, ceil_mode)[0, 0]
    if not count_include_pad:
        return counts.to(torch.int64)
    padding = _pair(padding)
    heights = _padded_extents(height, kernel_size[0], stride[0], padding[0], counts.shape[0])
    widths = _padded_extents(width, kernel_size[1], stride[1], padding[1], counts.shape[1])
    return heights[:, None] * widths[None, :]


def _window_average(x, zero_point, kernel_size, stride, padding, count_include_pad,
                    ceil_mode=False, divisor_override=None):
    centered = (x.to(torch.int64) - zero_point).to(torch.float64)
    total = _window_sum(centered, kernel_size, stride, padding, ceil_mode).to(torch.int64)
    divisor = average_pool_divisors(x.shape[2], x.shape[3], kernel_size, stride, padding,
                                    count_include_pad, ceil_mode, divisor_override)
    return to_int8(arithmetic.average(total, divisor, zero_point))


class QuantizedAvgPool2d(_WindowPool):
    SOURCE_TYPES = (nn.AvgPool2d,)

    def forward(self, x):
        return _window_average(x, self.input_qparams[0].zero_point, self.kernel_size, self.stride,
                               self.padding, self.count_include_pad, self.ceil_mode,
                               self.divisor_override)

    def qmodel_op(self, input_shapes):
        return QModelOp("avg_pool2d", attrs=self.attrs)


class SpatialMean(nn.Module):
    """``x.mean((2, 3), keepdim)``: global average pooling that may drop the spatial dims."""

    def __init__(self, keepdim=False):
        super().__init__()
        self.keepdim = keepdim

    def forward(self, x):
        return x.mean((2, 3), keepdim=self.keepdim)


def adaptive_window(output_size, input_shape, where, kind="AdaptiveAvgPool2d"):
    """AdaptiveAvgPool2d or AdaptiveMaxPool2d (``kind``) to a size that divides the input's:
    torch's windows then tile the plane, so it is the average (or max) pool of kernel = stride =
    in / out (spec 6). Other sizes give windows of unequal size, which the runtime does not run
    yet."""
    in_h, in_w = input_shape[-2:]
    out = [i if o is None else o for i, o in zip((in_h, in_w), _pair(output_size))]
    if in_h % out[0] or in_w % out[1]:
        raise UnsupportedOpError(
            f"{where}: {kind}({output_size}) of a {in_h}x{in_w} plane has windows of "
            f"unequal size, which qtk does not run yet; use an input whose size is a multiple of "
            f"{tuple(out)}, or keep the module in float")
    kernel = [in_h // out[0], in_w // out[1]]
    return {"kernel": kernel, "stride": kernel, "padding": [0, 0], "count_include_pad": [1]}


def adaptive_max_window(module, input_shape, where):
    """AdaptiveMaxPool2d as max_pool2d's attributes (``adaptive_window``'s tiling windows)."""
    if module.return_indices:
        raise ValueError(f"{where}: AdaptiveMaxPool2d(return_indices=True) is not supported")
    attrs = adaptive_window(module.output_size, input_shape, where, "AdaptiveMaxPool2d")
    del attrs["count_include_pad"]
    attrs["dilation"] = [1, 1]
    return attrs


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


class QuantizedAdaptiveMaxPool2d(QuantizedModule):
    """AdaptiveMaxPool2d to a size dividing the input's: the max pool of kernel = stride = in /
    out, keeping the input's (s, z) (spec 6)."""
    SOURCE_TYPES = (nn.AdaptiveMaxPool2d,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(input_qparams, input_qparams[0])
        layer.module, layer.where = module, where
        return layer

    def forward(self, x):
        kernel = adaptive_max_window(self.module, x.shape, self.where)["kernel"]
        return to_int8(F.max_pool2d(x.to(torch.float32), kernel, kernel))  # int8 exact in float32

    def qmodel_op(self, input_shapes):
        return QModelOp("max_pool2d", attrs=adaptive_max_window(self.module, input_shapes[0],
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


@float_export(nn.AdaptiveMaxPool2d)
def float_adaptive_max_pool2d(module, input_shapes, where):
    return QModelOp("max_pool2d", attrs=adaptive_max_window(module, input_shapes[0], where))
