"""qtk.export: a converted (Quantized) model -> .qmodel bytes the runtime reproduces exactly; a
float model -> float32 ops, to compare float and int8 in the same runtime."""
import operator

import torch
from torch import fx

from .. import modules
from ..version import __version__
from ..modules.base import QModelOp
from ..quantize import prepare_float
from ..errors import UnsupportedOpError
from ..graph.capture import module_path, node_inputs, run_recording, size_arguments
from ..graph.functional import FLOAT_CALL, TENSORS, shape_op_kinds
from .qmodel_writer import QModelWriter


def _as_tuple(example_inputs):
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)


def export(model, example_inputs, path=None, image=None):
    """Write a Quantized model (from :func:`qtk.convert`) or a float model as a ``.qmodel``.

    Args:
        model: the converted model, or a float ``nn.Module``: it is traced and fused as
            :func:`qtk.prepare_ptq` would with every module kept float, and exported as it runs in
            eval mode, all float32 ops (BatchNorm folded).
        example_inputs: a float tensor (or tuple of them) of the input shape; the batch size may
            differ at run time. With ``image``: a uint8 image ``[N, H, W, C]``.
        path: file to write; when ``None`` only the bytes are returned.
        image: a :class:`qtk.ImagePreprocess` the model was trained behind
            (``model(image(images))``): the file then takes the uint8 image, and its
            ``image_to_int8`` node does the preprocessing and the input quantization, giving the
            bytes the Quantized model gives on ``image(images)`` (``Session.run_image``). The model
            must be a converted one whose one input goes into its QuantStub.
    Returns:
        the file contents as ``bytes``.
    """
    data = build_writer(model, example_inputs, image).to_bytes()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def build_writer(model, example_inputs, image=None):
    """The export as a :class:`QModelWriter` not yet serialized (tests corrupt it on purpose)."""
    if image is not None:
        writer = build_writer(model, image(_image_example(example_inputs)))
        _take_image_input(writer, image, example_inputs)
        return writer
    return trace_export(model, example_inputs)[0]


def trace_export(model, example_inputs):
    """The export of ``model`` run on ``example_inputs``: ``(writer, value_of, recorded)``, where
    ``value_of`` maps each fx node to the id of the value that holds its result in the file (a list
    of ids for a node that yields several tensors; no entry for a node that has no value of its
    own) and ``recorded`` maps each fx node to what it computed on ``example_inputs``: the torch
    reference of every value, which :mod:`qtk.debug` compares with the runtime's."""
    model = _graph_to_export(model)
    recorded = run_recording(model, _as_tuple(example_inputs))
    writer = QModelWriter(f"qtk {__version__}")
    value_of = {}  # fx node -> value id (a list of ids for a node that yields several tensors)
    shape_ops = shape_op_kinds(model)

    for node in model.graph.nodes:
        if node.op == "placeholder":
            if not _feeds_only_quant_stubs(model, node):  # a float graph input
                value_of[node] = writer.add_activation(node.name, recorded[node].shape, None)
                writer.inputs.append(value_of[node])
        elif node.op == "call_module":
            _export_module(writer, value_of, recorded, node, model.get_submodule(node.target))
        elif node in shape_ops:
            _export_shape_op(writer, value_of, recorded, node, shape_ops[node])
        elif FLOAT_CALL in node.meta:
            raise UnsupportedOpError(
                f"{module_path(node)}: {node.format_node()} stays float (qtk has no int8 form for "
                f"it) but the runtime has no float kernel for it yet; rewrite it with supported "
                f"modules or functions (docs/quantization_spec.md lists them)")
        elif node.op == "output":
            outputs = []
            fx.node.map_arg(node.args, outputs.append)
            writer.outputs = [value_of[_int8_source(model, n)] for n in outputs]
        # a get_attr node is a tensor of the model that a call reads; the call that cannot be
        # exported is named when export reaches it
    return writer, value_of, recorded


def _image_example(example_inputs):
    example = _as_tuple(example_inputs)
    if len(example) != 1 or example[0].dtype != torch.uint8 or example[0].dim() != 4:
        raise TypeError(f"export(..., image=) takes one uint8 example image [N, H, W, C], got "
                        f"{[(t.dtype, list(t.shape)) for t in example]}")
    return example[0]


def _take_image_input(writer, image, example_inputs):
    """The int8 graph input (what the session would quantize) becomes the output of an
    image_to_int8 node reading a new uint8 graph input: spec 23's resize, crop and channel order,
    then a table of quantize(normalize(p)) per channel with the input's qparams."""
    if len(writer.inputs) != 1 or writer.values[writer.inputs[0]]["dtype"] != torch.int8:
        found = [(writer.values[i]["name"], str(writer.values[i]["dtype"])) for i in writer.inputs]
        raise UnsupportedOpError(
            "export(..., image=) needs a converted model with one input that goes into its "
            f"QuantStub (an int8 graph input); this one has graph inputs {found}")
    quantized_input = writer.inputs[0]
    qparams = writer.values[quantized_input]["qparams"]
    example = _image_example(example_inputs)
    source = writer.add_image_input("image", tuple(example.shape))
    table = writer.add_constant("image.table", image.table(qparams))
    writer.nodes.insert(0, dict(op="image_to_int8", name="image", inputs=[source, table],
                                outputs=[quantized_input],
                                attrs=image.qmodel_attrs(tuple(example.shape[1:3]))))
    writer.inputs = [source]


def _graph_to_export(model):
    """A converted model exports as it is; any other model is float, traced and fused exactly as
    quantization would have, so that its float32 ops match the float parts of a mixed model."""
    if any(isinstance(m, modules.QATModule) for m in model.modules()):
        raise TypeError("export() takes a float model or the model returned by qtk.convert; this "
                        "one is prepared for QAT or calibration: export qtk.convert(model)")
    if isinstance(model, fx.GraphModule) and any(isinstance(m, modules.QuantizedModule)
                                                 for m in model.modules()):
        return model
    return prepare_float(model)


def _is_call_of(model, node, module_type):
    return node.op == "call_module" and isinstance(model.get_submodule(node.target), module_type)


def _feeds_only_quant_stubs(model, placeholder):
    """Such an input becomes an int8 graph input: the session quantizes it (spec 1)."""
    return all(_is_call_of(model, user, modules.QuantizedQuantStub) for user in placeholder.users)


def _only_output_reads(node):
    return all(user.op == "output" for user in node.users)


def _int8_source(model, node):
    """An output read straight from a DequantStub is the stub's int8 input: the session
    dequantizes it, or returns it raw when asked."""
    if _is_call_of(model, node, modules.QuantizedDequantStub) and _only_output_reads(node):
        return node_inputs(node)[0]
    return node


def _export_module(writer, value_of, recorded, node, module):
    inputs = node_inputs(node)
    input_shapes = [tuple(recorded[n].shape) for n in inputs]
    sizes = [recorded[n] for n in size_arguments(node)]  # as the example's shapes made them
    if isinstance(module, modules.QuantizedQuantStub):
        if inputs[0].op == "placeholder" and inputs[0] not in value_of:
            value_of[node] = writer.add_activation(inputs[0].name, recorded[node].shape,
                                                   module.output_qparams)
            writer.inputs.append(value_of[node])
            _clamp_to_range(writer, value_of, recorded, node, "quantize")
            return
        op, output_qparams = QModelOp("quantize"), module.output_qparams
    elif isinstance(module, modules.QuantizedDequantStub):
        if _only_output_reads(node):
            return
        op, output_qparams = QModelOp("dequantize"), None
    elif isinstance(module, modules.QuantizedModule):
        op, output_qparams = module.qmodel_op(input_shapes, *sizes), module.output_qparams
    else:  # kept in float by its qconfig
        op, output_qparams = _float_op(module, input_shapes, node.target, sizes), None
    if op is None:  # identity: the output is the input's value
        value_of[node] = value_of[inputs[0]]
        return
    chain = op if isinstance(op, list) else [op]  # a float op may be a chain of nodes (RPReLU)
    activation_ids = [value_of[n] for n in inputs]
    for step, op in enumerate(chain):
        last = step == len(chain) - 1
        name = node.target if last else f"{node.target}.{step}"
        constant_ids = [writer.add_constant(f"{node.target}.{suffix}", tensor,
                                            op.constant_bits.get(suffix, 8))
                        for suffix, tensor in op.constants]
        if op.requantized_input is not None:
            activation_ids[0] = _requantized_input(writer, node, recorded[inputs[0]].shape,
                                                   activation_ids[0], *op.requantized_input)
        input_ids = (constant_ids + activation_ids if op.constants_first
                     else activation_ids + constant_ids)
        output = writer.add_activation(name, recorded[node].shape,
                                       output_qparams if last else None)
        writer.add_node(op.op, name, input_ids, [output], op.attrs)
        activation_ids = [output]
    value_of[node] = output
    _clamp_to_range(writer, value_of, recorded, node, op.op)


def _requantized_input(writer, node, shape, source, qparams, multiplier, shift):
    """A layer's own input quantizer as nodes before it: a one-input concat (spec 3's rescale) to
    its (s, z), then a clamp to its range. Returns the value the layer reads."""
    name = f"{node.target}.input"
    rescaled = writer.add_activation(name, shape, qparams)
    writer.add_node("concat", name, [source], [rescaled],
                    {"axis": [1], "multiplier": [multiplier], "shift": [shift]})
    clamped = writer.add_like(f"{name}.range", shape, rescaled)
    writer.add_node("clamp", f"{name}.range", [rescaled], [clamped],
                    {"clamp": [qparams.qmin, qparams.qmax]})
    return clamped


# Ops that compute new int8 values but have no clamp attribute of their own (the session's input
# quantization counts as "quantize"). Every other op either clamps (conv2d, linear, add, mul, clamp,
# lut's table) or keeps its input's values and range (pooling, pad, shape ops).
_UNCLAMPED_OPS = ("quantize", "concat", "resize_bilinear")


def _clamp_to_range(writer, value_of, recorded, node, op):
    """A sub-8-bit output of an unclamped op gets a clamp node to its [qmin, qmax] (spec 16)."""
    value = writer.values[value_of[node]]
    qparams = value["qparams"]
    if op not in _UNCLAMPED_OPS or qparams is None or not qparams.narrow:
        return
    clamped = writer.add_like(f"{value['name']}.range", recorded[node].shape, value_of[node])
    writer.add_node("clamp", f"{value['name']}.range", [value_of[node]], [clamped],
                    {"clamp": [qparams.qmin, qparams.qmax]})
    value_of[node] = clamped


def _argument(node, position, name, default):
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[position] if len(node.args) > position else default


def _permutation(node, rank):
    name = node.target if isinstance(node.target, str) else node.target.__name__
    if name in ("transpose", "swapaxes"):
        first, second = (_argument(node, 1, "dim0", 0) % rank, _argument(node, 2, "dim1", 1) % rank)
        perm = list(range(rank))
        perm[first], perm[second] = second, first
        return perm
    dims = node.args[1:] if name == "permute" and isinstance(node.target, str) else node.args[1]
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    return [d % rank for d in dims]


def _export_shape_op(writer, value_of, recorded, node, kind):
    """Shape ops move bytes: reshape, permute and split nodes whose outputs keep the input's
    qparams; contiguous, clone and tuple indexing only rename a value."""
    source = node.args[0]
    name = node.target if isinstance(node.target, str) else node.target.__name__
    if node.target is operator.getitem and isinstance(value_of[source], list):
        value_of[node] = value_of[source][node.args[1]]  # one output of a split
        return
    if node.target is operator.getitem:
        _export_slice(writer, value_of, recorded, node)
        return
    if name in ("contiguous", "clone"):
        value_of[node] = value_of[source]
        return
    in_shape = tuple(recorded[source].shape)
    where = f"{module_path(node)} ({node.format_node()})"
    if kind == TENSORS:
        axis = _argument(node, 2, "dim", 0) % len(in_shape)
        if axis == 0:
            raise UnsupportedOpError(f"{where}: splitting the batch dimension is not supported")
        outputs = [writer.add_like(f"{node.name}.{i}", tuple(t.shape), value_of[source])
                   for i, t in enumerate(recorded[node])]
        writer.add_node("split", node.name, [value_of[source]], outputs,
                        {"axis": [axis], "sizes": [t.shape[axis] for t in recorded[node]]})
        value_of[node] = outputs
        return
    out_shape = tuple(recorded[node].shape)
    if name in ("transpose", "swapaxes", "permute"):
        op, attrs = "permute", {"perm": _permutation(node, len(in_shape))}
        if attrs["perm"][0] != 0:
            raise UnsupportedOpError(f"{where}: moving the batch dimension is not supported")
    else:  # view, reshape, flatten, squeeze, unsqueeze
        op, attrs = "reshape", {"shape": list(out_shape[1:])}
        if out_shape[:1] != in_shape[:1]:
            raise UnsupportedOpError(f"{where}: a reshape that merges or splits the batch "
                                     f"dimension is not supported; keep dim 0 as the batch")
    value_of[node] = writer.add_like(node.name, out_shape, value_of[source])
    writer.add_node(op, node.name, [value_of[source]], [value_of[node]], attrs)


def _slice_bounds(index, shape, recorded, where):
    """x[index] as (starts, ends, steps) over every dim and the dims an integer drops."""
    index = fx.node.map_arg(index, lambda n: recorded[n])  # sizes read from the shapes
    parts = list(index) if isinstance(index, tuple) else [index]
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        parts[at:at + 1] = [slice(None)] * (len(shape) - len(parts) + 1)
    parts += [slice(None)] * (len(shape) - len(parts))
    starts, ends, steps, dropped = [], [], [], []
    for dim, (part, size) in enumerate(zip(parts, shape)):
        if isinstance(part, slice):
            start, end, step = part.indices(size)
            end = max(end, start)
        else:
            start = part % size if -size <= part < size else None
            if start is None:
                raise UnsupportedOpError(f"{where}: index {part} is out of range for size {size}")
            end, step = start + 1, 1
            dropped.append(dim)
        starts.append(start)
        ends.append(end)
        steps.append(step)
    return starts, ends, steps, dropped


def _export_slice(writer, value_of, recorded, node):
    """``x[:, 0]``, ``x[..., :c]``: a ``slice`` node, then a ``reshape`` where integers drop
    dims."""
    source = node.args[0]
    in_shape, out_shape = tuple(recorded[source].shape), tuple(recorded[node].shape)
    where = f"{module_path(node)} ({node.format_node()})"
    starts, ends, steps, dropped = _slice_bounds(node.args[1], in_shape, recorded, where)
    if (starts[0], ends[0], steps[0]) != (0, in_shape[0], 1) or 0 in dropped:
        raise UnsupportedOpError(f"{where}: indexing the batch dimension is not supported; keep "
                                 f"dim 0 whole ([:, ...])")
    value = value_of[source]
    if (starts, ends, steps) != ([0] * len(in_shape), list(in_shape), [1] * len(in_shape)):
        sliced_shape = tuple(-(-(e - b) // k) for b, e, k in zip(starts, ends, steps))
        sliced = writer.add_like(f"{node.name}.slice", sliced_shape, value)
        writer.add_node("slice", node.name, [value], [sliced],
                        {"starts": starts[1:], "ends": ends[1:], "steps": steps[1:]})
        value = sliced
    if dropped:
        reshaped = writer.add_like(node.name, out_shape, value)
        writer.add_node("reshape", node.name, [value], [reshaped], {"shape": list(out_shape[1:])})
        value = reshaped
    value_of[node] = value


def _float_op(module, input_shapes, where, sizes):
    """The float32 runtime op of a float module (None for an identity), or a clear refusal."""
    for cls in type(module).__mro__:
        if cls in modules.FLOAT_EXPORTS:
            return modules.FLOAT_EXPORTS[cls](module, input_shapes, where, *sizes)
    raise UnsupportedOpError(f"{where}: {type(module).__name__} was kept in float but the runtime "
                             f"has no float kernel for it; quantize it (give it a qconfig and "
                             f"export the qtk.convert model) or replace it with a supported module")
