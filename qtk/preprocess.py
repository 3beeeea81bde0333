"""Image preprocessing that the deploy runtime reproduces byte for byte (spec 23): uint8 images in,
the network's float input out. Train with ``net(preprocess(images))``; export with
``qtk.export(quantized_net, example_image, path, image=preprocess)`` and the ``.qmodel`` takes the
uint8 image itself (``Session.run_image``)."""
import torch
from torch import nn

from . import arithmetic

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _pair(value, name):
    if value is None:
        return None
    pair = (value, value) if isinstance(value, int) else tuple(int(v) for v in value)
    if len(pair) != 2 or min(pair) < 1:
        raise ValueError(f"{name} must be None, a positive int or (height, width), got {value!r}")
    return pair


class ImagePreprocess(nn.Module):
    """uint8 ``[N, H, W, C]`` images -> float32 ``[N, C, h, w]``: an integer resize, a center crop,
    the channel order, then ``((p / 255) - mean_c) / std_c`` in float32 (docs/quantization_spec.md
    section 23). The integer steps are defined so that torch and the runtime give the same bytes.

    Args:
        size: ``None`` (no resize) or ``(H, W)`` (an int for a square) to resize to.
        crop: ``None`` or ``(h, w)``: the center crop of the resized image, top-left at
            ``((H - h) // 2, (W - w) // 2)`` (torchvision's CenterCrop rounds the offset half to
            even instead, so it may sit one pixel lower or further right).
        interpolation: ``"bilinear"`` or ``"nearest"`` (half-pixel centres, as torch's
            ``align_corners=False``, but in integers: bilinear weights are multiples of 1/2048).
        channel_order: the source's order, ``"rgb"`` or ``"bgr"`` (OpenCV); the model sees RGB.
        mean, std: per channel, of the model's (RGB) channels, as torchvision's Normalize.
    """

    def __init__(self, size=None, crop=None, interpolation="bilinear", channel_order="rgb",
                 mean=IMAGENET_MEAN, std=IMAGENET_STD):
        super().__init__()
        if interpolation not in arithmetic.IMAGE_INTERPOLATIONS:
            raise ValueError(f"interpolation must be 'bilinear' or 'nearest', got "
                             f"{interpolation!r}")
        if channel_order not in ("rgb", "bgr"):
            raise ValueError(f"channel_order must be 'rgb' or 'bgr', got {channel_order!r}")
        if len(mean) != len(std):
            raise ValueError(f"mean has {len(mean)} values but std has {len(std)}")
        if channel_order == "bgr" and len(mean) != 3:
            raise ValueError("channel_order 'bgr' needs 3 channels (mean and std of 3 values)")
        self.size, self.crop = _pair(size, "size"), _pair(crop, "crop")
        self.interpolation, self.channel_order = interpolation, channel_order
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))

    @property
    def channels(self):
        return self.mean.numel()

    def resized_size(self, source_hw):
        return self.size if self.size is not None else tuple(int(d) for d in source_hw)

    def crop_window(self, source_hw):
        """(top, left, height, width) of the crop in the resized image."""
        height, width = self.resized_size(source_hw)
        if self.crop is None:
            return 0, 0, height, width
        h, w = self.crop
        if h > height or w > width:
            raise ValueError(f"crop {self.crop} is larger than the resized image "
                             f"{(height, width)}")
        return (height - h) // 2, (width - w) // 2, h, w

    def source_channels(self):
        """The source channel of each model channel."""
        return [2, 1, 0] if self.channel_order == "bgr" else list(range(self.channels))

    def normalize(self, p, channel_dim):
        """Integer pixels -> ((p / 255) - mean_c) / std_c, three float32 operations in this
        order; channel ``c`` along ``channel_dim`` (the export's table uses the same function)."""
        shape = [1] * p.dim()
        shape[channel_dim] = -1
        return (p.to(torch.float32) / 255 - self.mean.reshape(shape)) / self.std.reshape(shape)

    def forward(self, images):
        if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[3] != self.channels:
            raise ValueError(f"ImagePreprocess takes uint8 images [N, H, W, {self.channels}], "
                             f"got {images.dtype} {list(images.shape)}")
        p = images.permute(0, 3, 1, 2).to(torch.int64)
        p = arithmetic.image_resize(p, self.resized_size(p.shape[2:]), self.interpolation)
        top, left, h, w = self.crop_window(images.shape[1:3])
        p = p[:, self.source_channels(), top:top + h, left:left + w]
        return self.normalize(p, 1)

    def table(self, qparams):
        """int8 [C, 256]: the quantized network input for each model channel and pixel value,
        ``quantize(normalize(p))`` with the QuantStub's rule and ``qparams`` (spec 1)."""
        p = torch.arange(256, dtype=torch.int64).reshape(1, 256)
        x = self.normalize(p, 0)
        return arithmetic.quantize(x, *qparams).to(torch.int8)

    def qmodel_attrs(self, source_hw):
        """The image_to_int8 node's attributes (docs/qmodel_format.md)."""
        return {"size": list(self.resized_size(source_hw)),
                "interpolation": [arithmetic.IMAGE_INTERPOLATIONS.index(self.interpolation)],
                "crop": list(self.crop_window(source_hw)),
                "channels": self.source_channels()}

    def extra_repr(self):
        return (f"size={self.size}, crop={self.crop}, interpolation={self.interpolation!r}, "
                f"channel_order={self.channel_order!r}")
