"""QConfig: which fake quantizer (and observer) each activation and weight gets."""
import dataclasses
import functools
from typing import Callable

from . import arithmetic
from .fake_quant import FakeQuantize
from .observers import MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver


def with_args(cls, **kwargs):
    """A factory for ``cls`` with keyword arguments bound (QConfig holds factories, not modules)."""
    return functools.partial(cls, **kwargs)


@dataclasses.dataclass(frozen=True)
class QConfig:
    """How a module's output activation and its weight are quantized.

    Args:
        activation: factory returning a fake quantizer for the module's output (int8, asymmetric,
            per tensor).
        weight: factory returning a fake quantizer for the weight (int8, symmetric narrow range,
            per output channel).
    """
    activation: Callable
    weight: Callable

    def __post_init__(self):
        for field in ("activation", "weight"):
            if not callable(getattr(self, field)) or isinstance(getattr(self, field), FakeQuantize):
                raise TypeError(f"QConfig.{field} must be a factory (a class or qtk.qconfig.with_args"
                                f"(...)), not a module instance: each module needs its own quantizer")


_WEIGHT_RANGE = dict(qmin=arithmetic.WEIGHT_MIN, qmax=arithmetic.WEIGHT_MAX, symmetric=True)

# QAT: activations by moving average (robust to the first noisy batches), weights by their current
# per-channel range (averaging_constant=1.0: weights change every step, history would be stale).
default_qat_qconfig = QConfig(
    activation=with_args(FakeQuantize, observer=MovingAverageMinMaxObserver),
    weight=with_args(FakeQuantize, observer=with_args(PerChannelMinMaxObserver,
                                                      averaging_constant=1.0, **_WEIGHT_RANGE)),
)

# PTQ: observe only (no fake quantization) while calibration batches run; running min/max.
default_ptq_qconfig = QConfig(
    activation=with_args(FakeQuantize, observer=MinMaxObserver, fake_quant_enabled=False),
    weight=with_args(FakeQuantize, observer=with_args(PerChannelMinMaxObserver, **_WEIGHT_RANGE),
                     fake_quant_enabled=False),
)
