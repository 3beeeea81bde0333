"""int8 Winograd F(2x2, 3x3) against qtk's direct and im2col+GEMM convs: per 3x3 stride-1 layer,
where Fast-Run chose it, and end to end.

    python -m benchmarks.winograd [--runs 30] [--isa native avx2] [--threads 1]

Models: torchvision resnet18 at 224x224 and a VGG-style stack (two conv3x3-BN-ReLU per stage, 64,
128, 256 and 512 channels at 112, 56, 28 and 14 pixels), random weights with BatchNorm statistics
re-estimated, qtk PTQ int8, batch 1. For each ISA level (QTK_ISA: this CPU's own, and avx2, where
Winograd's float FMA competes with AVX2's int8 multiply-adds rather than with VNNI) every conv
algorithm is pinned in turn (QTK_CONV_ALGO; a pin serves the layers it fits, the others keep their
default), and a profiled session times every node of every run; a Fast-Run session chooses per
layer. The tables give each 3x3 stride-1 layer's median ms per algorithm and Fast-Run's choice, and
each model's median ms with each pin and with Fast-Run (whole runs interleaved, so drift on a shared
machine hits all alike). Every configuration computes the same bytes (tests/ hold them equal).
The tables go under this CPU's heading in benchmarks/README.md, beside other CPUs' (as peers.py's).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import torch
import torchvision
from torch import nn

import qtk
from benchmarks.peers import cpu_slug, environment, time_interleaved, write_readme
from model_zoo.training import reestimate_batchnorm

ALGORITHMS = {  # per QTK_ISA level: the conv algorithms that compete on 3x3 stride-1 layers
    "avx512_vnni": ["conv2d_int8_direct_8x32c4_avx512_vnni",
                    "conv2d_int8_gemm_8x32c4_avx512_vnni",
                    "conv2d_int8_winograd_f2x3_8x32_avx512",
                    "conv2d_int8_winograd_f2x3_8x32_l1_avx512"],
    "avx2": ["conv2d_int8_direct_2x16c4_avx2", "conv2d_int8_gemm_2x16c4_avx2",
             "conv2d_int8_winograd_f2x3_int16_6x16_avx2",
             "conv2d_int8_winograd_f2x3_int16_6x16_l1_avx2"],
}
BEGIN = "<!-- BEGIN WINOGRAD RESULTS: written by `python -m benchmarks.winograd`, do not edit -->"
END = "<!-- END WINOGRAD RESULTS -->"


def vgg_stack():
    layers, channels = [], 3
    for width in (64, 128, 256, 512):
        for _ in range(2):
            layers += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width),
                       nn.ReLU(inplace=True)]
            channels = width
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers[:-1])


MODELS = {  # name: (float model, input size)
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), 224),
    "VGG-style stack": (vgg_stack, 112),
}


def quantized_file(name, workdir):
    torch.manual_seed(0)
    build, size = MODELS[name]
    model = reestimate_batchnorm(build(), (8, 3, size, size))
    prepared = qtk.prepare_ptq(model)
    qtk.calibrate(prepared, [torch.randn(1, 3, size, size) for _ in range(8)])
    path = os.path.join(workdir, name.replace(" ", "_") + ".qmodel")
    qtk.export(qtk.convert(prepared), torch.randn(1, 3, size, size), path)
    winograd_layers = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)
                       and m.kernel_size == (3, 3) and m.stride == (1, 1) and m.groups == 1
                       and m.dilation == (1, 1)]
    return path, size, winograd_layers


def load(path, threads, isa, algorithm=None, **options):
    """A session under QTK_ISA / QTK_CONV_ALGO (read at load only)."""
    with environment(QTK_ISA=isa, QTK_CONV_ALGO=algorithm or ""):
        return qtk.runtime.load(path, threads=threads, **options)


def layer_medians(session, inputs, runs, layers):
    """Median ms of each listed layer over `runs` profiled runs."""
    samples = {layer: [] for layer in layers}
    previous = {n["name"]: n["seconds"] for n in session.profile()}
    for i in range(runs):
        session.run(inputs[i % len(inputs)])
        for node in session.profile():
            if node["name"] in samples:
                samples[node["name"]].append(node["seconds"] - previous[node["name"]])
            previous[node["name"]] = node["seconds"]
    return {layer: 1e3 * statistics.median(s) for layer, s in samples.items()}


def measure(name, isa, args, workdir):
    path, size, layers = quantized_file(name, workdir)
    inputs = [torch.randn(1, 3, size, size) for _ in range(4)]
    algorithms = ALGORITHMS[isa]
    per_layer = {}
    sessions = {}
    for algorithm in algorithms:
        profiled = load(path, args.threads, isa, algorithm, profile=True)
        for _ in range(3):
            profiled.run(inputs[0])  # warm-up
        per_layer[algorithm] = layer_medians(profiled, inputs, args.runs, layers)
        sessions[algorithm] = load(path, args.threads, isa, algorithm).run
    cache = os.path.join(workdir, f"{name}-{isa}.cache")
    searched = load(path, args.threads, isa, fast_run="search", fast_run_cache=cache, profile=True)
    chosen = {n["name"]: n["algorithm"] for n in searched.profile() if n["name"] in layers}
    sessions["Fast-Run"] = load(path, args.threads, isa, fast_run="use", fast_run_cache=cache).run
    whole = time_interleaved(sessions, inputs, args.runs, warmup=3)
    return {"layers": layers, "per_layer_ms": per_layer, "fast_run_choice": chosen,
            "model_ms": {k: 1e3 * statistics.median(v) for k, v in whole.items()}}


def short(algorithm):
    """'conv2d_int8_winograd_f2x3_8x32_avx512' -> 'winograd', its L1-block variant (tiles blocked
    so one block's transformed input fits L1, not L2) -> 'winograd L1'."""
    return algorithm.split("_")[2] + (" L1" if "_l1_" in algorithm else "")


def report_lines(results, args):
    lines = [f"Median of {args.runs} runs, batch 1, {args.threads} thread(s). Per-layer cells: ms "
             f"of that 3x3 stride-1 layer with the algorithm pinned; **bold**: Fast-Run's choice.",
             ""]
    for (name, isa), r in results.items():
        algorithms = ALGORITHMS[isa]
        lines += [f"### {name}, QTK_ISA={isa}", "",
                  "| layer | " + " | ".join(short(a) for a in algorithms) + " | Fast-Run chose |",
                  "|---" + "|---:" * len(algorithms) + "|---|"]
        for layer in r["layers"]:
            cells = []
            for a in algorithms:
                ms = r["per_layer_ms"][a][layer]
                bold = r["fast_run_choice"].get(layer) == a
                cells.append(f"**{ms:.3f}**" if bold else f"{ms:.3f}")
            lines.append(f"| {layer} | " + " | ".join(cells) +
                         f" | {short(r['fast_run_choice'].get(layer, '?_?_?'))} |")
        whole = r["model_ms"]
        lines += ["", "Whole model, ms: " + ", ".join(
            f"{short(k) if k in algorithms else k} {v:.2f}" for k, v in whole.items()) +
            f" (Winograd pinned / direct pinned = "
            f"{whole[algorithms[2]] / whole[algorithms[0]]:.2f}x).", ""]
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--isa", nargs="+", default=["avx512_vnni", "avx2"],
                        choices=list(ALGORITHMS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       f"winograd-{cpu_slug()}.json"))
    parser.add_argument("--readme", default=os.path.join(os.path.dirname(__file__), "README.md"),
                        help="markdown file whose Winograd section gets the tables ('': none)")
    args = parser.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models:
            for isa in args.isa:
                results[(name, isa)] = measure(name, isa, args, workdir)
                print(f"{name}, {isa}: done", flush=True)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({f"{name} / {isa}": r for (name, isa), r in results.items()}, f, indent=2)
    lines = report_lines(results, args)
    print("\n".join(lines))
    if args.readme:
        write_readme(args.readme, lines, "python -m benchmarks.winograd " + " ".join(
            sys.argv[1:] if argv is None else argv), markers=(BEGIN, END))
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
