"""Graph capture with torch.fx: the model's forward() as a graph of module calls.

qtk traces with ``torch.fx`` (symbolic tracing) because it keeps the user's module hierarchy and
names, which the QAT model, error messages and the exported node names all use. Every module that
qtk knows (float, fused, QAT, Quantized or float32-only) is a leaf; containers are traced through.
"""
import torch
from torch import fx

from .. import modules
from ..errors import UnsupportedOpError


def _leaf_types():
    return (tuple(modules.FLOAT_TO_QAT) + tuple(modules.TO_QUANTIZED) + tuple(modules.FLOAT_EXPORTS)
            + tuple(modules.QAT_MODULES) + tuple(modules.QUANTIZED_MODULES))


def _is_known(module):
    """A qtk-known module, or a subclass that keeps a known class's forward (a subclass with a
    forward of its own, such as torchvision's LayerNorm2d, is traced through)."""
    known = _leaf_types()
    if type(module) in known:
        return True
    owner = next(cls for cls in type(module).__mro__ if "forward" in cls.__dict__)
    return owner in known


class QtkTracer(fx.Tracer):
    """Treats every qtk-known module as a leaf, and torch.nn's own modules as torch.fx does."""

    def is_leaf_module(self, module, qualified_name):
        return _is_known(module) or super().is_leaf_module(module, qualified_name)


def module_path(node):
    """The dotted path of the module a node belongs to, for error messages."""
    if node.op == "call_module":
        return node.target
    stack = node.meta.get("nn_module_stack") or {}
    return next(reversed(stack), "") or "<top-level forward>"


def call_name(node):
    """What a node calls, as users write it: a module path, a method or a function name."""
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__",
                                                                   str(node.target))


def node_path(node):
    """A node's name in reports and module names: a module call's path, or a functional call's
    node name under the module whose forward() makes it."""
    if node.op == "call_module":
        return node.target
    owner = module_path(node)
    return node.name if owner == "<top-level forward>" else f"{owner}.{node.name}"


def unused_name(graph_module, name):
    """``name``, or ``name_1``, ``name_2``, ... whichever no submodule has yet."""
    taken = {path for path, _ in graph_module.named_modules()}
    if name not in taken:
        return name
    return next(f"{name}_{k}" for k in range(1, len(taken) + 2) if f"{name}_{k}" not in taken)


def capture(model):
    """Trace ``model`` into a :class:`torch.fx.GraphModule`: leaf-module calls, functional calls
    and shape arithmetic (see :mod:`qtk.graph.functional` for what happens to the latter)."""
    tracer = QtkTracer()
    try:
        graph = tracer.trace(model)
    except Exception as error:  # fx raises many kinds; name the cause and the way out
        raise UnsupportedOpError(
            f"qtk could not capture {type(model).__name__}.forward() with torch.fx: {error}. "
            f"Data-dependent control flow cannot be traced; move it out of forward() or into a "
            f"leaf module") from error
    return fx.GraphModule(tracer.root, graph, type(model).__name__)


def submodule_owner(graph_module, target):
    """(parent module, attribute name) of the submodule at dotted path ``target``."""
    parent_path, _, attr = target.rpartition(".")
    return graph_module.get_submodule(parent_path) if parent_path else graph_module, attr


def replace_submodule(graph_module, target, new_module):
    parent, attr = submodule_owner(graph_module, target)
    setattr(parent, attr, new_module)


IS_SIZE = "qtk_is_size"  # node.meta key: the node computes a size or a number, not a tensor


def node_inputs(node):
    """The tensors a node reads, in argument order (lists are flattened); sizes read from shapes
    (``functional.classify`` marks them) are arguments, not inputs: :func:`size_arguments`."""
    found = []
    fx.node.map_arg((node.args, node.kwargs), found.append)
    return [n for n in found if not n.meta.get(IS_SIZE)]


def size_arguments(node):
    """The size-valued nodes a call reads (``F.interpolate(x, size=y.shape[-2:])``'s size)."""
    found = []
    fx.node.map_arg((node.args, node.kwargs), found.append)
    return [n for n in found if n.meta.get(IS_SIZE)]


def run_recording(graph_module, example_inputs):
    """Run the graph once and return {node: output value} (for shapes at export)."""
    values = {}

    class Recorder(fx.Interpreter):
        def run_node(self, node):
            values[node] = super().run_node(node)
            return values[node]

    with torch.no_grad():
        Recorder(graph_module).run(*example_inputs)
    return values
