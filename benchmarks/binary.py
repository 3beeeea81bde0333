"""Binary convolution (conv2d_binary, spec 24) against qtk's int8 convolution of the same shape,
and a binary network against the same network in int8 and the fp32 peers.

    python -m benchmarks.binary [--runs 50] [--threads 1 2]

Layers: resnet18's 3x3 stride-1 shapes (64 channels at 56x56, 128 at 28, 256 at 14, 512 at 7),
batch 1, one model per layer and kind: an int8 stem (QuantStub), then the conv with BatchNorm, QAT
with int8 weights and inputs (qtk's default) or with bits_qconfig(1, 1) (binary weights and
inputs), a few steps of BatchNorm statistics on random data. The two files run in alternation, and
the conv node's time per run (profiled sessions) gives the median ms: a whole run would add the
same float input quantization and output dequantization to both. Binary GMAC/s counts one
multiply-accumulate per product as the int8 figures do, against the measured peak
(qtk.measure_binary_peak).

Network: model_zoo.binary.BiRealNet18 at 224x224, batch 1, random weights with BatchNorm statistics
re-estimated: qtk binary (W1A1 in its 16 3x3 blocks), qtk int8 (the same network all int8), ONNX
Runtime and OpenVINO fp32 on the float network, whole runs interleaved (median ms), and where the
binary run's time goes by op. The JSON goes to benchmarks/results/binary_<cpu>.json; the tables
name this CPU and each kernel.
"""
import argparse
import collections
import copy
import json
import statistics
import tempfile
from pathlib import Path

import torch
from torch import nn

import qtk
from qtk import _C
from benchmarks.peers import (binary_peak_name, cpu_description, cpu_slug, onnxruntime_fp32,
                              openvino_fp32, time_interleaved)
from model_zoo.binary import BiRealNet18, binary_mapping
from model_zoo.training import reestimate_batchnorm

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


def network_engines(workdir, threads):
    """{engine: run} for BiRealNet18, and the qtk binary session (profiled)."""
    torch.manual_seed(0)
    model = reestimate_batchnorm(BiRealNet18(), (4, 3, 224, 224))
    calibration = [torch.randn(1, 3, 224, 224) for _ in range(2)]
    runs, binary = {}, None
    for kind, qconfig in (("qtk binary", binary_mapping()), ("qtk int8", qtk.default_qat_qconfig)):
        qat = qtk.quantize_qat(copy.deepcopy(model), qconfig)
        qtk.freeze_bn_stats(qat)  # the observers see the re-estimated network
        qat.train()
        for x in calibration:
            qat(x)
        path = f"{workdir}/{kind.replace(' ', '_')}.qmodel"
        qtk.export(qtk.convert(qat.eval()), calibration[0], path)
        runs[kind] = qtk.runtime.load(path, threads=threads).run
        # a session of its own for the breakdown: profiling times every range of every node,
        # which the timed runs should not pay (at 2 threads it added about 0.1 ms a run)
        binary = binary or qtk.runtime.load(path, threads=threads, profile=True)
    for kind, engine in (("ONNX Runtime fp32", onnxruntime_fp32),
                         ("OpenVINO fp32", openvino_fp32)):
        runs[kind] = engine(model, calibration, workdir, threads)[0]
    return runs, binary


def network_rows(args):
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for threads in args.threads:
            runs, binary = network_engines(workdir, threads)
            inputs = [torch.randn(1, 3, 224, 224) for _ in range(4)]
            # the 2 vCPUs' placement (benchmarks/README.md, Zen 5 notes) before and after
            before = _C.measure_core_to_core() if threads > 1 else None
            times = time_interleaved(runs, inputs, args.runs, warmup=5)
            placement = [before, _C.measure_core_to_core()] if before else None
            for i in range(args.runs):
                binary.run(inputs[i % len(inputs)])
            by_op = collections.Counter()
            for node in binary.profile():
                by_op[node["op"]] += node["seconds"] / max(node["runs"], 1)
            rows.append({"threads": threads,
                         "ms": {k: 1e3 * statistics.median(v) for k, v in times.items()},
                         "binary_ms_by_op": {op: 1e3 * s for op, s in by_op.most_common()},
                         "core_to_core": placement})
    return rows


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
    peak = _C.measure_binary_peak(0.3)  # one core's xor/popcount rate; 0 without AVX2
    for r in rows:
        r["binary_peak_share"] = r["binary_gmacs"] * 1e9 / (peak * r["threads"]) if peak else None
    cpu = cpu_description()
    print(f"### {cpu}: 3x3 conv node, batch 1, median of {args.runs} interleaved runs\n")
    print(f"Measured {binary_peak_name()}: {peak / 1e9:.0f} G products/s per core (xor, popcount, "
          f"add on registers).\n")
    print("| layer | threads | int8 ms | binary ms | binary / int8 speed | binary GMAC/s | "
          "share of peak | kernels |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        share = f"{100 * r['binary_peak_share']:.0f}%" if r["binary_peak_share"] else "-"
        print(f"| {r['channels']}@{r['size']}x{r['size']} | {r['threads']} | {r['ms']['int8']:.3f} "
              f"| {r['ms']['binary']:.3f} | {r['speedup']:.2f}x | {r['binary_gmacs']:.0f} | "
              f"{share} | {r['algorithm']['binary']}, {r['algorithm']['int8']} |")
    network = network_rows(args)
    print(f"\n### {cpu}: BiRealNet18, 224x224, batch 1, median ms of {args.runs} interleaved "
          f"runs\n")
    engines = list(network[0]["ms"])
    print("| threads | " + " | ".join(engines) + " | int8 / binary | best fp32 / binary |")
    print("|---:|" + "---:|" * (len(engines) + 2))
    for r in network:
        ms = r["ms"]
        fp32 = min(v for k, v in ms.items() if "fp32" in k)
        print(f"| {r['threads']} | " + " | ".join(f"{ms[k]:.2f}" for k in engines) +
              f" | {ms['qtk int8'] / ms['qtk binary']:.2f}x | {fp32 / ms['qtk binary']:.2f}x |")
    for r in network:
        parts = ", ".join(f"{op} {ms:.2f}" for op, ms in r["binary_ms_by_op"].items())
        print(f"\nqtk binary at {r['threads']} thread(s), ms per run by op: {parts}")
        if r["core_to_core"]:
            (own0, other0), (own1, other1) = r["core_to_core"]
            print(f"Reading the other thread's fresh writes, ns per KiB (one's own in brackets), "
                  f"before and after: {other0:.1f} ({own0:.1f}) / {other1:.1f} ({own1:.1f})")
    out = Path(__file__).parent / "results" / f"binary_{cpu_slug()}.json"
    out.write_text(json.dumps({"cpu": cpu, "runs": args.runs, "binary_peak": peak,
                               "binary_peak_name": binary_peak_name(), "rows": rows,
                               "network": network}, indent=1) + "\n")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
