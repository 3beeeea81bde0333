"""Functional calls in forward(): each becomes a module, stays as a byte-moving shape op, or is
refused with the op, its module path and the way out.

Turning ``a + b``, ``torch.cat``, ``F.relu``, ``x.mean((2, 3))`` ... into modules (``Add``,
``Concat``, ``nn.ReLU``, ``SpatialMean``) lets one mechanism do the rest: fusion, fake quantization,
conversion and export all see modules. Shape ops (view, reshape, flatten, transpose, permute,
contiguous, chunk, split, and tuple indexing) move int8 bytes as they are, so they stay functional
and run unchanged on the Quantized model's int8 tensors. Integer arithmetic on sizes
(``x.size()``, ``c // g``) is left alone.
"""
import operator

import torch
import torch.nn.functional as F
from torch import fx, nn

from .. import modules
from ..errors import UnsupportedOpError
from .capture import call_name, module_path, node_path, unused_name

TENSOR, TENSORS, SLICE, VALUE = "tensor", "tensors", "slice", "value"
TENSOR_KINDS = (TENSOR, TENSORS, SLICE)  # SLICE: a tensor indexed (x[:, 0], x[idx], x[mask])


# ---- module forms: (signature-compatible builder) -> (module, tensor args) -----------------------

def _binary(module_class):
    def build(input, other, *rest, **kwargs):
        if not (isinstance(input, fx.Node) and isinstance(other, fx.Node)):
            raise UnsupportedOpError("an operation with a Python constant has no quantized form "
                                     "yet; fold the constant into a neighbouring layer")
        if rest or kwargs.get("alpha", 1) != 1:
            raise UnsupportedOpError("torch.add with alpha != 1 has no quantized form")
        return module_class(), (input, other)
    return build


def _cat(tensors, dim=0, **_):
    return modules.Concat(dim), (list(tensors),)


def _unary(factory):
    """``F.gelu(x, approximate="tanh")`` -> ``nn.GELU(approximate="tanh")``: the call's options are
    the module's but ``inplace`` (normalize points the input's later readers at the result)."""
    def build(input, *args, inplace=False, **kwargs):
        return factory(*args, **kwargs), (input,)
    return build


def _hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    module = nn.ReLU6() if (min_val, max_val) == (0.0, 6.0) else nn.Hardtanh(min_val, max_val)
    return module, (input,)


def _mean(input, dim=None, keepdim=False, dtype=None):
    if dim is None or sorted(d % 4 for d in (dim if isinstance(dim, (list, tuple)) else [dim])) \
            != [2, 3]:
        raise UnsupportedOpError(f"mean over dims {dim} has no quantized form; only the spatial "
                                 f"mean over (2, 3)")
    return modules.SpatialMean(keepdim), (input,)


def _adaptive_avg_pool2d(input, output_size):
    return nn.AdaptiveAvgPool2d(output_size), (input,)


def _max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    return nn.MaxPool2d(kernel_size, stride, padding, dilation, return_indices, ceil_mode), (input,)


def _avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    return nn.AvgPool2d(kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override), (input,)


def _interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None, antialias=False):
    if antialias:
        raise UnsupportedOpError("interpolate(antialias=True) has no quantized form")
    return nn.Upsample(size, scale_factor, mode, align_corners, recompute_scale_factor), (input,)


def _pad(input, pad, mode="constant", value=None):
    if mode != "constant" or len(pad) != 4:
        raise UnsupportedOpError(f"F.pad(mode={mode!r}) of {len(pad)} values has no quantized "
                                 f"form; only constant padding of the last two dims")
    return nn.ConstantPad2d(tuple(pad), value or 0.0), (input,)


def _dropout(input, p=0.5, training=True, inplace=False):
    return nn.Dropout(p), (input,)


_ADD, _MUL = _binary(modules.Add), _binary(modules.Mul)
MODULE_FORMS = {
    operator.add: _ADD, operator.iadd: _ADD, torch.add: _ADD, "add": _ADD, "add_": _ADD,
    operator.mul: _MUL, operator.imul: _MUL, torch.mul: _MUL, "mul": _MUL, "mul_": _MUL,
    torch.cat: _cat, torch.concat: _cat,
    F.relu: _unary(nn.ReLU), torch.relu: _unary(nn.ReLU), "relu": _unary(nn.ReLU),
    "relu_": _unary(nn.ReLU), F.relu6: _unary(nn.ReLU6), F.hardtanh: _hardtanh,
    torch.mean: _mean, "mean": _mean,
    F.adaptive_avg_pool2d: _adaptive_avg_pool2d, F.max_pool2d: _max_pool2d,
    F.avg_pool2d: _avg_pool2d, F.interpolate: _interpolate, F.pad: _pad, F.dropout: _dropout,
    **{call: _unary(module) for module, function in modules.activation.TABLE_FUNCTIONS.items()
       for call in function.calls},
}

# Shape ops: they move bytes, so int8 tensors go through them unchanged.
SHAPE_OPS = {"view", "reshape", "flatten", "transpose", "permute", "contiguous", torch.flatten,
             torch.reshape, torch.transpose, torch.permute}
SPLIT_OPS = {"chunk", "split", torch.chunk, torch.split}
SIZE_QUERIES = {"size", "dim", "numel"}


def _tensor_args(node, kinds):
    found = []
    fx.node.map_arg((node.args, node.kwargs), found.append)
    return [n for n in found if kinds.get(n) in TENSOR_KINDS]


def classify(graph_module):
    """{node: TENSOR | TENSORS | VALUE}: what each node produces, so sizes and shape arithmetic are
    told apart from tensors without running the model."""
    kinds = {}
    for node in graph_module.graph.nodes:
        if node.op in ("placeholder", "call_module"):
            kinds[node] = TENSOR
        elif node.op == "output":
            continue
        elif node.op == "get_attr":
            kinds[node] = TENSOR
        elif node.target is operator.getitem:
            source = kinds.get(node.args[0])
            kinds[node] = {TENSORS: TENSOR, TENSOR: SLICE, SLICE: SLICE}.get(source, VALUE)
        elif node.target in SIZE_QUERIES or (node.target is getattr and node.args[1] == "shape"):
            kinds[node] = VALUE
        elif node.target in SPLIT_OPS:
            kinds[node] = TENSORS
        elif _tensor_args(node, kinds):
            kinds[node] = TENSOR
        else:
            kinds[node] = VALUE
    return kinds


FLOAT_CALL = "qtk_float_call"  # node.meta key: why a functional call stays float


class _Refused(Exception):
    pass


def refusal(node):
    """The error ``strict`` raises for a call that stays float: the op, where, why, the ways out."""
    return (f"{module_path(node)}: {call_name(node)!r} ({node.format_node()}) "
            f"{node.meta[FLOAT_CALL]}. Ways "
            f"out: rewrite it with supported modules or functions (docs/quantization_spec.md "
            f"lists them), or keep this part in float with a qconfig of None for its module")


def _module_form(node, kinds):
    """(module, args) for a supported call; raises _Refused with the reason otherwise."""
    if kinds.get(node) == SLICE:
        raise _Refused("indexes or slices a tensor, which has no quantized form yet")
    build = MODULE_FORMS.get(node.target)
    if build is None:
        raise _Refused("has no quantized form in qtk")
    if any(kinds.get(n) == TENSOR and n.op == "get_attr" for n in _tensor_args(node, kinds)):
        raise _Refused("uses a parameter or buffer directly, which has no quantized form")
    try:
        return build(*node.args, **node.kwargs)
    except UnsupportedOpError as error:
        raise _Refused(f"cannot be quantized: {error}") from None
    except TypeError as error:
        raise _Refused(f"has arguments qtk does not understand ({error})") from None


def _is_in_place(node):
    """``x.relu_()``, ``x.add_(y)``, ``F.relu(x, inplace=True)``: the call changes its input."""
    return ((node.op == "call_method" and node.target.endswith("_")
             and not node.target.startswith("__")) or node.kwargs.get("inplace") is True)


def normalize(graph_module):
    """Turn supported functional calls into modules in place. An unsupported one stays a float
    call, the reason in ``node.meta[FLOAT_CALL]`` (prepare refuses it when ``strict``, unless the
    user keeps its module float: :func:`refusal`)."""
    kinds = classify(graph_module)
    graph = graph_module.graph
    position = {node: i for i, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        kind = kinds.get(node)
        if node.op not in ("call_function", "call_method") or kind == VALUE:
            continue
        is_shape_op = (node.target in SHAPE_OPS or node.target in SPLIT_OPS
                       or node.target is operator.getitem)
        if is_shape_op and kind != SLICE:
            continue
        try:
            module, args = _module_form(node, kinds)
        except _Refused as refused:
            node.meta[FLOAT_CALL] = str(refused)
            continue
        name = unused_name(graph_module, node_path(node))  # F.relu beside a self.relu keeps both
        graph_module.add_submodule(name, module)
        with graph.inserting_before(node):
            replacement = graph.call_module(name, args)
        replacement.meta = dict(node.meta)
        node.replace_all_uses_with(replacement)
        if _is_in_place(node):  # the module form returns a new tensor: later readers read it
            for reader in list(node.args[0].users):
                if position.get(reader, -1) > position[node]:
                    reader.replace_input_with(node.args[0], replacement)
        graph.erase_node(node)
    graph.lint()
    graph_module.recompile()
    return graph_module


def shape_op_kinds(graph_module):
    """The shape-op nodes of a graph and what they produce (for convert and export)."""
    kinds = classify(graph_module)
    return {node: kind for node, kind in kinds.items()
            if node.op in ("call_function", "call_method") and kind in (TENSOR, TENSORS)
            and FLOAT_CALL not in node.meta}
