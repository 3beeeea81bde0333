"""LayerNorm: float for now (its float32 runtime op); an integer-only form is issue 18's next step."""
import torch
from torch import nn

from .base import QModelOp, float_export


# ---- float32 runtime op (a part kept in float) ---------------------------------------------------

@float_export(nn.LayerNorm)
def float_layer_norm(module, input_shapes, where):
    """Normalizes over the last ``len(normalized_shape)`` dims; no affine part is weight 1, bias 0."""
    shape = tuple(module.normalized_shape)
    weight = module.weight if module.weight is not None else torch.ones(shape)
    bias = module.bias if module.bias is not None else torch.zeros(shape)
    return QModelOp("layer_norm", [("weight", weight.detach().float()),
                                   ("bias", bias.detach().float())],
                    {"axes": [len(shape)], "eps": [float(module.eps)]})
