"""Observers: modules that watch a tensor and turn its statistics into quantization parameters.

Contract (two methods): ``forward(x)`` updates the statistics and returns ``x`` unchanged;
``calculate_qparams()`` returns ``(scale, zero_point)`` as float32 / int64 tensors. Register a new
observer with :func:`register_observer` and name it in a :class:`qtk.QConfig`.
"""
from .minmax import (MinMaxObserver, MovingAverageMinMaxObserver, Observer,
                     PerChannelMinMaxObserver, qparams_from_range)

_REGISTRY = {}


def register_observer(name, cls):
    """Make ``cls`` available to :func:`get_observer` under ``name``."""
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"an observer named {name!r} is already registered ({_REGISTRY[name]})")
    _REGISTRY[name] = cls


def get_observer(name):
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no observer named {name!r}; registered: {sorted(_REGISTRY)}") from None


for _cls in (MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver):
    register_observer(_cls.__name__, _cls)

__all__ = ["Observer", "MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
           "qparams_from_range", "register_observer", "get_observer"]
