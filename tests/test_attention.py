"""Attention decomposed into the ops qtk quantizes one by one (qtk/modules/attention.py): each
decomposition computes what the torch / torchvision module computes, in float, so QAT starts
from the same model; then a small transformer deploys with its Linear layers and matmuls in int8."""
import pytest
import torch
from torch import nn
from torchvision.models.swin_transformer import (PatchMerging, PatchMergingV2,
                                                 ShiftedWindowAttention, ShiftedWindowAttentionV2)

import qtk
from qtk.graph.decompose import decompose
from qtk.modules.attention import (DecomposedMultiheadAttention, DecomposedPatchMerging,
                                   DecomposedWindowAttention)


@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_decomposition_equals_torch(bias):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(24, 4, bias=bias, batch_first=True).eval()
    x = torch.randn(3, 7, 24)
    expected, expected_weights = mha(x, x, x)
    out, weights = DecomposedMultiheadAttention(mha).eval()(x, x, x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
    assert DecomposedMultiheadAttention(mha)(x, x, x, need_weights=False)[1] is None


def test_multihead_attention_with_a_mask_is_refused_by_name():
    mha = DecomposedMultiheadAttention(nn.MultiheadAttention(8, 2, batch_first=True))
    x = torch.randn(1, 3, 8)
    with pytest.raises(qtk.UnsupportedOpError, match="with a mask"):
        mha(x, x, x, attn_mask=torch.zeros(3, 3, dtype=torch.bool))


@pytest.mark.parametrize("version", [ShiftedWindowAttention, ShiftedWindowAttentionV2])
@pytest.mark.parametrize("size, window, shift", [
    ((8, 12), [4, 4], [2, 2]),  # shifted: the mask and the rolls
    ((6, 6), [3, 3], [0, 0]),
    ((4, 8), [4, 4], [2, 2]),  # the window covers the height: no shift along it
    ((7, 10), [4, 4], [2, 2]),  # padded to whole windows
])
def test_window_attention_decomposition_equals_torchvision(size, window, shift, version):
    torch.manual_seed(0)
    swin = version(16, window, shift, num_heads=4).eval()
    with torch.no_grad():
        for parameter in swin.parameters():  # v2's cpb MLP and the key bias it zeroes included
            parameter.normal_(0, 0.5)
    x = torch.randn(2, *size, 16)
    decomposed = DecomposedWindowAttention(swin, *size).eval()
    torch.testing.assert_close(decomposed(x), swin(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("version", [PatchMerging, PatchMergingV2])
def test_patch_merging_decomposition_equals_torchvision(version):
    merge = version(8).eval()
    x = torch.randn(2, 6, 10, 8)
    decomposed = DecomposedPatchMerging(merge, norm_last=version is PatchMergingV2)
    torch.testing.assert_close(decomposed(x), merge(x))


class TinySwin(nn.Module):
    """Patches, a shifted-window block, patch merging and a head."""

    def __init__(self):
        super().__init__()
        self.patches = nn.Conv2d(3, 16, 2, stride=2)
        self.norm = nn.LayerNorm(16)
        self.attention = ShiftedWindowAttention(16, [4, 4], [2, 2], num_heads=2)
        self.merge = PatchMerging(16)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        x = self.patches(x).permute(0, 2, 3, 1)
        x = x + self.attention(self.norm(x))
        return self.head(self.merge(x).permute(0, 3, 1, 2).mean((2, 3)))


def test_swin_modules_are_decomposed_only_with_example_inputs():
    model = TinySwin().eval()
    x = torch.randn(1, 3, 16, 16)
    with pytest.warns(UserWarning, match="PatchMerging, ShiftedWindowAttention can be quantized "
                                         "only when prepare is given example_inputs="):
        kept = decompose(TinySwin().eval())
    assert isinstance(kept.attention, ShiftedWindowAttention)
    decomposed = decompose(model, (x,))
    assert isinstance(decomposed.attention, DecomposedWindowAttention)
    assert isinstance(decomposed.merge, DecomposedPatchMerging)


def test_tiny_swin_deploys_with_linear_and_matmul_in_int8():
    torch.manual_seed(0)
    model = TinySwin().eval()
    x = torch.randn(2, 3, 16, 16)
    with pytest.warns(qtk.FloatFallbackWarning, match=r"1 op\(s\) .*\(WindowAttentionBias\)"):
        prepared = qtk.prepare_ptq(model, example_inputs=x[:1])
    report = qtk.report(prepared, x[:1])
    precision = {row.op: row.precision for row in report.rows}
    assert all(precision[op] == "int8" for op in ("Linear", "MatMul", "LayerNorm", "Softmax"))
    assert report.int8_mac_share > 0.9
    with torch.no_grad():
        for _ in range(3):
            prepared(torch.randn(4, 3, 16, 16))
    quantized = qtk.convert(prepared)
    session = qtk.runtime.load(qtk.export(quantized, x[:1]), threads=2)
    with torch.no_grad():
        expected = quantized(x)
    actual = session.run(x)
    # the float part (the bias) may move an int8 value by one step (spec 15)
    step = max(m.input_qparams[0].scale for m in quantized.modules()
               if isinstance(m, qtk.modules.QuantizedDequantStub))
    assert (actual - expected).abs().max() <= 2 * step
    assert torch.unique(expected).numel() >= 8
    with torch.no_grad():
        assert (expected - model(x)).abs().max() < 0.1 * model(x).abs().max() + 0.05


def test_tiny_swin_trains_with_qat_and_deploys():
    """QAT through the decomposed attention: the model's own position table and projections get
    gradients, and the trained model converts and deploys."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 16)
    qat = qtk.quantize_qat(TinySwin(), example_inputs=x[:1]).train()
    optimizer = torch.optim.SGD(qat.parameters(), lr=1e-3)
    for _ in range(2):
        loss = qat(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    table = qat.get_submodule("attention.bias").table
    assert table.grad is not None and table.grad.abs().sum() > 0
    quantized = qtk.convert(qat.eval())
    session = qtk.runtime.load(qtk.export(quantized, x[:1]))
    with torch.no_grad():
        expected = quantized(x)
    assert torch.unique(expected).numel() >= 8
    assert (session.run(x) - expected).abs().max() <= 2 * max(
        m.input_qparams[0].scale for m in quantized.modules()
        if isinstance(m, qtk.modules.QuantizedDequantStub))
