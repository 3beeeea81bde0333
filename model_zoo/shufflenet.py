"""ShuffleNet v1 (Zhang et al., 2017) and v2 (Ma et al., 2018), QAT-ready:
``shufflenet_v1(groups=3, ...)`` and ``shufflenet_v2(...)``.

Both share one network skeleton (stem conv, max pool, three stages whose first unit halves the
resolution, global average pool, linear) and one channel shuffle; they differ in the unit:

- v1: grouped 1x1 conv (ReLU) -> channel shuffle -> depthwise 3x3 -> grouped 1x1 conv; the input
  is added (stride 1) or its 3x3 stride-2 average pool is concatenated (stride 2), then ReLU.
- v2: the input is split in two channel halves (stride 1) or used whole by two branches
  (stride 2); the branches are concatenated and shuffled with 2 groups. Layout and parameter
  names are torchvision's (its state_dicts load into ``shufflenet_v2(width_mult=0.5 | 1.0 | 1.5 |
  2.0)``); v2 ends with a 1x1 conv and ``x.mean([2, 3])`` as torchvision does.
"""
import torch
from torch import nn

from .layers import channel_shuffle, conv_bn, make_divisible

STEM_CHANNELS = 24
STAGE_REPEATS = (4, 8, 4)

# v1: groups -> stage output channels at width 1 (the paper's Table 1)
V1_CHANNELS = {1: (144, 288, 576), 2: (200, 400, 800), 3: (240, 480, 960), 4: (272, 544, 1088),
               8: (384, 768, 1536)}
# v2: width -> (stage output channels, conv5 channels), torchvision's published configurations
V2_CHANNELS = {0.5: ((48, 96, 192), 1024), 1.0: ((116, 232, 464), 1024),
               1.5: ((176, 352, 704), 1024), 2.0: ((244, 488, 976), 2048)}


class ShuffleUnitV1(nn.Module):
    """A ShuffleNet v1 unit.

    Args:
        in_channels: input channels.
        out_channels: output channels (for stride 2 including the ``in_channels`` of the pooled
            shortcut).
        stride: 1 (residual add) or 2 (concatenated average-pooled shortcut).
        groups: groups of the two 1x1 convolutions.
        first_groups: groups of the first 1x1 convolution (1 for the network's first unit, whose
            input is too narrow to split, as in the paper).
    """

    def __init__(self, in_channels, out_channels, stride, groups, first_groups):
        super().__init__()
        self.stride = stride
        self.first_groups = first_groups
        branch_channels = out_channels - in_channels if stride == 2 else out_channels
        mid = out_channels // 4
        if out_channels % 4 or mid % groups or branch_channels % groups:
            raise ValueError(f"ShuffleNet v1 unit {in_channels} -> {out_channels} channels cannot "
                             f"be split into {groups} groups")
        self.compress = nn.Sequential(*conv_bn(in_channels, mid, 1, groups=first_groups,
                                               activation=nn.ReLU))
        self.depthwise = nn.Sequential(*conv_bn(mid, mid, 3, stride, groups=mid))
        self.expand = nn.Sequential(*conv_bn(mid, branch_channels, 1, groups=groups))
        self.shortcut = nn.AvgPool2d(3, 2, 1) if stride == 2 else None
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.compress(x)
        if self.first_groups > 1:
            out = channel_shuffle(out, self.first_groups)
        out = self.expand(self.depthwise(out))
        if self.stride == 1:
            return self.relu(x + out)
        return self.relu(torch.cat((self.shortcut(x), out), dim=1))


class ShuffleUnitV2(nn.Module):
    """A ShuffleNet v2 unit (torchvision's ``InvertedResidual``).

    Args:
        in_channels: input channels.
        out_channels: output channels (even).
        stride: 1 (split, one branch, concat) or 2 (two branches on the whole input, concat).
    """

    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.stride = stride
        branch_channels = out_channels // 2
        if stride == 1 and in_channels != out_channels:
            raise ValueError(f"a stride-1 unit keeps its width: {in_channels} -> {out_channels}")
        if stride > 1:
            self.branch1 = nn.Sequential(
                *conv_bn(in_channels, in_channels, 3, stride, groups=in_channels),
                *conv_bn(in_channels, branch_channels, 1, activation=nn.ReLU))
        self.branch2 = nn.Sequential(
            *conv_bn(in_channels if stride > 1 else branch_channels, branch_channels, 1,
                     activation=nn.ReLU),
            *conv_bn(branch_channels, branch_channels, 3, stride, groups=branch_channels),
            *conv_bn(branch_channels, branch_channels, 1, activation=nn.ReLU))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNet(nn.Module):
    """The skeleton both versions share; build one with :func:`shufflenet_v1` or
    :func:`shufflenet_v2`.

    Args:
        make_unit: ``make_unit(in_channels, out_channels, stride, first)`` -> a unit; ``first``
            is True for the network's first unit.
        stage_channels: output channels of stage2, stage3, stage4.
        last_channels: channels of a final 1x1 conv (v2), or None (v1).
        num_classes, in_channels, small_input: see :func:`shufflenet_v2`.
    """

    def __init__(self, make_unit, stage_channels, last_channels, num_classes, in_channels,
                 small_input):
        super().__init__()
        self.conv1 = nn.Sequential(*conv_bn(in_channels, STEM_CHANNELS, 3,
                                            1 if small_input else 2, activation=nn.ReLU))
        self.maxpool = nn.Identity() if small_input else nn.MaxPool2d(3, 2, 1)
        channels = STEM_CHANNELS
        for index, (out_channels, repeats) in enumerate(zip(stage_channels, STAGE_REPEATS)):
            units = [make_unit(channels, out_channels, 2, index == 0)]
            units += [make_unit(out_channels, out_channels, 1, False) for _ in range(repeats - 1)]
            self.add_module(f"stage{index + 2}", nn.Sequential(*units))
            channels = out_channels
        self.conv5 = None
        if last_channels is not None:
            self.conv5 = nn.Sequential(*conv_bn(channels, last_channels, 1, activation=nn.ReLU))
            channels = last_channels
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.stage4(self.stage3(self.stage2(x)))
        if self.conv5 is not None:
            x = self.conv5(x)
        return self.fc(x.mean([2, 3]))


def shufflenet_v1(groups=3, *, num_classes=1000, in_channels=3, width_mult=1.0,
                  small_input=False):
    """Build a ShuffleNet v1 ("ShuffleNet s x, g = groups" in the paper).

    Args:
        groups: groups of the 1x1 convolutions: 1, 2, 3, 4 or 8.
        num_classes: outputs of the final linear layer.
        in_channels: input image channels (3 for RGB, 1 for MNIST).
        width_mult: the paper's ``s``: scales the stage widths, rounded to a multiple of
            ``4 * groups`` so that the bottleneck (a quarter of the output) splits into groups.
            The 24-channel stem is not scaled.
        small_input: for 28x28 / 32x32 images: stride-1 stem and no max pool (28 -> 14, 7, 4
            through the stages); otherwise the ImageNet layout for 224x224.
    """
    if groups not in V1_CHANNELS:
        raise ValueError(f"shufflenet_v1 groups must be one of {sorted(V1_CHANNELS)}, got {groups}")
    stage_channels = [make_divisible(c * width_mult, 4 * groups) for c in V1_CHANNELS[groups]]

    def make_unit(in_channels, out_channels, stride, first):
        return ShuffleUnitV1(in_channels, out_channels, stride, groups, 1 if first else groups)

    return ShuffleNet(make_unit, stage_channels, None, num_classes, in_channels, small_input)


def shufflenet_v2(*, num_classes=1000, in_channels=3, width_mult=1.0, small_input=False):
    """Build a ShuffleNet v2.

    Args:
        num_classes: outputs of the final linear layer.
        in_channels: input image channels (3 for RGB, 1 for MNIST).
        width_mult: 0.5, 1.0, 1.5 and 2.0 give torchvision's configurations; any other value
            scales the 1.0 stage widths, rounded to a multiple of 8 (conv5 stays 1024). The
            24-channel stem is not scaled.
        small_input: for 28x28 / 32x32 images: stride-1 stem and no max pool (28 -> 14, 7, 4
            through the stages); otherwise the ImageNet layout for 224x224.
    """
    if width_mult in V2_CHANNELS:
        stage_channels, last_channels = V2_CHANNELS[width_mult]
    else:
        stage_channels = [make_divisible(c * width_mult, 8) for c in V2_CHANNELS[1.0][0]]
        last_channels = V2_CHANNELS[1.0][1]
    def make_unit(in_channels, out_channels, stride, first):
        return ShuffleUnitV2(in_channels, out_channels, stride)

    return ShuffleNet(make_unit, stage_channels, last_channels, num_classes, in_channels,
                      small_input)
