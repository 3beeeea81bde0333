"""nn.MultiheadAttention as the modules qtk quantizes one by one: q/k/v/out Linear layers (int8),
the score and context products (MatMul) and Softmax, with reshapes between them."""
import math

import torch
from torch import nn

from ..errors import UnsupportedOpError
from .matmul import MatMul


def _linear(weight, bias):
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer.to(device=weight.device, dtype=weight.dtype)


class DecomposedMultiheadAttention(nn.Module):
    """Computes what ``nn.MultiheadAttention(batch_first=True)`` computes, from its weights, as
    traceable steps. The query scale 1/sqrt(head_dim) is folded into the q projection, so the
    scores need no multiply of their own. Masks, ``add_bias_kv`` and ``add_zero_attn`` are not
    supported (:func:`decomposable` says so first)."""

    def __init__(self, mha):
        super().__init__()
        self.num_heads, self.embed_dim = mha.num_heads, mha.embed_dim
        self.head_dim = mha.embed_dim // mha.num_heads
        if mha._qkv_same_embed_dim:
            weights = mha.in_proj_weight.detach().chunk(3)
        else:
            weights = (mha.q_proj_weight.detach(), mha.k_proj_weight.detach(),
                       mha.v_proj_weight.detach())
        biases = (mha.in_proj_bias.detach().chunk(3) if mha.in_proj_bias is not None
                  else (None,) * 3)
        scale = 1.0 / math.sqrt(self.head_dim)
        self.q_proj = _linear(weights[0] * scale, None if biases[0] is None else biases[0] * scale)
        self.k_proj = _linear(weights[1], biases[1])
        self.v_proj = _linear(weights[2], biases[2])
        self.out_proj = _linear(mha.out_proj.weight.detach(), mha.out_proj.bias.detach()
                                if mha.out_proj.bias is not None else None)
        self.scores, self.context = MatMul(), MatMul()
        self.softmax = nn.Softmax(-1)
        self.attention_dropout = nn.Dropout(mha.dropout)

    def _heads(self, x):
        """[N, T, E] -> [N, H, T, D]"""
        return x.reshape(x.shape[0], x.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        if key_padding_mask is not None or attn_mask is not None or is_causal:
            raise UnsupportedOpError("MultiheadAttention with a mask has no form in qtk yet; "
                                     "call it without masks or keep it float with a qconfig of "
                                     "None")
        q = self._heads(self.q_proj(query))
        k = self._heads(self.k_proj(key))
        v = self._heads(self.v_proj(value))
        attention = self.attention_dropout(self.softmax(self.scores(q, k.transpose(2, 3))))
        context = self.context(attention, v).transpose(1, 2)
        out = self.out_proj(context.reshape(context.shape[0], context.shape[1], self.embed_dim))
        if not need_weights:
            return out, None
        return out, attention.mean(1) if average_attn_weights else attention


def decomposable(mha):
    """Why qtk cannot decompose this nn.MultiheadAttention, or None when it can."""
    if not mha.batch_first:
        return "batch_first=False (qtk keeps dim 0 as the batch)"
    if mha.bias_k is not None or mha.add_zero_attn:
        return "add_bias_kv or add_zero_attn"
    return None
