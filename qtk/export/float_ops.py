"""Export of float modules, the parts a QConfigMapping kept in float or a whole float model: each
as a float32 runtime op (docs/qmodel_format.md, "Float32 ops"). BatchNorm is folded here, exactly
as QAT would have."""
import math

import torch
from torch import nn

from .. import arithmetic, modules
from ..modules.base import QModelOp, activation_kind
from ..modules.pooling import global_pool_keepdim, window_geometry
from .capture import UnsupportedOpError

_NO_BOUNDS = None


def _bounds(kind):
    return {None: _NO_BOUNDS, "relu": [0.0, math.inf], "relu6": [0.0, 6.0]}[kind]


def _with_bounds(attrs, kind):
    bounds = _bounds(kind)
    return attrs if bounds is None else {**attrs, "bounds": bounds}


def _folded_conv(module):
    """(conv, folded weight, folded bias, activation) of a float conv or fused conv container."""
    parts = list(module) if isinstance(module, nn.Sequential) else [module]
    conv, rest = parts[0], parts[1:]
    weight = conv.weight.detach()
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros(conv.out_channels)
    if rest and isinstance(rest[0], nn.BatchNorm2d):
        bn = rest.pop(0)
        scale = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
        weight = weight * scale.reshape(-1, 1, 1, 1)
        bias = (bias - bn.running_mean) * scale + bn.bias.detach()
    return conv, weight.float(), bias.float(), activation_kind(rest[0] if rest else None)


def _conv(module, input_shapes, where):
    conv, weight, bias, kind = _folded_conv(module)
    modules.conv.check_conv_supported(conv)
    attrs = {"stride": list(conv.stride), "padding": list(conv.padding),
             "dilation": list(conv.dilation), "groups": [conv.groups]}
    return QModelOp("conv2d", [("weight", weight), ("bias", bias)], _with_bounds(attrs, kind))


def _linear(module, input_shapes, where):
    linear, act = (module[0], module[1]) if isinstance(module, nn.Sequential) else (module, None)
    bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
    return QModelOp("linear", [("weight", linear.weight.detach().float()),
                               ("bias", bias.detach().float())],
                    _with_bounds({}, activation_kind(act)))


def _add(module, input_shapes, where):
    kind = ("relu6" if module.six else "relu") if isinstance(module, modules.AddReLU) else None
    return QModelOp("add", attrs=_with_bounds({}, kind))


def _clamp(module, input_shapes, where):
    bounds = [0.0, math.inf] if isinstance(module, nn.ReLU) else [float(module.min_val),
                                                                   float(module.max_val)]
    return QModelOp("clamp", attrs={"bounds": bounds})


def _nearest(module, input_shapes, where):
    if module.mode != "nearest":
        raise ValueError(f"{where}: float {module.mode} resizing has no runtime kernel; quantize it")
    in_h, in_w = input_shapes[0][2:]
    scale_h, scale_w = ((module.scale_factor,) * 2 if not isinstance(module.scale_factor, tuple)
                        else module.scale_factor)
    size_h, size_w = ((module.size,) * 2 if not isinstance(module.size, tuple) else module.size)
    out_h = arithmetic.resize_output_size(in_h, size_h, scale_h)
    out_w = arithmetic.resize_output_size(in_w, size_w, scale_w)
    return QModelOp("resize_nearest", attrs={
        "index_h": arithmetic.nearest_indices(in_h, out_h, scale_h).tolist(),
        "index_w": arithmetic.nearest_indices(in_w, out_w, scale_w).tolist()})


def _flatten(module, input_shapes, where):
    if (module.start_dim, module.end_dim) != (1, -1):
        raise UnsupportedOpError(f"{where}: only Flatten(1, -1) is supported")
    return QModelOp("flatten")


FLOAT_EXPORTERS = {
    nn.Conv2d: _conv, modules.ConvReLU2d: _conv, modules.ConvBn2d: _conv,
    modules.ConvBnReLU2d: _conv,
    nn.Linear: _linear, modules.LinearReLU: _linear,
    modules.Add: _add, modules.AddReLU: _add,
    modules.Mul: lambda m, shapes, where: QModelOp("mul"),
    modules.Concat: lambda m, shapes, where: QModelOp(
        "concat", attrs={"axis": [m.dim % len(shapes[0])]}),
    nn.ReLU: _clamp, nn.ReLU6: _clamp, nn.Hardtanh: _clamp,
    nn.Hardswish: lambda m, shapes, where: QModelOp("hardswish"),
    nn.Hardsigmoid: lambda m, shapes, where: QModelOp("hardsigmoid"),
    nn.Sigmoid: lambda m, shapes, where: QModelOp("sigmoid"),
    nn.MaxPool2d: lambda m, shapes, where: QModelOp("max_pool2d", attrs=window_geometry(m, where)),
    nn.AvgPool2d: lambda m, shapes, where: QModelOp("avg_pool2d", attrs=window_geometry(m, where)),
    nn.AdaptiveAvgPool2d: lambda m, shapes, where: QModelOp(
        "global_avg_pool2d", attrs={"keepdim": [int(global_pool_keepdim(m, where))]}),
    modules.SpatialMean: lambda m, shapes, where: QModelOp(
        "global_avg_pool2d", attrs={"keepdim": [int(m.keepdim)]}),
    nn.Upsample: _nearest,
    nn.ConstantPad2d: lambda m, shapes, where: QModelOp(
        "pad", attrs={"pads": list(m.padding), "value": [float(m.value)]}),
    nn.Flatten: _flatten,
    nn.Identity: lambda m, shapes, where: None, nn.Dropout: lambda m, shapes, where: None,
    modules.QuantStub: lambda m, shapes, where: None,  # a float model's own stubs: identities
    modules.DequantStub: lambda m, shapes, where: None,
}


def float_op(module, input_shapes, where):
    """The float32 runtime op of a float module (None for an identity), or a clear refusal."""
    for cls in type(module).__mro__:
        if cls in FLOAT_EXPORTERS:
            return FLOAT_EXPORTERS[cls](module, input_shapes, where)
    raise UnsupportedOpError(f"{where}: {type(module).__name__} was kept in float but the runtime "
                             f"has no float kernel for it; quantize it (give it a qconfig and "
                             f"export the qtk.convert model) or replace it with a supported module")
