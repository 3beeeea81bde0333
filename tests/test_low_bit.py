"""Bit widths 2 to 8 for weights and activations (spec 16): every quantizer deploys byte-identical
to the Quantized reference, and every activation stays inside its sub-8-bit range."""
import pytest
import torch
from torch import nn

import qtk
from qtk.qconfig import QAT_QUANTIZERS, bits_qconfig, integer_range

BASES = QAT_QUANTIZERS


class Branchy(nn.Module):
    """Every op whose output could leave a narrow range: the graph input, conv, add, concat,
    a table function, bilinear resize, pooling and linear."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = qtk.modules.QuantStub(), qtk.modules.DequantStub()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.left = nn.Conv2d(8, 8, 3, padding=1)
        self.right = nn.Sequential(nn.Conv2d(8, 4, 1), nn.Hardswish())
        self.add, self.cat = qtk.modules.Add(), qtk.modules.Concat(1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 5))

    def forward(self, x):
        x = self.stem(self.quant(x))
        y = self.cat([self.add(self.left(x), x), self.right(x)])
        return self.dequant(self.head(self.pool(self.up(y))))


def _deploy_byte_identical(qconfig):
    """A few QAT steps on Branchy, then the runtime's int8 output must equal the reference's.
    Returns the Quantized model."""
    torch.manual_seed(0)
    qat = qtk.quantize_qat(Branchy(), qconfig).train()
    optimizer = torch.optim.SGD(qat.parameters(), lr=1e-3)
    target = torch.randn(8, 5)
    for _ in range(3):
        loss = (qat(torch.randn(8, 3, 10, 10)) - target).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    quantized = qtk.convert(qat.eval())
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 10, 10)))
    x = torch.randn(4, 3, 10, 10) * 2  # wide inputs: the input quantization must clamp too
    with qtk.int8_outputs(quantized):
        expected = quantized(x)
    assert torch.equal(expected, session.run(x, output="int8"))
    assert len(expected.unique()) > 1, "degenerate output: the check would hold trivially"
    return quantized


def _levels(qparams):
    return qparams.qmax - qparams.qmin + 1


def _check_deploys_in_range(qconfig, bits_range):
    quantized = _deploy_byte_identical(qconfig)
    qmin, qmax = bits_range
    for module in quantized.modules():
        if isinstance(module, qtk.modules.QuantizedModule) and module.output_qparams:
            assert _levels(module.output_qparams) == qmax - qmin + 1


def test_first_and_last_layers_and_the_input_keep_8_bits_in_a_low_bit_mapping():
    mapping = qtk.bits_qconfig_mapping(Branchy(), 4, 4)
    assert sorted(mapping.by_name) == ["head.2", "quant", "stem.0"]  # forward() order, not type
    quantized = _deploy_byte_identical(mapping)
    outputs = {name: _levels(module.output_qparams) for name, module in quantized.named_modules()
               if isinstance(module, qtk.modules.QuantizedModule) and module.output_qparams}
    assert [outputs.pop(name) for name in ("quant", "stem.0", "head.2")] == [256] * 3
    assert set(outputs.values()) == {16}, outputs
    weights = {name: int(module.weight_q.abs().max()) for name, module in
               quantized.named_modules() if hasattr(module, "weight_q")}
    assert [weights.pop(name) for name in ("stem.0", "head.2")] == [127] * 2
    assert set(weights.values()) == {7}, weights


@pytest.mark.parametrize("quantizer", sorted(BASES))
@pytest.mark.parametrize("weight_bits,activation_bits", [(8, 8), (4, 8), (4, 4), (2, 2)])
def test_bit_widths_deploy_byte_identical(quantizer, weight_bits, activation_bits):
    qconfig = bits_qconfig(weight_bits, activation_bits, BASES[quantizer])
    _check_deploys_in_range(qconfig, integer_range(activation_bits))


@pytest.mark.parametrize("bits", [3, 5, 8])
def test_unsigned_activations_deploy_byte_identical(bits):
    """[0, 255] moves into the int8 container with its zero point; [0, 7] fits as it is."""
    qconfig = bits_qconfig(8, bits, signed_activations=False)
    _check_deploys_in_range(qconfig, integer_range(bits, signed=False))


@pytest.mark.parametrize("options", [dict(narrow_activations=True),
                                     dict(per_channel_weights=False),
                                     dict(signed_activations=False, per_channel_weights=False)])
def test_narrow_activations_and_per_tensor_weights_deploy_byte_identical(options):
    for bits in (8, 4):
        qconfig = bits_qconfig(bits, bits, **options)
        _check_deploys_in_range(qconfig, integer_range(
            bits, options.get("signed_activations", True), options.get("narrow_activations",
                                                                       False)))


@pytest.mark.parametrize("bits", [2, 3, 4, 6])
def test_low_bit_weights_use_their_range(bits):
    torch.manual_seed(0)
    qat = qtk.quantize_qat(Branchy(), bits_qconfig(bits)).train()
    qat(torch.randn(8, 3, 10, 10))
    quantized = qtk.convert(qat.eval())
    limit = 2 ** (bits - 1) - 1
    weights = [m.weight_q for m in quantized.modules() if hasattr(m, "weight_q")]
    assert all(int(w.abs().max()) == limit for w in weights)


def test_bit_widths_outside_1_to_8_are_refused():  # 1 is binary (tests/test_binary.py)
    with pytest.raises(ValueError, match="bit width"):
        bits_qconfig(0, 8)
    with pytest.raises(ValueError, match="bit width"):
        bits_qconfig(8, 9)


@pytest.mark.parametrize("bits,storage", [(2, 2), (3, 4), (4, 4), (6, 8)])
def test_sub_8_bit_weights_are_stored_packed(bits, storage):
    from qtk.export.exporter import build_writer

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64 * 36, 10))
    qat = qtk.quantize_qat(model, bits_qconfig(bits)).train()
    qat(torch.randn(8, 3, 8, 8))
    quantized = qtk.convert(qat.eval())
    example = torch.randn(1, 3, 8, 8)
    writer = build_writer(quantized, example)
    weights = [v for v in writer.values if v["name"].endswith(".weight")]
    assert [v.get("packed_bits", 8) for v in weights] == [storage] * 2
    int8_bytes = sum(v["data"].numel() for v in weights)
    data = writer.to_bytes()
    assert len(data) < int8_bytes * storage / 8 + 16 * 1024  # weights packed, plus graph/bias
    x = torch.randn(3, 3, 8, 8)
    with qtk.int8_outputs(quantized):
        assert torch.equal(quantized(x), qtk.runtime.load(data).run(x, output="int8"))


def test_packed_weights_round_trip_every_value():
    from qtk.export.qmodel_writer import pack_signed

    for bits in (2, 4):
        values = torch.arange(-(2 ** (bits - 1)), 2 ** (bits - 1), dtype=torch.int8).repeat(3)[:-1]
        packed = pack_signed(values, bits)
        assert len(packed) == -(-values.numel() * bits // 8)
        fields = [(byte >> shift) & ((1 << bits) - 1) for byte in packed
                  for shift in range(0, 8, bits)][:values.numel()]
        signed = [f - (1 << bits) if f >= 1 << (bits - 1) else f for f in fields]
        assert signed == values.tolist()
