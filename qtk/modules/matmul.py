"""MatMul of two activations (attention's q kᵀ and attn v): float, QAT and Quantized forms
(docs/quantization_spec.md section 17) and the float32 runtime op."""
import torch
from torch import nn

from .. import arithmetic
from ..errors import UnsupportedOpError
from .base import QATModule, QModelOp, QuantizedModule, clamp_attr, float_export, to_int8


def _matmul(a, b, transpose_b):
    return torch.matmul(a, b.transpose(-2, -1) if transpose_b else b)


def _transpose_b_attrs(transpose_b):
    return {"transpose_b": [1]} if transpose_b else {}


class MatMul(nn.Module):
    """``a @ b`` of two activations (``torch.matmul``, ``bmm``), or ``a @ b.transpose(-2, -1)``
    with ``transpose_b`` (q kᵀ without a permute of k).

    Args:
        transpose_b: read ``b`` as ``[..., N, K]`` (``a @ bᵀ``).
    """

    def __init__(self, transpose_b=False):
        super().__init__()
        self.transpose_b = transpose_b

    def forward(self, a, b):
        return _matmul(a, b, self.transpose_b)

    def extra_repr(self):
        return "transpose_b=True" if self.transpose_b else ""


# ---- QAT ----------------------------------------------------------------------------------------

class QATMatMul(QATModule):
    """MatMul with a fake-quantized output. It remembers the depth K (``a``'s last dim) of its
    last call, so that convert can refuse a K beyond spec 17's int32 bound before any int8 run.

    Args:
        transpose_b: as :class:`MatMul`'s.
        qconfig: gives the output's fake quantizer.
    """
    FLOAT_TYPES = (MatMul,)

    def __init__(self, transpose_b, qconfig):
        super().__init__(qconfig)
        self.transpose_b = transpose_b
        self.depth = None  # K of the last call; None until the module has run

    @classmethod
    def from_float(cls, module, qconfig):
        return cls(module.transpose_b, qconfig)

    def forward(self, a, b):
        self.depth = int(a.shape[-1])
        return self.activation_post_process(_matmul(a, b, self.transpose_b))

    def extra_repr(self):
        return "transpose_b=True" if self.transpose_b else ""


# ---- Quantized ----------------------------------------------------------------------------------

class QuantizedMatMul(QuantizedModule):
    """Product of two int8 activations, summed exactly in int32 and requantized once (spec 17)."""
    SOURCE_TYPES = (QATMatMul,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        if module.depth is not None:
            arithmetic.check_matmul_depth(module.depth, where)
        layer = cls(input_qparams, module.output_qparams())
        layer.transpose_b, layer.where = module.transpose_b, where
        layer.multiplier, layer.shift = arithmetic.matmul_multiplier(
            input_qparams[0].scale, input_qparams[1].scale, layer.output_qparams.scale)
        return layer

    def forward(self, a, b):
        arithmetic.check_matmul_depth(a.shape[-1], self.where)
        z_a, z_b = (q.zero_point for q in self.input_qparams)
        acc = arithmetic.matmul_accumulate(a, z_a, b, z_b, self.transpose_b)
        _, z_y, lo, hi = self.output_qparams
        return to_int8(arithmetic.requantize(acc, self.multiplier, self.shift, z_y, lo, hi))

    def qmodel_op(self, input_shapes):
        _check_ranks(input_shapes, self.where)
        arithmetic.check_matmul_depth(input_shapes[0][-1], self.where)
        attrs = {"multiplier": [self.multiplier], "shift": [self.shift],
                 "clamp": clamp_attr(*self.output_qparams[2:]),
                 **_transpose_b_attrs(self.transpose_b)}
        return QModelOp("matmul", attrs=attrs)

    def extra_repr(self):
        return super().extra_repr() + (", transpose_b=True" if self.transpose_b else "")


# ---- float32 runtime op (a part kept in float) ---------------------------------------------------

def _check_ranks(input_shapes, where):
    """What the runtime reads (docs/qmodel_format.md): rank >= 2 each, and equal ranks, since
    both are activations whose dim 0 is the batch."""
    ranks = [len(shape) for shape in input_shapes]
    if min(ranks) < 2:
        raise UnsupportedOpError(f"{where}: matmul of a vector is not supported; both inputs need "
                                 f"2 dims or more")
    if ranks[0] != ranks[1]:
        raise UnsupportedOpError(f"{where}: matmul of activations of ranks {ranks[0]} and "
                                 f"{ranks[1]} ({input_shapes[0]} @ {input_shapes[1]}); the runtime "
                                 f"needs equal ranks, so that both batch dims line up: reshape "
                                 f"the lower-rank input with leading dims of 1")


@float_export(MatMul)
def float_matmul(module, input_shapes, where):
    _check_ranks(input_shapes, where)
    return QModelOp("matmul", attrs=_transpose_b_attrs(module.transpose_b))
