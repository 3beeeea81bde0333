"""Ops that only move int8 bytes and keep their input's qparams (spec 7)."""
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


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(nn.Flatten)
def float_flatten(module, input_shapes, where):
    if (module.start_dim, module.end_dim) != (1, -1):
        raise UnsupportedOpError(f"{where}: only Flatten(1, -1) is supported")
    return QModelOp("flatten")


@float_export(*INFERENCE_IDENTITIES)
def float_identity(module, input_shapes, where):
    return None
