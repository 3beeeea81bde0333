"""Observers: modules that watch a tensor and turn its statistics into quantization parameters.

Contract (two methods): ``forward(x)`` updates the statistics and returns ``x`` unchanged;
``calculate_qparams()`` returns ``(scale, zero_point)`` as float32 / int64 tensors. Register a new
observer with :func:`register_observer` and look it up by name with :func:`get_observer`.
"""
from ..registry import Registry
from .histogram import HistogramObserver, PerChannelHistogramObserver
from .minmax import (MinMaxObserver, MovingAverageMinMaxObserver, Observer,
                     PerChannelMinMaxObserver, qparams_from_range)

_observers = Registry("observer")
register_observer, get_observer = _observers.register, _observers.get

for _cls in (MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver,
             HistogramObserver, PerChannelHistogramObserver):
    register_observer(_cls.__name__, _cls)

__all__ = ["Observer", "HistogramObserver", "MinMaxObserver", "MovingAverageMinMaxObserver",
           "PerChannelHistogramObserver", "PerChannelMinMaxObserver", "qparams_from_range",
           "register_observer", "get_observer"]
