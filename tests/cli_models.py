"""Tiny models for the ``qtk`` command's tests (tests/test_cli.py); ``qtk export`` and ``qtk diff``
import them as ``tests/cli_models.py:tiny``. Random weights, BatchNorm statistics re-estimated on
random data, PTQ calibrated on random data: seconds to build, outputs not degenerate."""
import torch
from torch import nn

import qtk

INPUT_SHAPE = (1, 3, 16, 16)


class Tiny(nn.Module):
    """conv-bn-relu, a residual block (its add fuses into the conv at load), a 1x1 conv, pooling
    and a linear classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8))
        self.relu = nn.ReLU()
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = self.relu(self.block(x) + x)
        x = self.pool(self.expand(x))
        return self.fc(torch.flatten(x, 1))


def _batches(count, batch=8, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, *INPUT_SHAPE[1:], generator=generator) for _ in range(count)]


def tiny_float():
    """The float model (BatchNorm re-estimated) and an example input."""
    torch.manual_seed(0)
    model = Tiny()
    model.train()
    with torch.no_grad():  # BatchNorm statistics of the random data, not (0, 1)
        for x in _batches(4):
            model(x)
    model.eval()
    return model, torch.randn(*INPUT_SHAPE, generator=torch.Generator().manual_seed(2))


def tiny():
    """The PTQ-quantized model and an example input."""
    model, example = tiny_float()
    prepared = qtk.prepare_ptq(model)
    qtk.calibrate(prepared, _batches(4, seed=3))
    return qtk.convert(prepared), example


def tiny_mixed():
    """As :func:`tiny` with the linear layer kept float (a dequantize, then a float32 linear)."""
    model, example = tiny_float()
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_type={nn.Linear: None})
    prepared = qtk.prepare_ptq(model, qconfig=mapping)
    qtk.calibrate(prepared, _batches(4, seed=3))
    return qtk.convert(prepared), example
