"""MatMul of two activations in int8 (docs/quantization_spec.md section 17): the Quantized model
and the runtime agree byte for byte on attention-shaped products (q kᵀ with transpose_b, attn v),
convert refuses a K beyond the int32 bound by the module's name, and transpose_b exports in
float32 too.
"""
import pytest
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime
from qtk import arithmetic, modules

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("error::qtk.FloatFallbackWarning")]


class Attention(nn.Module):
    """x [N, T, E] -> q, k, v [N, H, T, D] (k and v with ``kv_heads`` heads: 1 broadcasts them
    over the query heads); scores q kᵀ (transpose_b), a sigmoid (a table: every op stays int8),
    context attn v. ``rank`` 3 merges nothing: one head, [N, T, D]."""

    def __init__(self, tokens_dim, heads, head_dim, kv_heads=None, rank=4):
        super().__init__()
        self.heads, self.head_dim, self.rank = heads, head_dim, rank
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.q = nn.Linear(tokens_dim, heads * head_dim)
        self.k = nn.Linear(tokens_dim, self.kv_heads * head_dim)
        self.v = nn.Linear(tokens_dim, self.kv_heads * head_dim)
        self.scores = modules.MatMul(transpose_b=True)
        self.context = modules.MatMul()

    def _heads(self, x, heads):
        if self.rank == 3:
            return x
        return x.reshape(x.shape[0], x.shape[1], heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        q = self._heads(self.q(x), self.heads)
        k = self._heads(self.k(x), self.kv_heads)
        v = self._heads(self.v(x), self.kv_heads)
        return self.context(torch.sigmoid(self.scores(q, k)), v)


def _quantized(model, tokens, width):
    calibration = [torch.randn(4, tokens, width) for _ in range(2)]
    return calibrated(model.eval(), calibration)


CASES = {  # (T, E, H, D, kv_heads, rank)
    "heads 3, T 7, D 5": (7, 9, 3, 5, None, 4),
    "one head, T 5, D 3": (5, 6, 1, 3, None, 4),
    "one token": (1, 4, 2, 3, None, 4),
    "k and v shared by the heads": (7, 8, 3, 3, 1, 4),
    "rank 3, T 9, D 11": (9, 11, 1, 11, None, 3),
    "T 17, D 33 (K around 32)": (17, 12, 2, 33, None, 4),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_runtime_is_byte_identical_to_the_quantized_model(case, batch, threads):
    tokens, width, heads, head_dim, kv_heads, rank = CASES[case]
    quantized = _quantized(Attention(width, heads, head_dim, kv_heads, rank), tokens, width)
    matmuls = [m for m in quantized.modules() if isinstance(m, modules.QuantizedMatMul)]
    assert [m.transpose_b for m in matmuls] == [True, False]  # both products are int8
    x = torch.randn(batch, tokens, width)
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=threads)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=min(24, reference.numel() // 2))


def test_vit_b_16_attention_shapes():
    """Its 12 heads of 197 tokens by 64, every op int8, so the comparison sees the matmuls'
    bytes (a whole model with float parts may differ by one step after each of them, spec 15)."""
    quantized = _quantized(Attention(768, 12, 64), 197, 768)
    x = torch.randn(2, 197, 768)
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=100)


def test_scores_are_byte_identical_and_spread():
    """The scores alone (the model's output is q kᵀ), so their int8 values are compared as they
    leave the kernel, over most of the int8 range."""
    class Scores(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention(10, 2, 7)

        def forward(self, x):
            a = self.attention
            return a.scores(a._heads(a.q(x), 2), a._heads(a.k(x), 2))

    quantized = _quantized(Scores(), 13, 10)
    x = torch.randn(3, 13, 10)
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=100)


def test_quantized_forward_is_spec_17():
    """The Quantized module against the spec written out: an exact int64 sum per output, one
    requantize, for a broadcast batch dim and transpose_b."""
    model = Attention(6, 3, 5, kv_heads=1)
    quantized = _quantized(model, 7, 6)
    scores = next(m for m in quantized.modules() if isinstance(m, modules.QuantizedMatMul))
    a = torch.randint(-128, 128, (2, 3, 7, 5), dtype=torch.int8)
    b = torch.randint(-128, 128, (2, 1, 7, 5), dtype=torch.int8)
    (_, z_a, _, _), (_, z_b, _, _) = scores.input_qparams
    _, z_y, lo, hi = scores.output_qparams
    centered_a, centered_b = a.long() - z_a, b.long() - z_b
    acc = torch.zeros(2, 3, 7, 7, dtype=torch.int64)
    for k in range(5):
        acc += centered_a[..., :, k:k + 1] * centered_b[..., :, k].unsqueeze(-2)
    expected = arithmetic.requantize(acc, scores.multiplier, scores.shift, z_y, lo, hi)
    assert torch.equal(scores(a, b), expected.to(torch.int8))


class Deep(nn.Module):
    """q kᵀ of one row of K features: K products per output."""

    def __init__(self):
        super().__init__()
        self.scores = modules.MatMul(transpose_b=True)

    def forward(self, x):
        return self.scores(x, torch.sigmoid(x))


def test_a_k_beyond_the_int32_bound_is_refused_at_convert():
    depth = arithmetic.MATMUL_MAX_DEPTH + 1
    assert arithmetic.MATMUL_MAX_DEPTH == 33025
    assert depth * 255 * 255 >= 2**31 > arithmetic.MATMUL_MAX_DEPTH * 255 * 255
    prepared = qtk.prepare_ptq(Deep().eval())
    with torch.no_grad():
        prepared(torch.randn(2, 1, depth))
    with pytest.raises(ValueError, match=r"^scores: the int32 accumulator of this matmul could "
                                         r"overflow: K = 33026 products of up to 255 \* 255, "
                                         r"above the 33025 that fit"):
        qtk.convert(prepared)


def test_the_k_bound_is_checked_again_where_convert_did_not_see_k():
    """A QAT module that never ran (its K unknown at convert) is refused at its first int8 run
    and at export."""
    depth = arithmetic.MATMUL_MAX_DEPTH + 1
    prepared = qtk.prepare_ptq(Deep().eval())
    with torch.no_grad():
        prepared(torch.randn(2, 1, 8))
    quantized = qtk.convert(prepared)  # K 8 seen: accepted
    with pytest.raises(ValueError, match=r"^scores: .* K = 33026 products"):
        quantized(torch.randn(1, 1, depth))
    with pytest.raises(ValueError, match=r"^scores: .* K = 33026 products"):
        qtk.export(quantized, torch.randn(1, 1, depth))


def test_k_at_the_bound_converts():
    prepared = qtk.prepare_ptq(Deep().eval())
    with torch.no_grad():
        prepared(torch.randn(2, 1, arithmetic.MATMUL_MAX_DEPTH))
    quantized = qtk.convert(prepared)
    assert any(isinstance(m, modules.QuantizedMatMul) for m in quantized.modules())


@pytest.mark.parametrize("batch", [1, 3])
def test_float_export_with_transpose_b(batch):
    """A float model's MatMul(transpose_b=True) is the float32 op with transpose_b."""
    model = Attention(9, 3, 5).eval()
    session = qtk.runtime.load(qtk.export(model, torch.randn(1, 7, 9)), threads=2)
    assert "quantize" not in session.model.op_names
    x = torch.randn(batch, 7, 9)
    with torch.no_grad():
        expected = model(x)
    actual = session.run(x)
    assert actual.shape == expected.shape
    assert torch.all((actual - expected).abs() <= 1e-4 * (1 + expected.abs()))
    assert torch.unique(expected).numel() > expected.numel() // 2
