"""MobileNetV2 (Sandler et al., 2018), QAT-ready: ``mobilenet_v2(...)``.

Layout and parameter names are torchvision's (a torchvision MobileNetV2 state_dict loads into
``mobilenet_v2()`` at ``width_mult=1``): inverted residual blocks of 1x1 expand (ReLU6), 3x3
depthwise (ReLU6), 1x1 linear projection, with the residual add written ``x + self.conv(x)``.
"""
import torch
from torch import nn

from .layers import conv_bn, init_weights, make_divisible

# expansion t, output channels c, repeats n, stride s of the first block (the paper's Table 2)
SETTINGS = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


class InvertedResidual(nn.Module):
    """Expand (1x1, ReLU6) -> depthwise 3x3 (ReLU6) -> project (1x1, linear), plus the input when
    the shape is unchanged.

    Args:
        in_channels: input channels.
        out_channels: output channels.
        stride: stride of the depthwise convolution.
        expand_ratio: hidden channels = ``in_channels * expand_ratio``.
    """

    def __init__(self, in_channels, out_channels, stride, expand_ratio):
        super().__init__()
        hidden = round(in_channels * expand_ratio)
        self.use_res_connect = stride == 1 and in_channels == out_channels
        layers = []
        if expand_ratio != 1:
            layers.append(nn.Sequential(*conv_bn(in_channels, hidden, 1, activation=nn.ReLU6)))
        layers.append(nn.Sequential(*conv_bn(hidden, hidden, 3, stride, groups=hidden,
                                             activation=nn.ReLU6)))
        layers.extend(conv_bn(hidden, out_channels, 1))
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    """A MobileNetV2; build one with :func:`mobilenet_v2`."""

    def __init__(self, num_classes, in_channels, width_mult, small_input, dropout):
        super().__init__()
        channels = make_divisible(32 * width_mult, 8)
        self.last_channel = make_divisible(1280 * max(1.0, width_mult), 8)
        # The small variant keeps full resolution in the stem and the 24-channel stage, so only
        # three stages downsample (28 -> 14 -> 7 -> 4) instead of five (224 -> 7).
        features = [nn.Sequential(*conv_bn(in_channels, channels, 3, 1 if small_input else 2,
                                           activation=nn.ReLU6))]
        for index, (t, c, n, s) in enumerate(SETTINGS):
            out_channels = make_divisible(c * width_mult, 8)
            if small_input and index == 1:
                s = 1
            for i in range(n):
                features.append(InvertedResidual(channels, out_channels, s if i == 0 else 1, t))
                channels = out_channels
        features.append(nn.Sequential(*conv_bn(channels, self.last_channel, 1,
                                               activation=nn.ReLU6)))
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(self.last_channel,
                                                                       num_classes))
        init_weights(self)
        nn.init.normal_(self.classifier[1].weight, 0, 0.01)
        nn.init.zeros_(self.classifier[1].bias)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(*, num_classes=1000, in_channels=3, width_mult=1.0, small_input=False,
                 dropout=0.2):
    """Build a MobileNetV2.

    Args:
        num_classes: outputs of the classifier.
        in_channels: input image channels (3 for RGB, 1 for MNIST).
        width_mult: scales every layer's channels (rounded to a multiple of 8); the last 1x1
            convolution keeps 1280 channels below 1.0, as in the paper.
        small_input: for 28x28 / 32x32 images: stride-1 stem and stride-1 24-channel stage
            (three downsamplings); otherwise the ImageNet layout for 224x224 (five).
        dropout: dropout probability before the classifier.
    """
    return MobileNetV2(num_classes, in_channels, width_mult, small_input, dropout)
