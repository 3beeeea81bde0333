"""Fake quantizers: quantize-dequantize in the forward pass, straight-through gradient backward.

Register a new fake quantizer with :func:`register_fake_quant` and name it in a :class:`qtk.QConfig`.
"""
from .fake_quantize import FakeQuantize

_REGISTRY = {}


def register_fake_quant(name, cls):
    """Make ``cls`` available to :func:`get_fake_quant` under ``name``."""
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"a fake quantizer named {name!r} is already registered")
    _REGISTRY[name] = cls


def get_fake_quant(name):
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no fake quantizer named {name!r}; registered: {sorted(_REGISTRY)}") from None


register_fake_quant("FakeQuantize", FakeQuantize)

__all__ = ["FakeQuantize", "register_fake_quant", "get_fake_quant"]
