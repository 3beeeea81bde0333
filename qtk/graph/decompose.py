"""Before capture: modules that qtk runs as several simpler ones are swapped for a traceable
equivalent (nn.MultiheadAttention for its Linear, MatMul and Softmax steps), so each step gets
its own precision: the projections in int8, what has no int8 form yet in float."""
from torch import nn

from ..modules.attention import DecomposedMultiheadAttention, decomposable
from .capture import replace_submodule


def decompose(model):
    """Swap in place; a module that cannot be decomposed stays (and stays float)."""
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.MultiheadAttention) and decomposable(module) is None:
            replace_submodule(model, name, DecomposedMultiheadAttention(module))
    return model
