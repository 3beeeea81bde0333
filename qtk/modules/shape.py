"""Ops that only move int8 bytes and keep their input's qparams (spec 7); a model's own tensor
repeated over the batch (float for now)."""
import torch
from torch import nn

try:  # torchvision is optional; its StochasticDepth is an identity at inference, like Dropout
    from torchvision.ops import StochasticDepth
    INFERENCE_IDENTITIES = (nn.Identity, nn.Dropout, StochasticDepth)
except ImportError:
    INFERENCE_IDENTITIES = (nn.Identity, nn.Dropout)

from ..errors import UnsupportedOpError
from .base import QModelOp, QuantizedModule, float_export


class QuantizedFlatten(QuantizedModule):
    SOURCE_TYPES = (nn.Flatten,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        if module.start_dim != 1 or module.end_dim != -1:
            raise ValueError(f"{where}: Flatten(start_dim={module.start_dim}, end_dim="
                             f"{module.end_dim}) is not supported; only Flatten(1, -1)")
        return cls(input_qparams, input_qparams[0])

    def forward(self, x):
        return x.flatten(1)

    def qmodel_op(self, input_shapes):
        return QModelOp("flatten")


class QuantizedIdentity(QuantizedModule):
    """Identity, Dropout and torchvision's StochasticDepth (identities at inference): removed from
    the exported graph (the output aliases the input). In QAT they act as in training."""
    SOURCE_TYPES = INFERENCE_IDENTITIES

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        return cls(input_qparams, input_qparams[0])

    def forward(self, x):
        return x

    def qmodel_op(self, input_shapes):
        return None


class ExpandBatch(nn.Module):
    """``value.expand(x.shape[0], ...)``: a tensor the model owns, with a batch dim of 1, repeated
    for each sample of ``x`` (ViT's class token). ``x`` is read for its batch size only."""

    def __init__(self, value):
        super().__init__()
        if isinstance(value, nn.Parameter):
            self.value = value  # shared: QAT trains the model's own parameter
        else:
            self.register_buffer("value", value)

    def forward(self, like):
        return self.value.expand(like.shape[0], *self.value.shape[1:])


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(ExpandBatch)
def float_expand_batch(module, input_shapes, where):
    return QModelOp("expand_batch", [("value", module.value.detach().float())],
                    constants_first=True)


@float_export(nn.Flatten)
def float_flatten(module, input_shapes, where):
    if (module.start_dim, module.end_dim) != (1, -1):
        raise UnsupportedOpError(f"{where}: only Flatten(1, -1) is supported")
    return QModelOp("flatten")


@float_export(*INFERENCE_IDENTITIES)
def float_identity(module, input_shapes, where):
    return None
