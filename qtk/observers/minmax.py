"""Range observers: running min/max, its moving average, and the per-channel form."""
import torch
import torch.distributed as dist
from torch import nn

from .. import arithmetic
from ..arithmetic import qparams_from_range


def _distributed():
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class Observer(nn.Module):
    """Base observer: the target integer range and how statistics become qparams.

    Args:
        qmin, qmax: the integer range (default int8 activations, [-128, 127]).
        symmetric: zero point fixed at 0 (weights) instead of fitted (activations).
        ch_axis: ``None`` for per-tensor statistics, else the channel axis of per-channel ones.
        averaging_constant: ``None`` keeps the running min/max over everything observed; a value
            in (0, 1] keeps an exponential moving average instead (1.0 = the latest tensor only).
        shared_zero_point: with ``ch_axis``, a scale per channel and one zero point for all
            (an activation quantized per channel, spec 1) instead of a zero point per channel.

    Attributes:
        floor, ceiling: the points past which every reader of the tensor gives one output
            (``None``: no such point). A HardSwish reads every value below -3 as -3, a
            HardSigmoid also every value above 3 as 3, a ReLU6 below 0 and above 6 alike. The
            observer sees the tensor clamped to [floor, ceiling], so no integer levels go to
            values the readers cannot tell apart, and their outputs stay the same.
            :func:`qtk.prepare_ptq` and :func:`qtk.quantize_qat` set them from the graph
            (``docs/quantizers.md``, "Ranges that stop where the readers saturate").
    """
    _version = 1

    def __init__(self, qmin=arithmetic.INT8_MIN, qmax=arithmetic.INT8_MAX, symmetric=False,
                 ch_axis=None, averaging_constant=None, shared_zero_point=False):
        super().__init__()
        if qmin >= qmax:
            raise ValueError(f"observer range must have qmin < qmax, got [{qmin}, {qmax}]")
        if averaging_constant is not None and not 0.0 < averaging_constant <= 1.0:
            raise ValueError(f"averaging_constant must be in (0, 1], got {averaging_constant}")
        if shared_zero_point and (ch_axis is None or symmetric):
            raise ValueError("shared_zero_point is for asymmetric per-channel ranges: give a "
                             "ch_axis and symmetric=False")
        self.qmin, self.qmax = qmin, qmax
        self.symmetric = symmetric
        self.ch_axis = ch_axis
        self.averaging_constant = averaging_constant
        self.shared_zero_point = shared_zero_point
        self.floor = self.ceiling = None
        self.register_buffer("min_val", torch.tensor([]))
        self.register_buffer("max_val", torch.tensor([]))

    @property
    def has_statistics(self):
        return self.min_val.numel() > 0

    def _batch_range(self, x):
        if self.ch_axis is None:
            x_min, x_max = torch.aminmax(x)
        else:
            flat = x.transpose(0, self.ch_axis).reshape(x.shape[self.ch_axis], -1)
            x_min, x_max = torch.aminmax(flat, dim=1)
        if self.training and _distributed():
            # DDP: every rank sees the global batch's range, so statistics stay identical
            dist.all_reduce(x_min, op=dist.ReduceOp.MIN)
            dist.all_reduce(x_max, op=dist.ReduceOp.MAX)
        return x_min, x_max

    def _readable(self, x):
        """``x`` as the observer sees it: float32, clamped to [floor, ceiling]."""
        x = x.detach().to(torch.float32)
        if self.floor is None and self.ceiling is None:
            return x
        return torch.clamp(x, self.floor, self.ceiling)

    @torch.no_grad()
    def forward(self, x):
        self._update_range(self._readable(x))
        return x

    def _update_range(self, x):
        """Fold the range of ``x`` (already as the observer reads it) into the running range."""
        x_min, x_max = self._batch_range(x)
        if not self.has_statistics:
            new_min, new_max = x_min, x_max
        elif self.averaging_constant is None:
            new_min, new_max = torch.minimum(self.min_val, x_min), torch.maximum(self.max_val, x_max)
        else:
            c = self.averaging_constant
            new_min = self.min_val + c * (x_min - self.min_val)
            new_max = self.max_val + c * (x_max - self.max_val)
        # resize_ keeps the buffers registered while their shape settles on the first batch
        self.min_val.resize_(new_min.shape).copy_(new_min)
        self.max_val.resize_(new_max.shape).copy_(new_max)

    def reset_statistics(self):
        """Forget every observed range (a learned quantizer initializes from one batch)."""
        self.min_val.resize_(0)
        self.max_val.resize_(0)

    def calculate_qparams(self):
        if not self.has_statistics:
            raise RuntimeError(f"{type(self).__name__} has observed nothing yet: run calibration "
                               f"or training batches through the model before convert()")
        return self.qparams_from_range(self.min_val, self.max_val)

    def qparams_from_range(self, lo, hi):
        """(scale, zero point) of ranges ``[lo, hi]`` by this observer's integer range and rule."""
        if self.shared_zero_point:
            return arithmetic.shared_zero_point_qparams(lo, hi, self.qmin, self.qmax)
        return qparams_from_range(lo, hi, self.qmin, self.qmax, self.symmetric)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("min_val", "max_val"):
            if prefix + name in state_dict:
                getattr(self, name).resize_(state_dict[prefix + name].shape)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self):
        bounds = "" if self.floor is None and self.ceiling is None else (
            f", values read in [{self.floor}, {self.ceiling}]")
        return (f"range=[{self.qmin}, {self.qmax}], symmetric={self.symmetric}, "
                f"ch_axis={self.ch_axis}, averaging_constant={self.averaging_constant}"
                + (", shared_zero_point=True" if self.shared_zero_point else "") + bounds)


class MinMaxObserver(Observer):
    """Running min/max over every observed tensor (PTQ calibration)."""


class MovingAverageMinMaxObserver(Observer):
    """Exponential moving average of each batch's min/max (QAT activations)."""

    def __init__(self, averaging_constant=0.01, **kwargs):
        super().__init__(averaging_constant=averaging_constant, **kwargs)


class PerChannelMinMaxObserver(Observer):
    """Min/max per channel along ``ch_axis`` (weights: output channels, axis 0)."""

    def __init__(self, ch_axis=0, **kwargs):
        super().__init__(ch_axis=ch_axis, **kwargs)
