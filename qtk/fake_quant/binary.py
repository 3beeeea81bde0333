"""Binary (1-bit) fake quantization: sign in the forward pass (docs/quantization_spec.md section
24), a straight-through gradient estimate backward."""
import torch
from torch import nn

GRADIENTS = ("ste", "approx_sign")


class _Sign(torch.autograd.Function):
    """sign(x) with sign(0) = +1; backward passes the gradient where |x| <= 1 ("ste", Courbariaux
    et al. 2016) or scaled by ApproxSign's 2 - 2|x| there ("approx_sign", Bi-Real Net)."""

    @staticmethod
    def forward(ctx, x, gradient):
        ctx.save_for_backward(x)
        ctx.gradient = gradient
        return torch.where(x >= 0, 1.0, -1.0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        inside = x.abs() <= 1
        if ctx.gradient == "ste":
            return grad * inside, None
        return grad * torch.where(inside, 2 - 2 * x.abs(), 0), None


class BinaryFakeQuantize(nn.Module):
    """sign(x) in {-1, +1} for a binary layer's weight or input (spec 24).

    As a weight quantizer (``QConfig.weight``) it keeps one scale per output channel, the mean
    ``|w|`` (XNOR-Net), so the sign layer keeps the float layer's magnitude; a BatchNorm that
    follows absorbs it either way. As a layer's input quantizer (``QConfig.input``) it gives
    ``+1`` or ``-1`` at scale 1 and says how the layer pads: ``pad_value`` 0 (padded positions add
    nothing, as torch's zero padding) or 1 (they read ``+1``); with ``learn_threshold`` it is
    ReActNet's RSign, ``sign(x - threshold[c])`` with a learned threshold per input channel
    (zero at first), deployed as an integer threshold per channel (spec 24).

    Args:
        gradient: ``"ste"`` (straight through where ``|x| <= 1``) or ``"approx_sign"``.
        per_channel: a scale per output channel (dim 0): the weight form.
        pad_value: 0 or 1, for the input form.
        learn_threshold: RSign's threshold per input channel, for the input form; its layer
            gives the channel count (:meth:`input_channels`).
    """
    qmin, qmax, ch_axis = -1, 1, 0
    observer_enabled = False  # nothing to observe: the scale is the weight's own mean |w|

    def __init__(self, gradient="ste", per_channel=False, pad_value=0, learn_threshold=False):
        super().__init__()
        if gradient not in GRADIENTS:
            raise ValueError(f"gradient must be one of {GRADIENTS}, got {gradient!r}")
        if pad_value not in (0, 1):
            raise ValueError(f"pad_value must be 0 or 1, got {pad_value!r}")
        if learn_threshold and per_channel:
            raise ValueError("learn_threshold is for a layer's input (RSign), not its weight")
        self.gradient, self.per_channel, self.pad_value = gradient, per_channel, pad_value
        self.learn_threshold = learn_threshold
        self.threshold = None  # RSign's, once input_channels() gives its size

    def input_channels(self, channels):
        """Called by the layer that reads this quantizer's signs: RSign's thresholds, one per
        input channel (dim 1), start at zero, plain sign()."""
        if self.learn_threshold and self.threshold is None:
            self.threshold = nn.Parameter(torch.zeros(channels))

    def channel_scale(self, weight):
        """The mean |w| of each output channel (dim 0), floored so an all-zero channel keeps a
        finite multiplier."""
        mean = weight.detach().abs().reshape(weight.shape[0], -1).mean(1)
        return mean.clamp_min(torch.finfo(torch.float32).tiny)

    def calculate_qparams(self):
        raise TypeError("BinaryFakeQuantize has no affine qparams: a binary weight's scale is "
                        "channel_scale(weight)")

    def forward(self, x):
        if self.threshold is not None:
            x = x - self.threshold.reshape(1, -1, *[1] * (x.dim() - 2))
        signs = _Sign.apply(x, self.gradient)
        if not self.per_channel:
            return signs
        mean = x.abs().reshape(x.shape[0], -1).mean(1)
        return signs * mean.reshape(-1, *[1] * (x.dim() - 1))

    def extra_repr(self):
        return (f"gradient={self.gradient!r}, per_channel={self.per_channel}, "
                f"pad_value={self.pad_value}, learn_threshold={self.learn_threshold}")


def clip_latent_weights(model, bound=1.0):
    """Clamps the latent float weights of every binary-weight layer to [-bound, bound], the usual
    step after each optimizer step (BinaryConnect): a weight far outside the range the
    straight-through gradient passes would never change sign again."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(getattr(module, "weight_fake_quant", None), BinaryFakeQuantize):
                module.weight.clamp_(-bound, bound)
