"""prepare (QAT and PTQ) and convert: the float -> QAT -> Quantized steps of the data flow."""
import copy

import torch
from torch import fx, nn

from . import modules
from .export.capture import UnsupportedOpError, capture, node_inputs, replace_submodule
from .export.fusion import fuse
from .qconfig import default_ptq_qconfig, default_qat_qconfig


def _lookup_by_type(table, module):
    for cls in type(module).__mro__:
        if cls in table:
            return table[cls]
    return None


def _add_stubs(graph_module):
    """Quantize every float input and dequantize every output, unless the model has its own stubs."""
    graph = graph_module.graph
    has_stubs = any(n.op == "call_module" and isinstance(graph_module.get_submodule(n.target),
                                                         modules.QuantStub) for n in graph.nodes)
    if has_stubs:
        return
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for i, placeholder in enumerate(placeholders):
        name = f"quant_input_{i}"
        graph_module.add_submodule(name, modules.QuantStub())
        with graph.inserting_after(placeholder):
            stub = graph.call_module(name, (placeholder,))
        placeholder.replace_all_uses_with(stub, delete_user_cb=lambda user: user is not stub)
    output = next(n for n in graph.nodes if n.op == "output")
    counter = iter(range(1 << 30))

    def dequantize(value):
        name = f"dequant_output_{next(counter)}"
        graph_module.add_submodule(name, modules.DequantStub())
        with graph.inserting_before(output):
            return graph.call_module(name, (value,))

    output.args = fx.node.map_arg(output.args, dequantize)
    graph_module.recompile()


def _prepare(model, qconfig):
    graph_module = fuse(capture(copy.deepcopy(model)))
    _add_stubs(graph_module)
    for node in graph_module.graph.nodes:
        if node.op != "call_module":
            continue
        module = graph_module.get_submodule(node.target)
        qat_class = modules.FLOAT_TO_QAT.get(type(module))
        if qat_class is not None:
            replace_submodule(graph_module, node.target, qat_class.from_float(module, qconfig))
        elif isinstance(module, modules.FOLD_ONLY):
            raise UnsupportedOpError(
                f"{node.target}: {type(module).__name__} does not directly follow a Conv2d whose "
                f"output it alone uses, so it cannot be folded; qtk quantizes BatchNorm only by "
                f"folding it into the preceding convolution")
        elif not isinstance(module, modules.PASS_THROUGH):
            raise UnsupportedOpError(
                f"{node.target}: {type(module).__name__} has no quantized form in qtk; replace it "
                f"with a supported module (see docs/quantization_spec.md for the op list)")
    graph_module.recompile()
    return graph_module


def quantize_qat(model, qconfig=None):
    """Prepare a float model for quantization-aware training.

    Captures ``forward()``, fuses conv-bn(-relu), conv-relu, linear-relu and add-relu, adds input
    quantization and output dequantization when the model has no QuantStub/DequantStub, and swaps
    in fake-quantized modules. Train the returned model as usual, then call :func:`convert`.

    Args:
        model: a float ``nn.Module`` (it is copied, not changed).
        qconfig: a :class:`qtk.QConfig`; default :data:`qtk.default_qat_qconfig`.
    """
    prepared = _prepare(model, qconfig or default_qat_qconfig)
    return prepared.train(model.training)


def prepare_ptq(model, qconfig=None):
    """Prepare a float model for post-training quantization: run calibration batches through
    the returned model (in eval mode), then call :func:`convert`.

    Args:
        model: a trained float ``nn.Module`` (it is copied, not changed).
        qconfig: a :class:`qtk.QConfig`; default :data:`qtk.default_ptq_qconfig`.
    """
    return _prepare(model, qconfig or default_ptq_qconfig).eval()


def freeze_bn_stats(model):
    """Stop updating BatchNorm statistics in a QAT model (usually for the last epochs)."""
    for module in model.modules():
        if isinstance(module, modules.QATConvBn2d):
            module.freeze_bn_stats()
    return model


def convert(model):
    """QAT or calibrated PTQ model -> Quantized model: int8 tensors between integer modules.

    The result is the definition of the right answer: the runtime reproduces its int8 outputs
    byte for byte. Its inputs and outputs are float, like the original model's.
    """
    if not isinstance(model, fx.GraphModule):
        raise TypeError("convert() takes the model returned by qtk.quantize_qat or qtk.prepare_ptq")
    quantized = copy.deepcopy(model)
    qparams = {}
    for node in quantized.graph.nodes:
        if node.op != "call_module":
            continue
        module = quantized.get_submodule(node.target)
        quantized_class = _lookup_by_type(modules.TO_QUANTIZED, module)
        if quantized_class is None:
            raise UnsupportedOpError(f"{node.target}: {type(module).__name__} cannot be converted")
        inputs = node_inputs(node)
        input_qparams = [qparams.get(n) for n in inputs]
        if quantized_class is not modules.QuantizedQuantStub and None in input_qparams:
            raise UnsupportedOpError(
                f"{node.target}: {type(module).__name__} receives a float tensor; put a "
                f"qtk.modules.QuantStub before it (or let qtk add stubs by having none)")
        with torch.no_grad():
            new_module = quantized_class.from_module(module, input_qparams, where=node.target)
        replace_submodule(quantized, node.target, new_module)
        qparams[node] = new_module.output_qparams
    quantized.recompile()
    return quantized.eval()


class int8_outputs:
    """Context manager: a Quantized model returns its int8 outputs instead of dequantizing them,
    as ``session.run(x, output='int8')`` does."""

    def __init__(self, model):
        self.stubs = [m for m in model.modules() if isinstance(m, modules.QuantizedDequantStub)]

    def __enter__(self):
        for stub in self.stubs:
            stub.emit_int8 = True

    def __exit__(self, *exc):
        for stub in self.stubs:
            stub.emit_int8 = False
