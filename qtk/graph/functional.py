"""Functional calls in forward(): each becomes a module, stays as a byte-moving shape op, or is
refused with the op, its module path and the way out.

Turning ``a + b``, ``torch.cat``, ``F.relu``, ``x.mean((2, 3))`` ... into modules (``Add``,
``Concat``, ``nn.ReLU``, ``SpatialMean``) lets one mechanism do the rest: fusion, fake quantization,
conversion and export all see modules. Shape ops (view, reshape, flatten, transpose, permute,
contiguous, clone, chunk, split, and tuple indexing) move int8 bytes as they are, so they stay
functional and run unchanged on the Quantized model's int8 tensors. Integer arithmetic on sizes
(``x.size()``, ``c // g``) is left alone.
"""
import operator

import torch
import torch.nn.functional as F
from torch import fx, nn

from .. import modules
from ..errors import UnsupportedOpError
from .capture import IS_SIZE, call_name, module_path, node_path, unused_name

TENSOR, TENSORS, SLICE, VALUE = "tensor", "tensors", "slice", "value"
TENSOR_KINDS = (TENSOR, TENSORS, SLICE)  # SLICE: a tensor indexed by a tensor or mask (x[idx])


# ---- module forms: (signature-compatible builder) -> (module, tensor args) -----------------------

def _binary(op, module_class):
    """Two activations: ``module_class``; an activation and a number or a tensor of the model
    (already fetched from its get_attr node): :class:`qtk.modules.WithConstant`."""
    def build(input, other, *rest, **kwargs):
        if rest or kwargs.get("alpha", 1) != 1:
            raise UnsupportedOpError(f"torch.{op} with alpha != 1 has no quantized form")
        if isinstance(input, fx.Node) and isinstance(other, fx.Node):
            return module_class(), (input, other)
        if isinstance(input, fx.Node):
            return modules.WithConstant(op, other), (input,)
        if isinstance(other, fx.Node):
            return modules.WithConstant(op, input, constant_first=True), (other,)
        raise UnsupportedOpError(f"{op} of two constants has no place in the graph")
    return build


def _matmul(input, other, **_):
    """Two activations: MatMul. An activation times a 2-D tensor of the model (``x @ W``, as
    ONNX's MatMul with an initializer imports): an nn.Linear of weight ``W.T``, a copy (PTQ)."""
    if isinstance(input, fx.Node) and isinstance(other, torch.Tensor) and other.dim() == 2:
        module = nn.Linear(other.shape[0], other.shape[1], bias=False)
        return _shared(module, weight=other.detach().t().contiguous()), (input,)
    return modules.MatMul(), (input, other)


def _einsum(equation, *operands):
    """The batched products attention writes with einsum (maxvit): "...ik,...kj->...ij" and
    "...ik,...jk->...ij" over the same batch letters, as MatMul."""
    operands = operands[0] if len(operands) == 1 and isinstance(operands[0], (list, tuple)) \
        else operands
    letters = equation.replace(" ", "").replace("->", ",").split(",")
    if len(operands) == 2 and len(letters) == 3 and len({len(t) for t in letters}) == 1:
        a, b, out = letters
        batch, (i, k), (m, n) = a[:-2], a[-2:], out[-2:]
        if out[:-2] == batch == b[:-2] and (m, len({i, k, n})) == (i, 3):
            if b[-2:] == k + n:
                return modules.MatMul(), tuple(operands)
            if b[-2:] == n + k:
                return modules.MatMul(transpose_b=True), tuple(operands)
    raise UnsupportedOpError(f"einsum {equation!r} is not a batched matrix product")


def _softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        raise UnsupportedOpError("softmax(dtype=...) is not supported")
    return nn.Softmax(dim), (input,)


def _shared(module, **tensors):
    """``module`` with the model's own tensors as its parameters (shared, so QAT trains them)."""
    for name, tensor in tensors.items():
        if tensor is None:
            setattr(module, name, None)
        elif isinstance(tensor, fx.Node):
            raise UnsupportedOpError(f"its {name} is computed in forward(), not a tensor of the "
                                     f"model")
        else:
            setattr(module, name, tensor if isinstance(tensor, nn.Parameter)
                    else nn.Parameter(tensor, requires_grad=False))
    return module


def _linear(input, weight, bias=None):
    """F.linear with the model's own weight: an nn.Linear sharing it."""
    if isinstance(weight, fx.Node):
        raise UnsupportedOpError("F.linear of a weight computed in forward() has no form")
    module = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    return _shared(module, weight=weight, bias=bias), (input,)


def _conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """F.conv2d with the model's own weight: an nn.Conv2d sharing it."""
    if isinstance(weight, fx.Node):
        raise UnsupportedOpError("F.conv2d of a weight computed in forward() has no form")
    out_channels, in_per_group, *kernel = weight.shape
    module = nn.Conv2d(in_per_group * groups, out_channels, tuple(kernel), stride, padding,
                       dilation, groups, bias=bias is not None)
    return _shared(module, weight=weight, bias=bias), (input,)


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """F.layer_norm with the module's own weight and bias (ConvNeXt's LayerNorm2d): an
    nn.LayerNorm sharing them, so QAT trains the model's parameters."""
    module = nn.LayerNorm(normalized_shape, eps, elementwise_affine=weight is not None,
                          bias=bias is not None)
    return _shared(module, weight=weight, bias=bias), (input,)


def _batch_source(size):
    """The tensor whose batch size ``size`` reads (``x.shape[0]``, ``x.size(0)``), or None."""
    if not isinstance(size, fx.Node):
        return None
    if size.target is operator.getitem and size.args[1] == 0:
        source = size.args[0]
        if source.target is getattr and source.args[1] == "shape":
            return source.args[0]
        if source.target == "size" and len(source.args) == 1:
            return source.args[0]
    if size.target == "size" and size.args[1:] == (0,):
        return size.args[0]
    return None


def _expand(input, *sizes):
    """``param.expand(x.shape[0], -1, ...)``: a model's tensor repeated over the batch."""
    sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else sizes
    like = _batch_source(sizes[0]) if sizes else None
    if (isinstance(input, fx.Node) or like is None or len(sizes) != input.dim()
            or input.shape[0] != 1
            or any(s not in (-1, d) for s, d in zip(sizes[1:], input.shape[1:]))):
        raise UnsupportedOpError("only expand(x.shape[0], -1, ...) of a tensor the model owns "
                                 "with a batch dim of 1 has a form in qtk")
    return modules.ExpandBatch(input), (like,)


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


def _clamp(input, min=None, max=None):
    """``x.clamp(0, 1)``, ``torch.clip(x, 0)`` with number bounds: ReLU, ReLU6 or Hardtanh."""
    if not all(isinstance(b, (int, float)) for b in (min, max) if b is not None) or min is None:
        raise UnsupportedOpError("clamp with a tensor bound or no lower bound has no int8 form")
    if max is None:
        if min != 0:
            raise UnsupportedOpError("clamp with only a lower bound other than 0 has no int8 form")
        return nn.ReLU(), (input,)
    return _hardtanh(input, float(min), float(max))


def _mean(input, dim=None, keepdim=False, dtype=None):
    if dim is None or sorted(d % 4 for d in (dim if isinstance(dim, (list, tuple)) else [dim])) \
            != [2, 3]:
        raise UnsupportedOpError(f"mean over dims {dim} has no quantized form; only the spatial "
                                 f"mean over (2, 3)")
    return modules.SpatialMean(keepdim), (input,)


def _adaptive_max_pool2d(input, output_size, return_indices=False):
    return nn.AdaptiveMaxPool2d(output_size, return_indices), (input,)


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
    sizes = size if isinstance(size, (list, tuple)) else [size]
    if any(isinstance(s, fx.Node) for s in sizes):  # size=y.shape[-2:]: read at each call
        return modules.UpsampleTo(mode, align_corners), (input, *sizes)
    return nn.Upsample(size, scale_factor, mode, align_corners, recompute_scale_factor), (input,)


def _pad(input, pad, mode="constant", value=None):
    forms = {"constant": lambda p: nn.ConstantPad2d(p, value or 0.0),
             "reflect": nn.ReflectionPad2d, "replicate": nn.ReplicationPad2d}
    if mode not in forms or len(pad) != 4:
        raise UnsupportedOpError(f"F.pad(mode={mode!r}) of {len(pad)} values has no quantized "
                                 f"form; only constant, reflect or replicate padding of the last "
                                 f"two dims")
    return forms[mode](tuple(pad)), (input,)


def _prelu(input, weight):
    """F.prelu with the model's own slopes: an nn.PReLU sharing them."""
    return _shared(nn.PReLU(weight.numel()), weight=weight), (input,)


def _dropout(input, p=0.5, training=True, inplace=False):
    return nn.Dropout(p), (input,)


_ADD, _MUL = _binary("add", modules.Add), _binary("mul", modules.Mul)
_SUB, _DIV = _binary("sub", modules.Sub), _binary("div", modules.Div)
MODULE_FORMS = {
    operator.add: _ADD, operator.iadd: _ADD, torch.add: _ADD, "add": _ADD, "add_": _ADD,
    operator.mul: _MUL, operator.imul: _MUL, torch.mul: _MUL, "mul": _MUL, "mul_": _MUL,
    operator.sub: _SUB, operator.isub: _SUB, torch.sub: _SUB, "sub": _SUB, "sub_": _SUB,
    operator.truediv: _DIV, operator.itruediv: _DIV, torch.div: _DIV, "div": _DIV, "div_": _DIV,
    operator.matmul: _matmul, torch.matmul: _matmul, torch.einsum: _einsum, torch.bmm: _matmul,
    "matmul": _matmul,
    "bmm": _matmul, F.softmax: _softmax, torch.softmax: _softmax, "softmax": _softmax,
    F.layer_norm: _layer_norm, "expand": _expand, F.linear: _linear, F.conv2d: _conv2d,
    F.normalize: modules.normalization.l2_normalize_form,
    torch.cat: _cat, torch.concat: _cat,
    F.relu: _unary(nn.ReLU), torch.relu: _unary(nn.ReLU), "relu": _unary(nn.ReLU),
    "relu_": _unary(nn.ReLU), F.relu6: _unary(nn.ReLU6), F.hardtanh: _hardtanh,
    torch.mean: _mean, "mean": _mean,
    torch.clamp: _clamp, torch.clip: _clamp, "clamp": _clamp, "clip": _clamp,
    F.adaptive_avg_pool2d: _adaptive_avg_pool2d, F.adaptive_max_pool2d: _adaptive_max_pool2d,
    F.max_pool2d: _max_pool2d,
    F.avg_pool2d: _avg_pool2d, F.interpolate: _interpolate, F.pad: _pad, F.dropout: _dropout,
    F.prelu: _prelu, torch.prelu: _prelu,
    **{call: _unary(module) for module, function in modules.activation.TABLE_FUNCTIONS.items()
       for call in function.calls},
}

# Shape ops: they move bytes, so int8 tensors go through them unchanged.
SHAPE_OPS = {"view", "reshape", "flatten", "transpose", "permute", "contiguous", "clone",
             "swapaxes", "unsqueeze", "squeeze", torch.clone, torch.flatten, torch.reshape,
             torch.transpose, torch.permute, torch.swapaxes, torch.unsqueeze, torch.squeeze}
SPLIT_OPS = {"chunk", "split", torch.chunk, torch.split}
SIZE_QUERIES = {"size", "dim", "numel"}


def _tensor_args(node, kinds):
    found = []
    fx.node.map_arg((node.args, node.kwargs), found.append)
    return [n for n in found if kinds.get(n) in TENSOR_KINDS]


def is_static_index(index, kinds):
    """Integers, slices and ``...`` whose bounds are numbers or sizes: an index that selects the
    same elements whatever the values (not a tensor index or a mask; no ``None``)."""
    parts = index if isinstance(index, tuple) else (index,)

    def static(bound):
        return bound is None or isinstance(bound, int) or kinds.get(bound) == VALUE

    return all(part is Ellipsis or (isinstance(part, slice) and static(part.start)
                                    and static(part.stop) and static(part.step))
               or (not isinstance(part, slice) and part is not None and static(part))
               for part in parts)


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
            if source == TENSOR and is_static_index(node.args[1], kinds):
                kinds[node] = TENSOR  # x[:, 0], x[..., :c]: a shape op
            else:
                kinds[node] = {TENSORS: TENSOR, TENSOR: SLICE, SLICE: SLICE}.get(source, VALUE)
        elif node.target in SIZE_QUERIES or (node.target is getattr and node.args[1] == "shape"):
            kinds[node] = VALUE
        elif node.target in SPLIT_OPS:
            kinds[node] = TENSORS
        elif _tensor_args(node, kinds):
            kinds[node] = TENSOR
        else:
            kinds[node] = VALUE
    for node, kind in kinds.items():
        node.meta[IS_SIZE] = kind == VALUE
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


def _model_tensors_only(graph_module):
    """The nodes computed from the model's parameters and buffers alone, which no input reaches
    (maxvit's relative position bias: a table indexed, viewed and permuted)."""
    only = set()
    for node in graph_module.graph.nodes:
        if node.op == "get_attr" or (node.op in ("call_function", "call_method")
                                     and node.all_input_nodes
                                     and all(n in only for n in node.all_input_nodes)):
            only.add(node)
    return only


def _expression(graph_module, root):
    """A :class:`qtk.modules.TensorExpression` recomputing ``root`` from the model's tensors."""
    graph, copies = fx.Graph(), {}

    def copy(node):
        if node not in copies:
            for source in node.all_input_nodes:
                copy(source)
            copies[node] = graph.node_copy(node, lambda n: copies[n])
        return copies[node]

    graph.output(copy(root))
    return modules.TensorExpression(fx.GraphModule(graph_module, graph))


def _fetched(graph_module, node, model_tensors):
    """What a call reads where qtk folds the model's tensors into a module: a get_attr node's
    tensor (the parameter or buffer itself), an expression of them, or the node as it is."""
    if node.op == "get_attr":
        value = graph_module
        for part in node.target.split("."):
            value = getattr(value, part)
        return value
    if node in model_tensors:
        return _expression(graph_module, node)
    return node


def _flat(args):
    return [a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else [arg])]


def _module_form(graph_module, node, kinds, model_tensors):
    """(module, args) for a supported call; raises _Refused with the reason otherwise."""
    if kinds.get(node) == SLICE:
        raise _Refused("indexes a tensor by a tensor or mask, which has no form in qtk yet")
    build = MODULE_FORMS.get(node.target)
    if build is None:
        raise _Refused("has no quantized form in qtk")
    args, kwargs = fx.node.map_arg((node.args, node.kwargs),
                                   lambda n: _fetched(graph_module, n, model_tensors))
    try:
        module, module_args = build(*args, **kwargs)
        if any(isinstance(a, (torch.Tensor, nn.Module)) for a in _flat(module_args)):
            raise UnsupportedOpError("it reads a parameter or buffer of the model directly, "
                                     "which has no form in qtk there")
        return module, module_args
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
    graph = graph_module.graph
    for node in reversed(list(graph.nodes)):  # results nobody reads (unused attention weights)
        if (node.op in ("call_function", "call_method") and not node.users
                and not _is_in_place(node) and not node.is_impure()):
            graph.erase_node(node)
    kinds = classify(graph_module)
    model_tensors = _model_tensors_only(graph_module)
    position = {node: i for i, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        kind = kinds.get(node)
        if node.op not in ("call_function", "call_method") or kind == VALUE:
            continue
        if node in model_tensors:  # folded into the module that reads it, below
            continue
        is_shape_op = (node.target in SHAPE_OPS or node.target in SPLIT_OPS
                       or node.target is operator.getitem)
        if is_shape_op and kind != SLICE:
            continue
        try:
            module, args = _module_form(graph_module, node, kinds, model_tensors)
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
    for node in reversed(list(graph.nodes)):  # the tensors the new modules now hold
        if node in model_tensors and not node.users:
            graph.erase_node(node)
        elif node in model_tensors and kinds.get(node) != VALUE and node.op != "get_attr":
            node.meta[FLOAT_CALL] = ("computes from the model's tensors alone, which qtk folds "
                                     "only into +, -, * and / with an activation")
    graph.lint()
    graph_module.recompile()
    return graph_module


def shape_op_kinds(graph_module):
    """The shape-op nodes of a graph and what they produce (for convert and export)."""
    kinds = classify(graph_module)
    return {node: kind for node, kind in kinds.items()
            if node.op in ("call_function", "call_method") and kind in (TENSOR, TENSORS)
            and FLOAT_CALL not in node.meta}
