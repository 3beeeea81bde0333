"""Building blocks shared by the zoo's model families.

Everything here is plain ``torch.nn``; the zoo's models write residual adds, concatenation and
channel shuffle functionally (``a + b``, ``torch.cat``, ``view``/``transpose``), as torchvision
does, and leave it to qtk's graph capture to quantize them.
"""
import torch
from torch import nn


def make_divisible(value, divisor, min_value=None):
    """Round a scaled channel count to a multiple of ``divisor``, never more than 10 % below it
    (the rule of torchvision's MobileNet and of the TF reference implementations)."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_bn(in_channels, out_channels, kernel_size=1, stride=1, groups=1, activation=None):
    """``[Conv2d (no bias), BatchNorm2d, activation]`` as a list, "same" padding for odd kernels.

    A list, not a Sequential, so that a model can lay several out flat in one ``nn.Sequential``
    (ShuffleNet's branches) or wrap each in its own (MobileNetV2's ``Conv2dNormActivation``);
    either way the parameter names match torchvision's. ``activation`` is a module class
    (``nn.ReLU``, ``nn.ReLU6``) or None; every call gets its own instance, so each activation can
    fuse with the convolution before it.
    """
    layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, (kernel_size - 1) // 2,
                        groups=groups, bias=False),
              nn.BatchNorm2d(out_channels)]
    if activation is not None:
        layers.append(activation())
    return layers


def channel_shuffle(x, groups):
    """ShuffleNet's channel shuffle, written as torchvision writes it: [N, g*c, H, W] ->
    view [N, g, c, H, W] -> transpose(1, 2) -> [N, c*g, H, W]."""
    batch, channels, height, width = x.size()
    x = x.view(batch, groups, channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batch, -1, height, width)


def init_weights(model):
    """torchvision's initialization of ResNet and MobileNetV2: Kaiming-normal (fan-out)
    convolutions, BatchNorm at identity. Linear layers keep their own initialization."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    return model
