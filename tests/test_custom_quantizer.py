"""The custom-quantizer example of docs/quantizers.md, run exactly as written: it registers,
trains, exports and runs byte-identical, with power-of-two scales (shift-only requantization)."""
import re
from pathlib import Path

import torch
from torch import nn

import qtk

DOC = Path(__file__).resolve().parents[1] / "docs" / "quantizers.md"


def _example_namespace():
    code = re.search(r"## A custom quantizer.*?```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert len(code.strip().splitlines()) < 30, "the docs promise an example under 30 lines"
    namespace = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


def test_documented_custom_quantizer_deploys_byte_identical():
    example = _example_namespace()
    assert qtk.fake_quant.get_fake_quant("PowerOfTwoFakeQuantize") is \
        example["PowerOfTwoFakeQuantize"]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 4 * 4, 5))
    qat = qtk.quantize_qat(model, example["power_of_two_qconfig"]).train()
    optimizer = torch.optim.SGD(qat.parameters(), lr=0.01)
    for _ in range(3):
        loss = qat(torch.randn(4, 3, 6, 6)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    quantized = qtk.convert(qat.eval())
    multipliers = {m for module in quantized.modules() if hasattr(module, "weight_q")
                   for m in module.multiplier.tolist()}
    assert multipliers == {2**30}, "power-of-two scales should requantize by shifts only"
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 6, 6)))
    x = torch.randn(3, 3, 6, 6)
    with qtk.int8_outputs(quantized):
        assert torch.equal(quantized(x), session.run(x, output="int8"))
