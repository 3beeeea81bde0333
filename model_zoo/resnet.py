"""ResNet (He et al., 2015), QAT-ready: ``resnet(18 | 34 | 50 | 101 | 152, ...)``.

The layout and parameter names are torchvision's (a torchvision ResNet state_dict loads into
``resnet(depth)`` at ``width_mult=1``). Two differences make it QAT-ready: every ReLU is its own
module, so the one after ``bn1`` fuses into its convolution and the one after the residual add
fuses into the add; and the residual add is written ``out + identity`` (torchvision's in-place
``out += identity`` traces to the same add).
"""
import torch
from torch import nn

from .layers import init_weights, make_divisible


def _shortcut(in_channels, out_channels, stride):
    """torchvision's ``downsample``: a strided 1x1 conv + BN where the shape changes, else None."""
    if stride == 1 and in_channels == out_channels:
        return None
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                         nn.BatchNorm2d(out_channels))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and a residual add (ResNet-18/34).

    Args:
        in_channels: input channels.
        channels: channels of both convolutions (the block's output).
        stride: stride of the first convolution and of the shortcut.
    """
    expansion = 1

    def __init__(self, in_channels, channels, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = _shortcut(in_channels, channels, stride)
        self.relu = nn.ReLU()

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided, as in torchvision's "ResNet v1.5"), 1x1 expand by 4, residual add
    (ResNet-50/101/152).

    Args:
        in_channels: input channels.
        channels: bottleneck width; the block outputs ``4 * channels``.
        stride: stride of the 3x3 convolution and of the shortcut.
    """
    expansion = 4

    def __init__(self, in_channels, channels, stride=1):
        super().__init__()
        out_channels = channels * self.expansion
        self.conv1 = nn.Conv2d(in_channels, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(channels, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = _shortcut(in_channels, out_channels, stride)
        self.relu = nn.ReLU()

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


# depth -> (block, blocks per stage)
CONFIGS = {
    18: (BasicBlock, (2, 2, 2, 2)),
    34: (BasicBlock, (3, 4, 6, 3)),
    50: (Bottleneck, (3, 4, 6, 3)),
    101: (Bottleneck, (3, 4, 23, 3)),
    152: (Bottleneck, (3, 8, 36, 3)),
}


class ResNet(nn.Module):
    """A ResNet; build one with :func:`resnet`."""

    def __init__(self, block, blocks_per_stage, num_classes, in_channels, width_mult, small_input):
        super().__init__()
        widths = [make_divisible(64 * width_mult, 8) * 2 ** i for i in range(4)]
        if small_input:  # CIFAR-style stem: full resolution into layer1
            self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(in_channels, widths[0], 7, 2, 3, bias=False)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU()
        channels = widths[0]
        for index, (width, blocks) in enumerate(zip(widths, blocks_per_stage)):
            stride = 1 if index == 0 else 2
            stage = []
            for i in range(blocks):
                stage.append(block(channels, width, stride if i == 0 else 1))
                channels = width * block.expansion
            self.add_module(f"layer{index + 1}", nn.Sequential(*stage))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)
        init_weights(self)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet(depth=18, *, num_classes=1000, in_channels=3, width_mult=1.0, small_input=False):
    """Build a ResNet.

    Args:
        depth: 18, 34 (basic blocks), 50, 101 or 152 (bottlenecks).
        num_classes: outputs of the final linear layer.
        in_channels: input image channels (3 for RGB, 1 for MNIST).
        width_mult: scales every stage's width (64, 128, 256, 512 at 1.0), rounded to a multiple
            of 8.
        small_input: for 28x28 / 32x32 images: a 3x3 stride-1 stem and no max pool, so the four
            stages run at 1, 1/2, 1/4 and 1/8 of the input size (28 -> 28, 14, 7, 4). Otherwise
            the ImageNet stem (7x7 stride-2 conv, 3x3 stride-2 max pool) for 224x224 input.
    """
    if depth not in CONFIGS:
        raise ValueError(f"resnet depth must be one of {sorted(CONFIGS)}, got {depth}")
    block, blocks_per_stage = CONFIGS[depth]
    return ResNet(block, blocks_per_stage, num_classes, in_channels, width_mult, small_input)
