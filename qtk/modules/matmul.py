"""MatMul of two activations (attention's q kᵀ and attn v): float for now."""
import torch
from torch import nn

from ..errors import UnsupportedOpError
from .base import QModelOp, float_export


class MatMul(nn.Module):
    """``a @ b`` of two activations (``torch.matmul``, ``bmm``), or ``a @ b.transpose(-2, -1)``
    with ``transpose_b`` (q kᵀ without a permute of k)."""

    def __init__(self, transpose_b=False):
        super().__init__()
        self.transpose_b = transpose_b

    def forward(self, a, b):
        return torch.matmul(a, b.transpose(-2, -1) if self.transpose_b else b)

    def extra_repr(self):
        return "transpose_b=True" if self.transpose_b else ""


# ---- float32 runtime op (a part kept in float) ---------------------------------------------------

@float_export(MatMul)
def float_matmul(module, input_shapes, where):
    if min(len(shape) for shape in input_shapes) < 2:
        raise UnsupportedOpError(f"{where}: matmul of a vector is not supported; both inputs need "
                                 f"2 dims or more")
    return QModelOp("matmul", attrs={"transpose_b": [1]} if module.transpose_b else {})
