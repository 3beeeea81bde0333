"""QConfig: which fake quantizer (and observer) each activation and weight gets."""
import dataclasses
import fnmatch
import functools
from typing import Callable, Optional

import torch
from torch import nn

from . import arithmetic
from .graph.capture import capture
from .modules import QuantStub
from .fake_quant import (BinaryFakeQuantize, FakeQuantize, LSQFakeQuantize, PACTFakeQuantize,
                         TQTFakeQuantize)
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
        input: for a convolution that quantizes what it reads itself, the factory of that
            quantizer: :class:`qtk.BinaryFakeQuantize` for 1-bit inputs (spec 24), or an affine
            one (e.g. 2 bits) that the layer's int8 input is requantized to (spec 16). ``None``:
            the layer reads its producer's int8 output as it is.
        channel_activation: the factory of the output's fake quantizer where the output can be
            quantized per channel: where every layer that reads it folds a scale per channel
            (depthwise convolutions, table functions) and its producer writes one (a convolution
            without ReLU6, a table function); spec 25. Its observer has ``ch_axis=1`` and
            ``shared_zero_point=True`` (:func:`per_channel_activations`). ``None``: every
            output per tensor.
    """
    activation: Callable
    weight: Callable
    input: Optional[Callable] = None
    channel_activation: Optional[Callable] = None

    def __post_init__(self):
        for field in ("activation", "weight", "input", "channel_activation"):
            if field in ("input", "channel_activation") and getattr(self, field) is None:
                continue
            if not callable(getattr(self, field)) or isinstance(getattr(self, field), nn.Module):
                raise TypeError(f"QConfig.{field} must be a factory (a class or "
                                f"qtk.qconfig.with_args(...)), not a module instance: each module "
                                f"needs its own quantizer")


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


_QAT_WEIGHT = with_args(PerChannelMinMaxObserver, averaging_constant=1.0, **_WEIGHT_RANGE)

# int8 QAT with each fake quantizer: the straight-through estimator over observed ranges, or a
# learned range (LSQ's step size, PACT's clipping level, TQT's power-of-two threshold). Combine with
# bits_qconfig(..., base=QAT_QUANTIZERS["lsq"]) for other bit widths.
QAT_QUANTIZERS = {
    "ste": default_qat_qconfig,
    "lsq": QConfig(activation=with_args(LSQFakeQuantize, observer=MovingAverageMinMaxObserver),
                   weight=with_args(LSQFakeQuantize, observer=_QAT_WEIGHT)),
    "pact": QConfig(activation=with_args(PACTFakeQuantize, observer=MovingAverageMinMaxObserver),
                    weight=with_args(LSQFakeQuantize, observer=_QAT_WEIGHT)),
    "tqt": QConfig(activation=with_args(TQTFakeQuantize,
                                        observer=with_args(MovingAverageMinMaxObserver,
                                                           symmetric=True)),
                   weight=with_args(TQTFakeQuantize, observer=_QAT_WEIGHT)),
}


class QConfigMapping:
    """Which QConfig each module gets: by module path pattern, then by type, then a default.

    ``None`` keeps a module in float; the runtime then runs it with float kernels between a
    dequantize and a quantize (docs/quantization_spec.md section 15).

    Args:
        default: the QConfig of every module not matched below (``None``: float by default).
        by_type: ``{module type: QConfig or None}``; a fused layer matches the type of its
            first part too (a ConvBnReLU2d matches ``nn.Conv2d``), a BatchNorm fused alone the
            BatchNorm's.
        by_name: ``{pattern: QConfig or None}``; ``fnmatch`` patterns over module paths such as
            ``"layer4.*"``; a pattern that matches a module also covers everything inside it.
            Earlier entries win.
    """

    def __init__(self, default=None, by_type=None, by_name=None):
        self.default = default
        self.by_type = dict(by_type or {})
        self.by_name = dict(by_name or {})

    def qconfig_for(self, path, module):
        prefixes = [".".join(path.split(".")[:i]) for i in range(len(path.split(".")), 0, -1)]
        for pattern, qconfig in self.by_name.items():
            if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
                return qconfig
        candidates = [module]
        if isinstance(module, torch.nn.Sequential):  # the part the user wrote
            candidates.append(module[1] if getattr(module, "standalone_batchnorm", False)
                              else module[0])
        for candidate in candidates:
            for cls in type(candidate).__mro__:
                if cls in self.by_type:
                    return self.by_type[cls]
        return self.default


def as_mapping(qconfig, default):
    """A QConfig, a QConfigMapping or None (the default) -> a QConfigMapping."""
    if qconfig is None:
        return QConfigMapping(default)
    if isinstance(qconfig, QConfig):
        return QConfigMapping(qconfig)
    if isinstance(qconfig, QConfigMapping):
        return qconfig
    raise TypeError(f"qconfig must be a qtk.QConfig or qtk.QConfigMapping, got {type(qconfig)}")


BINARY_WEIGHT = with_args(BinaryFakeQuantize, per_channel=True)
BINARY_INPUT = BinaryFakeQuantize


def integer_range(bits, signed=True, narrow=False):
    """[qmin, qmax] of a ``bits``-bit integer: signed or unsigned, narrow range dropping the most
    negative (signed) or the lowest (unsigned) value, so the range is symmetric about its middle."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bit width must be in [2, 8] (1 bit is binary: bits_qconfig), got {bits}")
    qmin, qmax = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    return qmin + int(narrow), qmax


def with_observer_args(fake_quant_factory, **observer_kwargs):
    """A fake quantizer factory (``with_args(SomeFakeQuantize, observer=...)``) whose observer
    gets ``observer_kwargs`` too: ``qmin``/``qmax`` for another range, ``ch_axis=None`` for
    per-tensor statistics."""
    observer = getattr(fake_quant_factory, "keywords", {}).get("observer")
    if observer is None:
        raise TypeError("with_observer_args needs a factory made by with_args(FakeQuantizeClass, "
                        "observer=...)")
    return functools.partial(fake_quant_factory, observer=with_args(observer, **observer_kwargs))


def per_channel_activations(qconfig):
    """``qconfig`` with outputs quantized per channel where every reader can take it (spec 25):
    its activation quantizer with a scale per channel and one zero point. The channels of a
    convolution's output that feeds a depthwise convolution, often through a HardSwish or SiLU,
    can be 50x apart after BatchNorm folding; one scale for them all leaves the small ones a
    handful of levels."""
    return dataclasses.replace(qconfig, channel_activation=with_observer_args(
        qconfig.activation, ch_axis=1, shared_zero_point=True))


def bits_qconfig(weight_bits=8, activation_bits=8, base=None, signed_activations=True,
                 narrow_activations=False, per_channel_weights=True):
    """``base`` (default: int8 QAT) at other bit widths, e.g. ``bits_qconfig(4, 4)`` for w4a4.

    Weights are symmetric narrow range ([-7, 7] at 4 bits), per output channel unless
    ``per_channel_weights=False``; activations keep base's quantizer and observer with an
    ``activation_bits``-bit range, signed or unsigned, optionally narrow. Sub-8-bit values live in
    int8 containers (weights are packed in the .qmodel) and run in the int8 kernels, clamped to
    their range, so the deployed model stays byte-identical (spec 16).

    1 bit is binary (spec 24): ``weight_bits=1`` gives weights of +-1 with a scale per channel;
    ``activation_bits=1`` makes each convolution read the sign of its int8 input (outputs stay
    8 bits, the real-valued path of Bi-Real and ReActNet blocks)."""
    base = base or default_qat_qconfig
    if weight_bits == 1:
        weight = BINARY_WEIGHT
    else:
        w_min, w_max = integer_range(weight_bits, narrow=True)
        weight = with_observer_args(base.weight, qmin=w_min, qmax=w_max,
                                    **({} if per_channel_weights else dict(ch_axis=None)))
    if activation_bits == 1:
        return QConfig(activation=base.activation, weight=weight, input=BINARY_INPUT)
    a_min, a_max = integer_range(activation_bits, signed_activations, narrow_activations)
    return QConfig(activation=with_observer_args(base.activation, qmin=a_min, qmax=a_max),
                   weight=weight)


def bits_qconfig_mapping(model, weight_bits, activation_bits, base=None, edge_bits=8,
                         **bits_kwargs):
    """:func:`bits_qconfig` for every layer of ``model`` but its first and last conv or linear
    layer (in the order ``forward()`` runs them) and its graph input, which keep ``edge_bits``:
    the usual low-bit recipe (LSQ, PACT), since the first layer sees raw pixels through few
    channels and the last one produces the logits.

    ``bits_kwargs`` go to both :func:`bits_qconfig` calls (e.g. ``signed_activations=False``).
    Returns a :class:`QConfigMapping` for :func:`qtk.quantize_qat` or :func:`qtk.prepare_ptq`."""
    calls = [node.target for node in capture(model).graph.nodes if node.op == "call_module"]
    layers = [t for t in calls if isinstance(model.get_submodule(t), (nn.Conv2d, nn.Linear))]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no Conv2d or Linear layer to keep at "
                         f"{edge_bits} bits")
    edges = {layers[0], layers[-1]} | {t for t in calls
                                       if isinstance(model.get_submodule(t), QuantStub)}
    edge = bits_qconfig(edge_bits, edge_bits, base, **bits_kwargs)
    return QConfigMapping(bits_qconfig(weight_bits, activation_bits, base, **bits_kwargs),
                          by_name=dict.fromkeys(sorted(edges), edge))

# Named presets: int8 QAT and PTQ, and the usual low-bit QAT mixes.
PRESETS = {
    "int8_qat": default_qat_qconfig,
    "int8_ptq": default_ptq_qconfig,
    "w4a8_qat": bits_qconfig(4, 8),
    "w4a4_qat": bits_qconfig(4, 4),
    "w2a2_qat": bits_qconfig(2, 2),
    "w1a1_qat": bits_qconfig(1, 1),
    "w1a2_qat": bits_qconfig(1, 2, signed_activations=False),
}
