"""Learned fake quantizers (LSQ, PACT, TQT): their ranges train, and whatever they learn deploys
byte-identical; TQT's power-of-two scales deploy as pure shifts."""
import pytest
import torch
from torch import nn

import qtk
from qtk.fake_quant import LSQFakeQuantize, PACTFakeQuantize, TQTFakeQuantize, get_fake_quant
from qtk.qconfig import QAT_QUANTIZERS

QCONFIGS = {name: QAT_QUANTIZERS[name] for name in ("lsq", "pact", "tqt")}


def _model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 6, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(6, 4))


def _learned_parameters(model):
    return {name: p for name, p in model.named_parameters()
            if name.endswith(("scale", "alpha", "log2_threshold"))}


@pytest.mark.parametrize("name", sorted(QCONFIGS))
def test_learned_ranges_train_and_deploy_byte_identical(name):
    torch.manual_seed(0)
    qat = qtk.quantize_qat(_model(), QCONFIGS[name]).train()
    qat(torch.randn(8, 3, 8, 8))  # first batch initializes the ranges from the observers
    learned = _learned_parameters(qat)
    assert learned, "no learned range parameters found"
    before = {k: v.detach().clone() for k, v in learned.items()}
    optimizer = torch.optim.Adam(qat.parameters(), lr=1e-2)
    for _ in range(5):
        x = torch.randn(8, 3, 8, 8)
        loss = (qat(x) - x.mean((1, 2, 3)).unsqueeze(1)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert any(not torch.equal(before[k], v) for k, v in learned.items())

    quantized = qtk.convert(qat.eval())
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 8, 8)))
    x = torch.randn(5, 3, 8, 8)
    with qtk.int8_outputs(quantized):
        assert torch.equal(quantized(x), session.run(x, output="int8"))
    if name == "tqt":  # power-of-two scales: every requantization is a shift
        for module in quantized.modules():
            if hasattr(module, "multiplier") and torch.is_tensor(module.multiplier):
                assert set(module.multiplier.tolist()) == {2**30}


def test_learned_quantizer_state_dict_round_trips():
    torch.manual_seed(0)
    qat = qtk.quantize_qat(_model(), QCONFIGS["lsq"]).train()
    qat(torch.randn(4, 3, 8, 8))
    fresh = qtk.quantize_qat(_model(), QCONFIGS["lsq"])
    fresh.load_state_dict(qat.state_dict())
    x = torch.randn(2, 3, 8, 8)
    assert torch.equal(qat.eval()(x), fresh.eval()(x))


def test_learned_quantizers_are_registered():
    assert get_fake_quant("LSQFakeQuantize") is LSQFakeQuantize
    assert get_fake_quant("PACTFakeQuantize") is PACTFakeQuantize
    assert get_fake_quant("TQTFakeQuantize") is TQTFakeQuantize
