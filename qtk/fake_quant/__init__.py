"""Fake quantizers: quantize-dequantize in the forward pass, straight-through gradient backward.

Register a new fake quantizer with :func:`register_fake_quant` and look it up by name with
:func:`get_fake_quant`.
"""
from ..registry import Registry
from .binary import BinaryFakeQuantize, clip_latent_weights
from .fake_quantize import FakeQuantize
from .learned import LSQFakeQuantize, PACTFakeQuantize, TQTFakeQuantize

_fake_quantizers = Registry("fake quantizer")
register_fake_quant, get_fake_quant = _fake_quantizers.register, _fake_quantizers.get

for _cls in (FakeQuantize, LSQFakeQuantize, PACTFakeQuantize, TQTFakeQuantize, BinaryFakeQuantize):
    register_fake_quant(_cls.__name__, _cls)

__all__ = ["FakeQuantize", "LSQFakeQuantize", "PACTFakeQuantize", "TQTFakeQuantize",
           "BinaryFakeQuantize", "clip_latent_weights", "register_fake_quant", "get_fake_quant"]
