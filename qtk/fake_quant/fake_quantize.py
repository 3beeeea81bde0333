"""Observer-driven fake quantization with the straight-through estimator."""
import torch
from torch import nn


class FakeQuantize(nn.Module):
    """Watches a tensor with an observer and fake-quantizes it with the observer's qparams.

    The rounding is torch's ``fake_quantize_per_{tensor,channel}_affine``, which is the quantize
    rule of docs/quantization_spec.md, so training sees exactly the deployed rounding. Gradients
    pass straight through inside the range and are zero outside it.

    Args:
        observer: an observer *class or factory* (see :mod:`qtk.observers`), called with no args.
        fake_quant_enabled: quantize in forward (QAT) or only observe (PTQ calibration).
    """

    def __init__(self, observer, fake_quant_enabled=True):
        super().__init__()
        self.observer = observer()
        self.observer_enabled = True
        self.fake_quant_enabled = fake_quant_enabled

    @property
    def qmin(self):
        return self.observer.qmin

    @property
    def qmax(self):
        return self.observer.qmax

    @property
    def ch_axis(self):
        return self.observer.ch_axis

    def calculate_qparams(self):
        return self.observer.calculate_qparams()

    def forward(self, x):
        if self.observer_enabled:
            self.observer(x)
        if not self.fake_quant_enabled:
            return x
        scale, zero_point = self.calculate_qparams()
        zero_point = zero_point.to(torch.int32)
        if self.ch_axis is None:
            return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, self.qmin, self.qmax)
        return torch.fake_quantize_per_channel_affine(x, scale, zero_point, self.ch_axis,
                                                      self.qmin, self.qmax)

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, "
                f"observer_enabled={self.observer_enabled}")
