"""Fake quantizers whose range is learned by gradient descent during QAT.

- LSQ (Esser et al., "Learned Step Size Quantization", 2020): the scale is a parameter, its
  gradient scaled by 1 / sqrt(numel * qmax).
- PACT (Choi et al., 2018): the activation's upper clipping level alpha is a parameter.
- TQT (Jain et al., "Trained Quantization Thresholds", 2020): log2 of a symmetric threshold is a
  parameter and the scale is a power of two, so it deploys as a pure shift (M = 2^30).

Each starts from its observer's range on the first batch, then learns. The quantized value uses
torch's rounding with a straight-through estimator; ``calculate_qparams`` gives what convert
deploys, so the Quantized model and the runtime stay byte-identical whatever was learned.
"""
import math

import torch
from torch import nn

from ..arithmetic import MIN_SCALE
from .fake_quantize import FakeQuantize


def _round_ste(x):
    return (torch.round(x) - x).detach() + x


def _scale_gradient(x, factor):
    return (x - x * factor).detach() + x * factor


def _channel_view(t, x, ch_axis):
    if ch_axis is None:
        return t.reshape(())
    shape = [1] * x.dim()
    shape[ch_axis] = -1
    return t.reshape(shape)


class _LearnedFakeQuantize(FakeQuantize):
    """Observer-initialized, then learned; subclasses define the scale and the forward."""

    def __init__(self, observer, fake_quant_enabled=True):
        super().__init__(observer, fake_quant_enabled)
        self.register_buffer("zero_point", torch.zeros(0, dtype=torch.int64))
        self.register_buffer("initialized", torch.tensor(False))

    def _initialize(self, x):
        """Start from the observed range of ``x``; while every value seen is 0 there is no range
        to start from (the tensor fake-quantizes to itself at any scale), so wait for one. The
        observer's range is the global batch's under DDP, so every rank decides alike."""
        with torch.no_grad():
            self.observer.reset_statistics()
            self.observer(x)
            observed = torch.cat([self.observer.min_val.reshape(-1),
                                  self.observer.max_val.reshape(-1)])
            if not bool(observed.any()):
                return
            scale, zero_point = self.observer.calculate_qparams()
            self.zero_point.resize_(zero_point.shape).copy_(zero_point)
            self._init_parameters(scale.reshape(-1), x)
            self.initialized.fill_(True)

    def forward(self, x):
        if not bool(self.initialized):
            self._initialize(x)
        if not (self.fake_quant_enabled and bool(self.initialized)):
            return x
        return self._learned_forward(x)

    def _fake_quantize(self, x, scale):
        zero_point = _channel_view(self.zero_point, x, self.ch_axis).to(x.dtype)
        scale = _channel_view(scale.clamp(min=MIN_SCALE), x, self.ch_axis)  # as deployed
        # spec 1's rounding, nearbyint(x * f32(1 / s)), as the deployed quantizer rounds
        q = torch.clamp(_round_ste(x * (1.0 / scale)) + zero_point, self.qmin, self.qmax)
        return (q - zero_point) * scale

    def calculate_qparams(self):
        if not bool(self.initialized):
            return super().calculate_qparams()
        scale = self._scale().detach().to(torch.float32).clamp(min=MIN_SCALE)
        return scale.reshape(self.zero_point.shape), self.zero_point.clone()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in self._learned_names:
            if prefix + name in state_dict:
                getattr(self, name).data = torch.empty_like(state_dict[prefix + name])
        if prefix + "zero_point" in state_dict:
            self.zero_point.resize_(state_dict[prefix + "zero_point"].shape)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class LSQFakeQuantize(_LearnedFakeQuantize):
    """Learned step size: the scale is trained with LSQ's gradient scaling."""
    _learned_names = ("scale",)

    def __init__(self, observer, fake_quant_enabled=True):
        super().__init__(observer, fake_quant_enabled)
        self.scale = nn.Parameter(torch.ones(0))

    def _init_parameters(self, scale, x):
        self.scale.data = scale.clone()

    def _scale(self):
        return self.scale.abs().clamp(min=MIN_SCALE)

    def _learned_forward(self, x):
        per_scale = x.numel() / self.scale.numel()
        factor = 1.0 / math.sqrt(per_scale * max(self.qmax, 1))
        return self._fake_quantize(x, _scale_gradient(self._scale(), factor))


class PACTFakeQuantize(_LearnedFakeQuantize):
    """PACT: clip at a learned level alpha (the lower end stays at the observed minimum, which
    is 0 after a ReLU), then quantize [min, alpha] onto the integer range. Per tensor."""
    _learned_names = ("alpha",)

    def __init__(self, observer, fake_quant_enabled=True):
        super().__init__(observer, fake_quant_enabled)
        self.alpha = nn.Parameter(torch.ones(()))
        self.register_buffer("low", torch.zeros(()))

    def _init_parameters(self, scale, x):
        self.low.fill_(min(float(self.observer.min_val), 0.0))
        self.alpha.data.fill_(max(float(self.observer.max_val), float(scale) * 1.0))

    def _scale(self):
        alpha = torch.maximum(self.alpha, self.low + MIN_SCALE)
        return ((alpha - self.low) / (self.qmax - self.qmin)).reshape(1)

    def _initialize(self, x):
        super()._initialize(x)
        if bool(self.initialized):  # zero maps exactly onto an integer: z = qmin - low / scale
            scale = float(self.calculate_qparams()[0])
            self.zero_point.fill_(int(round(self.qmin - float(self.low) / scale)))

    def _learned_forward(self, x):
        clipped = torch.minimum(torch.maximum(x, self.low), self.alpha)
        return self._fake_quantize(clipped, self._scale().detach())


class TQTFakeQuantize(_LearnedFakeQuantize):
    """Trained power-of-two thresholds: symmetric, scale = 2^ceil(log2 t) / 2^(bits - 1)."""
    _learned_names = ("log2_threshold",)

    def __init__(self, observer, fake_quant_enabled=True):
        super().__init__(observer, fake_quant_enabled)
        if not self.observer.symmetric:
            raise ValueError("TQT thresholds are symmetric: give it a symmetric observer")
        self.log2_threshold = nn.Parameter(torch.zeros(0))

    def _init_parameters(self, scale, x):
        self.log2_threshold.data = torch.log2(scale * (self.qmax + 1))

    def _scale(self):
        exponent = self.log2_threshold + (torch.ceil(self.log2_threshold)
                                          - self.log2_threshold).detach()
        return torch.pow(2.0, exponent) / (self.qmax + 1)

    def _learned_forward(self, x):
        return self._fake_quantize(x, self._scale())
