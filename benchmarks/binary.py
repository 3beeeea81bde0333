"""Binary convolution (conv2d_binary, spec 24) against qtk's int8 convolution of the same shape.

    python -m benchmarks.binary [--runs 50] [--threads 1 2]

Layers: resnet18's 3x3 stride-1 shapes (64 channels at 56x56, 128 at 28, 256 at 14, 512 at 7),
batch 1, one model per layer and kind: an int8 stem (QuantStub), then the conv with BatchNorm, QAT
with int8 weights and inputs (qtk's default) or with bits_qconfig(1, 1) (binary weights and
inputs), a few steps of BatchNorm statistics on random data. The two files run in alternation, and
the conv node's time per run (profiled sessions) gives the median ms: a whole run would add the
same float input quantization and output dequantization to both. Binary GMAC/s counts one
multiply-accumulate per product as the int8 figures do. The JSON goes to
benchmarks/results/binary_<cpu>.json; the table names this CPU and each kernel.
"""
import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch
from torch import nn

import qtk
from qtk import _C
from benchmarks.peers import cpu_description, cpu_slug

SHAPES = [(64, 56), (128, 28), (256, 14), (512, 7)]  # (channels, height = width)


class Layer(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.quant = qtk.modules.QuantStub()
        self.conv = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(channels))

    def forward(self, x):
        return self.conv(self.quant(x))


def deployed(channels, size, qconfig, path):
    torch.manual_seed(0)
    qat = qtk.quantize_qat(Layer(channels), qtk.QConfigMapping(
        qtk.default_qat_qconfig, by_name={"conv": qconfig})).train()
    for _ in range(3):
        qat(torch.randn(2, channels, size, size))
    qtk.export(qtk.convert(qat.eval()), torch.randn(1, channels, size, size), path)
    return path


def conv_seconds(session):
    return next(n["seconds"] for n in session.profile() if n["op"].startswith("conv2d"))


def conv_medians(sessions, inputs, runs, warmup=5):
    """{kind: median ms of its conv node}, the sessions taking turns run by run."""
    samples = {kind: [] for kind in sessions}
    for i in range(warmup + runs):
        for kind, session in sessions.items():
            before = conv_seconds(session)
            session.run(inputs[i % len(inputs)])
            if i >= warmup:
                samples[kind].append(conv_seconds(session) - before)
    return {kind: 1e3 * statistics.median(s) for kind, s in samples.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for channels, size in SHAPES:
            files = {kind: deployed(channels, size, qconfig, f"{workdir}/{kind}-{channels}.qmodel")
                     for kind, qconfig in (("int8", qtk.default_qat_qconfig),
                                           ("binary", qtk.bits_qconfig(1, 1)))}
            inputs = [torch.randn(1, channels, size, size) for _ in range(4)]
            macs = channels * channels * 9 * size * size
            for threads in args.threads:
                sessions = {kind: qtk.runtime.load(path, threads=threads, profile=True)
                            for kind, path in files.items()}
                ms = conv_medians(sessions, inputs, args.runs)
                conv = {k: next(a for a in s.algorithms if a.startswith("conv2d"))
                        for k, s in sessions.items()}
                rows.append({"channels": channels, "size": size, "threads": threads, "ms": ms,
                             "algorithm": conv, "binary_gmacs": macs / ms["binary"] / 1e6,
                             "speedup": ms["int8"] / ms["binary"]})
    peak = _C.measure_binary_peak(0.3)  # one core's xor/popcount rate; 0 without VPOPCNTDQ
    for r in rows:
        r["binary_peak_share"] = r["binary_gmacs"] * 1e9 / (peak * r["threads"]) if peak else None
    cpu = cpu_description()
    print(f"### {cpu}: 3x3 conv node, batch 1, median of {args.runs} interleaved runs\n")
    print(f"Measured binary peak: {peak / 1e9:.0f} G products/s per core (xor, vpopcntq, add on "
          f"registers).\n")
    print("| layer | threads | int8 ms | binary ms | binary / int8 speed | binary GMAC/s | "
          "share of peak | kernels |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        share = f"{100 * r['binary_peak_share']:.0f}%" if r["binary_peak_share"] else "-"
        print(f"| {r['channels']}@{r['size']}x{r['size']} | {r['threads']} | {r['ms']['int8']:.3f} "
              f"| {r['ms']['binary']:.3f} | {r['speedup']:.2f}x | {r['binary_gmacs']:.0f} | "
              f"{share} | {r['algorithm']['binary']}, {r['algorithm']['int8']} |")
    out = Path(__file__).parent / "results" / f"binary_{cpu_slug()}.json"
    out.write_text(json.dumps({"cpu": cpu, "runs": args.runs, "binary_peak": peak, "rows": rows},
                              indent=1) + "\n")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
