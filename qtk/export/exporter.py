"""qtk.export: a converted (Quantized) model -> .qmodel bytes the runtime reproduces exactly."""
import torch
from torch import fx

from .. import modules
from ..version import __version__
from .capture import UnsupportedOpError, node_inputs, run_recording
from .qmodel_writer import QModelWriter


def _as_tuple(example_inputs):
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)


def export(model, example_inputs, path=None):
    """Write a Quantized model (from :func:`qtk.convert`) as a ``.qmodel``.

    Args:
        model: the converted model.
        example_inputs: a float tensor (or tuple of them) of the input shape; the batch size may
            differ at run time.
        path: file to write; when ``None`` only the bytes are returned.
    Returns:
        the file contents as ``bytes``.
    """
    data = build_writer(model, example_inputs).to_bytes()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def build_writer(model, example_inputs):
    """The export as a :class:`QModelWriter` not yet serialized (tests corrupt it on purpose)."""
    if not isinstance(model, fx.GraphModule):
        raise TypeError("export() takes the model returned by qtk.convert")
    example_inputs = _as_tuple(example_inputs)
    recorded = run_recording(model, example_inputs)
    writer = QModelWriter(f"qtk {__version__}")
    value_of = {}  # fx node -> value id

    for node in model.graph.nodes:
        if node.op == "placeholder":
            _check_only_quantized(model, node)
        elif node.op == "call_module":
            module = model.get_submodule(node.target)
            _export_module(writer, value_of, recorded, node, module)
        elif node.op == "output":
            outputs = []
            fx.node.map_arg(node.args, outputs.append)
            writer.outputs = [value_of[_int8_source(model, n)] for n in outputs]
        else:
            raise UnsupportedOpError(f"{node.name}: cannot export a {node.op} node")
    return writer


def _check_only_quantized(model, placeholder):
    for user in placeholder.users:
        if not (user.op == "call_module"
                and isinstance(model.get_submodule(user.target), modules.QuantizedQuantStub)):
            raise UnsupportedOpError(
                f"input {placeholder.name!r} is used by {user.name!r} without being quantized "
                f"first; every model input must go through a QuantStub")


def _int8_source(model, node):
    """The int8 value an output comes from: the input of its DequantStub, or itself."""
    if node.op == "call_module" and isinstance(model.get_submodule(node.target),
                                               modules.QuantizedDequantStub):
        return node_inputs(node)[0]
    return node


def _export_module(writer, value_of, recorded, node, module):
    if not isinstance(module, modules.QuantizedModule):
        raise UnsupportedOpError(f"{node.target}: {type(module).__name__} is not a Quantized "
                                 f"module; call qtk.convert before qtk.export")
    inputs = node_inputs(node)
    if isinstance(module, modules.QuantizedQuantStub):
        value_of[node] = writer.add_activation(inputs[0].name, recorded[node].shape,
                                               module.output_qparams)
        writer.inputs.append(value_of[node])
        return
    if isinstance(module, modules.QuantizedDequantStub):
        return
    op = module.qmodel_op([tuple(recorded[n].shape) for n in inputs])
    if op is None:  # identity: the output is the input's value
        value_of[node] = value_of[inputs[0]]
        return
    input_ids = [value_of[n] for n in inputs]
    input_ids += [writer.add_constant(f"{node.target}.{suffix}", tensor)
                  for suffix, tensor in op.constants]
    value_of[node] = writer.add_activation(node.target, recorded[node].shape, module.output_qparams)
    writer.add_node(op.op, node.target, input_ids, [value_of[node]], op.attrs)
