"""Convolution trio: float fused containers, QAT (with BatchNorm folding), Quantized; and
transposed convolution's."""
import torch
import torch.nn.functional as F
from torch import nn

from .. import arithmetic
from ..errors import UnsupportedOpError
from ..fake_quant import BinaryFakeQuantize
from .activation import float_prelu
from .base import (QATModule, QModelOp, QuantizedWeightLayer, activation_kind, apply_activation,
                   deployed_qparams, float_activation_attrs, float_export,
                   refuse_own_input_quantizer, to_int8)


# ---- float: fused containers that quantize as one layer ----------------------------------------

class ConvReLU2d(nn.Sequential):
    """Conv2d followed by ReLU, ReLU6 or PReLU, quantized as one layer."""

    def __init__(self, conv, relu):
        super().__init__(conv, relu)


class ConvBn2d(nn.Sequential):
    """Conv2d followed by BatchNorm2d; QAT folds the BatchNorm into the weights."""

    def __init__(self, conv, bn):
        super().__init__(conv, bn)


class ConvBnReLU2d(nn.Sequential):
    """Conv2d, BatchNorm2d, then ReLU, ReLU6 or PReLU."""

    def __init__(self, conv, bn, relu):
        super().__init__(conv, bn, relu)


class Conv1dAs2d(nn.Module):
    """Conv1d on [N, C, L] as a Conv2d of kernel (1, k) on [N, C, 1, L]: the same sums, so it
    quantizes and deploys as any conv (the reshapes only move bytes)."""

    def __init__(self, conv1d):
        super().__init__()
        padding = conv1d.padding if isinstance(conv1d.padding, str) else (0, conv1d.padding[0])
        self.conv = nn.Conv2d(conv1d.in_channels, conv1d.out_channels, (1, conv1d.kernel_size[0]),
                              (1, conv1d.stride[0]), padding, (1, conv1d.dilation[0]),
                              conv1d.groups, conv1d.bias is not None)
        with torch.no_grad():
            self.conv.weight.copy_(conv1d.weight.unsqueeze(2))
            if conv1d.bias is not None:
                self.conv.bias.copy_(conv1d.bias)
        self.conv.to(device=conv1d.weight.device, dtype=conv1d.weight.dtype)

    def forward(self, x):
        y = self.conv(x.reshape(x.shape[0], x.shape[1], 1, x.shape[2]))
        return y.reshape(y.shape[0], y.shape[1], y.shape[3])


def batchnorm_scale(bn):
    """gamma / sqrt(running_var + eps): what an inference-mode BatchNorm multiplies by."""
    gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_var)
    return gamma / torch.sqrt(bn.running_var + bn.eps)


def fold_batchnorm(weight, bias, bn):
    """Conv weight and bias with an inference-mode BatchNorm folded in (its running statistics)."""
    scale = batchnorm_scale(bn)
    beta = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
    return weight * scale.reshape(-1, 1, 1, 1), (bias - bn.running_mean) * scale + beta


def check_conv_supported(conv):
    if conv.padding_mode != "zeros":
        raise ValueError(f"Conv2d padding_mode={conv.padding_mode!r} is not supported; use 'zeros'")
    if isinstance(conv.padding, str):
        if conv.padding != "valid":
            raise ValueError(f"Conv2d padding={conv.padding!r} is not supported; give explicit "
                             f"integer padding")
        conv.padding = (0, 0)


# ---- QAT ----------------------------------------------------------------------------------------

class QATConv2d(nn.Conv2d, QATModule):
    """Conv2d (+ fused ReLU/ReLU6/PReLU) with fake-quantized weight and output.

    Args:
        activation: None, 'relu', 'relu6' or 'prelu' (slopes: the ``prelu`` submodule), applied
            before the output fake quantizer.
        qconfig: the :class:`qtk.QConfig` giving the fake quantizers.
    """
    FLOAT_TYPES = (nn.Conv2d, ConvReLU2d)

    def __init__(self, *args, activation=None, qconfig, **kwargs):
        super().__init__(*args, **kwargs)
        self.activation = activation
        self.prelu = None  # the fused nn.PReLU, its slopes trained with the layer
        self.weight_fake_quant = qconfig.weight()
        self.activation_post_process = qconfig.activation()
        # the layer's own quantizer of its input: signs (spec 24) or fewer bits (spec 16);
        # None: the int8 input as it is
        self.input_fake_quant = qconfig.input() if qconfig.input is not None else None
        if isinstance(self.input_fake_quant, BinaryFakeQuantize):
            self.input_fake_quant.input_channels(self.in_channels)

    @classmethod
    def _new_like(cls, conv, qconfig, act, bias):
        check_conv_supported(conv)
        qat = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                  padding=conv.padding, dilation=conv.dilation, groups=conv.groups, bias=bias,
                  activation=activation_kind(act), qconfig=qconfig)
        qat.weight = conv.weight
        if bias:
            qat.bias = conv.bias
        if qat.activation == "prelu":
            qat.prelu = act
        return qat.to(conv.weight.device)

    @classmethod
    def from_float(cls, module, qconfig):
        conv, act = (module[0], module[1]) if isinstance(module, ConvReLU2d) else (module, None)
        return cls._new_like(conv, qconfig, act, conv.bias is not None)

    def activate(self, y):
        """The fused activation, if any."""
        return apply_activation(y, self.activation, self.prelu)

    def folded_weight_and_bias(self):
        return self.weight, self.bias

    def convolve(self, x, weight, bias):
        """The convolution of x as it is, of x quantized by the layer's own input quantizer, or of
        its signs padded with the binarizer's pad value."""
        if self.input_fake_quant is None:
            return self._conv_forward(x, weight, bias)
        if not isinstance(self.input_fake_quant, BinaryFakeQuantize):
            return self._conv_forward(self.input_fake_quant(x), weight, bias)
        pad_h, pad_w = self.padding
        signs = F.pad(self.input_fake_quant(x), (pad_w, pad_w, pad_h, pad_h),
                      value=float(self.input_fake_quant.pad_value))
        return F.conv2d(signs, weight, bias, self.stride, 0, self.dilation, self.groups)

    def forward(self, x):
        y = self.convolve(x, self.weight_fake_quant(self.weight), self.bias)
        return self.activation_post_process(self.activate(y))


class QATConvBn2d(QATConv2d):
    """Conv2d + BatchNorm2d (+ ReLU/ReLU6) with the BatchNorm folded into the fake-quantized weight.

    Training uses batch statistics (as the float model did) while the weight is quantized with the
    running statistics folded in, the usual scheme (Jacob et al. 2018, sec. 3.2). After
    :func:`qtk.freeze_bn_stats` the running statistics stop updating and are used for the output,
    which is exactly the folded layer that will be deployed.
    """
    FLOAT_TYPES = (ConvBn2d, ConvBnReLU2d)

    @classmethod
    def from_float(cls, module, qconfig):
        conv, bn = module[0], module[1]
        act = module[2] if isinstance(module, ConvBnReLU2d) else None
        qat = cls._new_like(conv, qconfig, act, conv.bias is not None)
        qat.bn = bn
        qat.freeze_bn = False
        return qat

    def freeze_bn_stats(self):
        self.freeze_bn = True
        self.bn.eval()

    def train(self, mode=True):
        super().train(mode)
        self.bn.train(mode and not self.freeze_bn)
        return self

    def folded_weight_and_bias(self):
        bias = self.bias if self.bias is not None else torch.zeros_like(self.bn.running_mean)
        return fold_batchnorm(self.weight, bias, self.bn)

    def forward(self, x):
        scale = batchnorm_scale(self.bn)
        if isinstance(self.weight_fake_quant, BinaryFakeQuantize):
            # sign(w s) mean|w s| = sign(w) mean|w| s: the same weight, with the straight-through
            # window on the latent weight, where clip_latent_weights keeps it
            weight = self.weight_fake_quant(self.weight) * scale.reshape(-1, 1, 1, 1)
        else:
            weight = self.weight_fake_quant(self.weight * scale.reshape(-1, 1, 1, 1))
        # A channel with BatchNorm gamma = 0 (zero_init_residual) folds to zero weights, and
        # dividing its output by its scale would be 0 / 0. BatchNorm's output there is beta
        # whatever it reads, so it reads the unfolded conv: finite, and gamma's gradient, which is
        # that conv's normalized output, stays alive.
        zero = scale == 0  # no `if zero.any()`: that would wait for the GPU at every step
        weight = torch.where(zero.reshape(-1, 1, 1, 1), self.weight, weight)
        scale = torch.where(zero, 1.0, scale)
        y = self.convolve(x, weight, None) / scale.reshape(1, -1, 1, 1)
        if self.bias is not None:
            y = y + self.bias.reshape(1, -1, 1, 1)
        y = self.bn(y)
        return self.activation_post_process(self.activate(y))


# ---- Quantized ----------------------------------------------------------------------------------

class QuantizedConv2d(QuantizedWeightLayer):
    """int8 convolution: exact int32 sums, per-channel requantization, fused clamp (spec 4, 5) or
    PReLU (spec 22);
    reading its input requantized to its own fewer bits (spec 16), or binary, reading its input's
    signs (spec 24). A depthwise one may read an input quantized per channel; any one may write
    its output so (spec 25)."""
    SOURCE_TYPES = (QATConv2d,)
    CHANNEL_SCALES = True

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        weight, bias = module.folded_weight_and_bias()
        own = module.input_fake_quant  # the layer's own input quantizer, if any
        binary = isinstance(own, BinaryFakeQuantize)
        if own is not None and input_qparams[0].per_channel:
            raise UnsupportedOpError(f"{where}: a layer with its own input quantizer cannot read "
                                     f"an input quantized per channel (spec 25)")
        # an affine one requantizes the int8 input to its own (s, z) and range first (spec 3)
        read_qparams = None if own is None or binary else deployed_qparams(own)
        if binary:
            input_scale = 1.0
        elif read_qparams is not None:
            input_scale = read_qparams.scale
        else:
            input_scale = None  # the int8 input's
        layer = cls(weight.detach(), None if bias is None else bias.detach(),
                    module.weight_fake_quant, input_qparams, module.output_qparams(),
                    module.activation, where, input_scale=input_scale,
                    input_bound=1 if binary else 255,
                    slopes=None if module.prelu is None else module.prelu.weight)
        layer.stride, layer.padding = tuple(module.stride), tuple(module.padding)
        layer.dilation, layer.groups = tuple(module.dilation), module.groups
        # reads the signs of its input, padded with this value (spec 24); None: int8 input
        layer.pad_value = own.pad_value if binary else None
        # RSign's thresholds as integers, or None: the zero point
        layer.thresholds = None
        if binary and own.threshold is not None:
            layer.thresholds = arithmetic.binary_thresholds(
                own.threshold.detach(), input_qparams[0].scale, input_qparams[0].zero_point)
        layer.read_qparams = read_qparams
        if read_qparams is not None:
            (layer.read_multiplier,), (layer.read_shift,) = arithmetic.rescale_multipliers(
                [input_qparams[0].scale], read_qparams.scale, shared_shift=False)
        return layer

    def requantize_input(self, x):
        """The int8 input at the layer's own input (s, z) and range (spec 3 with one input)."""
        q = self.read_qparams
        return to_int8(arithmetic.rescaled_sum(
            [(x, self.input_qparams[0].zero_point, self.read_multiplier)], self.read_shift,
            q.zero_point, q.qmin, q.qmax))

    def forward(self, x):
        if self.read_qparams is not None:
            x, zero_point, padding = (self.requantize_input(x), self.read_qparams.zero_point,
                                      self.padding)
        elif self.pad_value is None:
            x, zero_point, padding = x, self.input_qparams[0].zero_point, self.padding
        else:
            pad_h, pad_w = self.padding
            threshold = (self.input_qparams[0].zero_point if self.thresholds is None
                         else self.thresholds.reshape(1, -1, 1, 1))
            x = F.pad(arithmetic.binary_sign(x, threshold), (pad_w, pad_w, pad_h, pad_h),
                      value=self.pad_value)
            zero_point, padding = 0, (0, 0)
        acc = arithmetic.conv2d_accumulate(x, zero_point, self.weight_q,
                                           self.bias_q.to(torch.int64), self.stride, padding,
                                           self.dilation, self.groups)
        return self._requantize(acc, (1, -1, 1, 1))

    def qmodel_op(self, input_shapes):
        attrs = {"stride": list(self.stride), "padding": list(self.padding),
                 "dilation": list(self.dilation), "groups": [self.groups]}
        if self.pad_value is not None:
            attrs["pad_value"] = [self.pad_value]
            if self.thresholds is not None:
                attrs["thresholds"] = self.thresholds.tolist()
            return self._weight_op("conv2d_binary", attrs)
        op = self._weight_op("conv2d", attrs)
        if self.read_qparams is not None:
            op.requantized_input = (self.read_qparams, self.read_multiplier, self.read_shift)
        return op

    def extra_repr(self):
        return (f"{tuple(self.weight_q.shape)}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, groups={self.groups}, clamp=[{self.lo}, {self.hi}], "
                + super().extra_repr())


# ---- float32 runtime op (a part kept in float) ---------------------------------------------------

@float_export(nn.Conv2d, ConvReLU2d, ConvBn2d, ConvBnReLU2d)
def float_conv2d(module, input_shapes, where):
    """BatchNorm folded here exactly as QAT folds it."""
    parts = list(module) if isinstance(module, nn.Sequential) else [module]
    conv, rest = parts[0], parts[1:]
    check_conv_supported(conv)
    weight = conv.weight.detach()
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros(conv.out_channels)
    if rest and isinstance(rest[0], nn.BatchNorm2d):
        weight, bias = fold_batchnorm(weight, bias, rest.pop(0))
        weight, bias = weight.detach(), bias.detach()
    attrs = {"stride": list(conv.stride), "padding": list(conv.padding),
             "dilation": list(conv.dilation), "groups": [conv.groups]}
    act = rest[0] if rest else None
    if isinstance(act, nn.PReLU):  # the conv, then the float prelu op
        return [QModelOp("conv2d", [("weight", weight.float()), ("bias", bias.float())], attrs),
                float_prelu(act, input_shapes, where)]
    return QModelOp("conv2d", [("weight", weight.float()), ("bias", bias.float())],
                    float_activation_attrs(attrs, activation_kind(act)))


# ---- transposed convolution (ConvTranspose2d): QAT, Quantized, float32 op ------------------------
# torch's weight is [C, O/groups, kh, kw]; qtk quantizes it per output channel, so the QAT weight
# fake quantizer, the Quantized module and the file see it regrouped as [O, C/groups, kh, kw]
# (conv2d's layout: output channel first), and only torch's calls see torch's layout.

def transpose_weight_to_output_channels(weight, groups):
    """torch's ConvTranspose2d weight [C, O/g, kh, kw] as [O, C/g, kh, kw]: entry (o, i) is torch's
    (g C/g + i, o - g O/g) of output channel o's group g."""
    c, o_g, kh, kw = weight.shape
    return (weight.reshape(groups, c // groups, o_g, kh, kw).transpose(1, 2)
            .reshape(groups * o_g, c // groups, kh, kw))


def transpose_weight_from_output_channels(weight, groups):
    """The inverse of :func:`transpose_weight_to_output_channels`."""
    o, c_g, kh, kw = weight.shape
    return (weight.reshape(groups, o // groups, c_g, kh, kw).transpose(1, 2)
            .reshape(groups * c_g, o // groups, kh, kw))


def _conv_transpose_attrs(module):
    return {"stride": list(module.stride), "padding": list(module.padding),
            "output_padding": list(module.output_padding), "dilation": list(module.dilation),
            "groups": [module.groups]}


class QATConvTranspose2d(nn.ConvTranspose2d, QATModule):
    """ConvTranspose2d with its weight fake-quantized per output channel and its output
    fake-quantized.

    Args:
        qconfig: the :class:`qtk.QConfig` giving the fake quantizers.
    """
    FLOAT_TYPES = (nn.ConvTranspose2d,)

    def __init__(self, *args, qconfig, **kwargs):
        super().__init__(*args, **kwargs)
        refuse_own_input_quantizer(qconfig, "ConvTranspose2d")
        self.activation = None
        self.weight_fake_quant = qconfig.weight()
        self.activation_post_process = qconfig.activation()

    @classmethod
    def from_float(cls, module, qconfig):
        qat = cls(module.in_channels, module.out_channels, module.kernel_size, module.stride,
                  module.padding, module.output_padding, module.groups, module.bias is not None,
                  module.dilation, qconfig=qconfig)
        qat.weight = module.weight
        if module.bias is not None:
            qat.bias = module.bias
        return qat.to(module.weight.device)

    def output_channel_weight(self):
        return transpose_weight_to_output_channels(self.weight, self.groups)

    def forward(self, x, output_size=None):
        if output_size is not None:
            raise UnsupportedOpError("ConvTranspose2d(x, output_size) has no quantized form; give "
                                     "the module output_padding instead")
        weight = transpose_weight_from_output_channels(
            self.weight_fake_quant(self.output_channel_weight()), self.groups)
        y = F.conv_transpose2d(x, weight, self.bias, self.stride, self.padding,
                               self.output_padding, self.groups, self.dilation)
        return self.activation_post_process(y)


class QuantizedConvTranspose2d(QuantizedWeightLayer):
    """int8 transposed convolution: exact int32 sums, per-channel requantization (spec 20)."""
    SOURCE_TYPES = (QATConvTranspose2d,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        layer = cls(module.output_channel_weight().detach(),
                    None if module.bias is None else module.bias.detach(),
                    module.weight_fake_quant, input_qparams, module.output_qparams(), None, where)
        layer.stride, layer.padding = tuple(module.stride), tuple(module.padding)
        layer.output_padding, layer.dilation = tuple(module.output_padding), tuple(module.dilation)
        layer.groups = module.groups
        return layer

    def forward(self, x):
        acc = arithmetic.conv_transpose2d_accumulate(
            x, self.input_qparams[0].zero_point,
            transpose_weight_from_output_channels(self.weight_q, self.groups),
            self.bias_q.to(torch.int64), self.stride, self.padding, self.output_padding,
            self.dilation, self.groups)
        return self._requantize(acc, (1, -1, 1, 1))

    def qmodel_op(self, input_shapes):
        return self._weight_op("conv_transpose2d", _conv_transpose_attrs(self))

    def extra_repr(self):
        return (f"{tuple(self.weight_q.shape)}, stride={self.stride}, padding={self.padding}, "
                f"output_padding={self.output_padding}, dilation={self.dilation}, "
                f"groups={self.groups}, " + super().extra_repr())


@float_export(nn.ConvTranspose2d)
def float_conv_transpose2d(module, input_shapes, where):
    weight = transpose_weight_to_output_channels(module.weight.detach(), module.groups)
    bias = (module.bias.detach() if module.bias is not None
            else torch.zeros(module.out_channels))
    return QModelOp("conv_transpose2d", [("weight", weight.float()), ("bias", bias.float())],
                    _conv_transpose_attrs(module))
