"""Attention as the modules qtk quantizes one by one: nn.MultiheadAttention and torchvision's
Swin window attention become q/k/v/out Linear layers (int8), the score and context products
(MatMul) and Softmax, with reshapes between them."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import UnsupportedOpError
from .base import float_export
from .elementwise import constant_operand_op
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
        self.scores, self.context = MatMul(transpose_b=True), MatMul()
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
        attention = self.attention_dropout(self.softmax(self.scores(q, k)))
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


class WindowAttentionBias(nn.Module):
    """Swin's learned relative position bias (and, for shifted windows, the -100 mask between
    regions that the shift brought together) added to the scores [N, windows, heads, T, T]. The
    bias is computed from the model's own tensors at each call, so QAT trains them: v1 indexes a
    table, v2 runs its small MLP on the log-spaced coordinates and squashes it to (0, 16)."""

    def __init__(self, attention, tokens, mask=None):
        super().__init__()
        self.tokens, self.heads = tokens, attention.num_heads
        self.mlp = getattr(attention, "cpb_mlp", None)  # Swin v2
        if self.mlp is None:
            self.table = attention.relative_position_bias_table
        else:
            self.register_buffer("coordinates", attention.relative_coords_table.clone())
        self.register_buffer("index", attention.relative_position_index.clone())
        self.register_buffer("mask", mask)  # [windows, T, T] or None

    def bias(self):
        table = self.table if self.mlp is None else self.mlp(self.coordinates).view(-1, self.heads)
        bias = table[self.index].reshape(self.tokens, self.tokens, -1).permute(2, 0, 1)
        if self.mlp is not None:
            bias = 16 * torch.sigmoid(bias)
        bias = bias.unsqueeze(0)  # [1 window, heads, T, T]
        return bias if self.mask is None else bias + self.mask.unsqueeze(1)

    def forward(self, scores):
        return scores + self.bias().unsqueeze(0)


def _shift_mask(height, width, window, shift):
    """torchvision's attention mask of a shifted window: -100 between tokens from different
    regions of the rolled map, [windows, T, T]."""
    regions = torch.zeros(height, width)
    count = 0
    for h in ((0, -window[0]), (-window[0], -shift[0]), (-shift[0], None)):
        for w in ((0, -window[1]), (-window[1], -shift[1]), (-shift[1], None)):
            regions[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    regions = regions.reshape(height // window[0], window[0], width // window[1], window[1])
    regions = regions.permute(0, 2, 1, 3).reshape(-1, window[0] * window[1])
    different = regions.unsqueeze(1) - regions.unsqueeze(2)
    return torch.where(different != 0, -100.0, 0.0)


def _roll(x, shift, dim):
    """torch.roll(x, -shift, dim) of an [N, H, W, C] map as two slices and a concat (both run in
    int8; the rank is fixed because a traced tensor's dim() is not a number)."""
    if shift == 0:
        return x
    first, second = [slice(None)] * 4, [slice(None)] * 4
    first[dim], second[dim] = slice(shift, None), slice(0, shift)
    return torch.cat([x[tuple(first)], x[tuple(second)]], dim)


class DecomposedWindowAttention(nn.Module):
    """torchvision's Swin ShiftedWindowAttention (v1, or v2's cosine attention) for an
    [N, H, W, C] input of known H and W, with the batch kept in dim 0: the windows are a dim of
    their own ([N, windows, T, C]) rather than merged into the batch, the cyclic shift is two
    slices and a concat per axis, the q/k/v projections are three Linear layers (v1's query scale
    folded into q; v2's key bias is zero, as torchvision runs it) and the scores two MatMuls."""

    def __init__(self, module, height, width):
        super().__init__()
        self.window = list(module.window_size)
        self.size = (height, width)
        # torchvision pads the map with zeros to whole windows (the zeros take part in attention)
        pad_bottom, pad_right = (-height % self.window[0]), (-width % self.window[1])
        self.pad = nn.ConstantPad2d((0, pad_right, 0, pad_bottom), 0.0) \
            if pad_bottom or pad_right else None
        height, width = height + pad_bottom, width + pad_right
        self.shift = [0 if w >= n else s for w, n, s in zip(self.window, (height, width),
                                                               module.shift_size)]
        self.height, self.width, self.num_heads = height, width, module.num_heads
        channels = module.qkv.in_features
        self.head_dim = channels // module.num_heads
        weights = module.qkv.weight.detach().chunk(3)
        biases = (module.qkv.bias.detach().chunk(3) if module.qkv.bias is not None
                  else (None,) * 3)
        self.cosine = hasattr(module, "logit_scale")
        if self.cosine:  # v2: normalized q and k, a learned per-head temperature
            self.logit_scale = module.logit_scale
            biases = (biases[0], None if biases[1] is None else torch.zeros_like(biases[1]),
                      biases[2])
        scale = 1.0 if self.cosine else self.head_dim ** -0.5
        self.q = _linear(weights[0] * scale, None if biases[0] is None else biases[0] * scale)
        self.k, self.v = _linear(weights[1], biases[1]), _linear(weights[2], biases[2])
        self.proj = module.proj
        tokens = self.window[0] * self.window[1]
        mask = (_shift_mask(height, width, self.window, self.shift) if sum(self.shift)
                else None)
        self.bias = WindowAttentionBias(module, tokens, mask)
        self.scores, self.context = MatMul(transpose_b=True), MatMul()
        self.softmax = nn.Softmax(-1)
        self.attention_dropout = nn.Dropout(module.attention_dropout)
        self.dropout = nn.Dropout(module.dropout)

    def _heads(self, x):
        """[N, windows, T, C] -> [N, windows, heads, T, D]"""
        return x.reshape(x.shape[0], x.shape[1], x.shape[2], self.num_heads,
                         self.head_dim).permute(0, 1, 3, 2, 4)

    def forward(self, x):
        (wh, ww), (sh, sw) = self.window, self.shift
        rows, cols = self.height // wh, self.width // ww
        if self.pad is not None:
            x = self.pad(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        x = _roll(_roll(x, sh, 1), sw, 2)
        channels = x.shape[3]
        x = x.reshape(x.shape[0], rows, wh, cols, ww, channels).permute(0, 1, 3, 2, 4, 5)
        x = x.reshape(x.shape[0], rows * cols, wh * ww, channels)
        q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        if self.cosine:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        scores = self.scores(q, k)
        if self.cosine:
            scores = scores * self.logit_scale.clamp(max=math.log(100.0)).exp()
        attention = self.softmax(self.bias(scores))
        x = self.context(self.attention_dropout(attention), v).permute(0, 1, 3, 2, 4)
        x = self.dropout(self.proj(x.reshape(x.shape[0], rows * cols, wh * ww, channels)))
        x = x.reshape(x.shape[0], rows, cols, wh, ww, channels).permute(0, 1, 3, 2, 4, 5)
        x = x.reshape(x.shape[0], self.height, self.width, channels)
        x = _roll(_roll(x, (self.height - sh) % self.height, 1), (self.width - sw) % self.width, 2)
        return x if self.pad is None else x[:, :self.size[0], :self.size[1], :]


class DecomposedPatchMerging(nn.Module):
    """torchvision's Swin PatchMerging (v2: PatchMergingV2) for an even H and W: the four strided
    slices and their concat as shape ops and a Concat, then its norm and reduction (v2: reduction
    first)."""

    def __init__(self, module, norm_last=False):
        super().__init__()
        self.norm, self.reduction, self.norm_last = module.norm, module.reduction, norm_last

    def forward(self, x):
        x = torch.cat([x[:, i::2, j::2, :] for i, j in ((0, 0), (1, 0), (0, 1), (1, 1))], -1)
        return self.norm(self.reduction(x)) if self.norm_last else self.reduction(self.norm(x))


# ---- float32 runtime op (a part kept in float) ---------------------------------------------------

@float_export(WindowAttentionBias)
def float_window_attention_bias(module, input_shapes, where):
    return constant_operand_op("add", module.bias().unsqueeze(0), input_shapes[0], where)
