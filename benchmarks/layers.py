"""Per-layer profile of qtk int8 on torchvision models: each node's fastest of many runs (a shared
machine's neighbours only ever add time), summed per algorithm, with the conv layers' multiply-
accumulates per second beside this CPU's measured int8 peak (VNNI's, or AVX2's vpmaddwd).

    python -m benchmarks.layers resnet18 mobilenet_v2 --threads 1 2 [--per-node]

The figures behind the kernel notes in benchmarks/README.md. Prints tables and writes
benchmarks/results/layers_<cpu>.json (one file per CPU, so each machine's results are kept).
"""
import argparse
import collections
import json
import re
import tempfile
from pathlib import Path

import qtk
from qtk import _C
from benchmarks.peers import (CALIBRATION_BATCHES, _inputs, _qmodel_file, cpu_description,
                              float_model, int8_peak_name)

RESULTS = Path(__file__).resolve().parent / "results"


def node_minima(path, threads, runs, x):
    """Per node: (profile entry, its least seconds over `runs` runs)."""
    session = qtk.runtime.load(path, threads=threads, profile=True)
    session.run(x)  # warm-up
    before = [n["seconds"] for n in session.profile()]
    least = [float("inf")] * len(before)
    for _ in range(runs):
        session.run(x)
        nodes = session.profile()
        now = [n["seconds"] for n in nodes]
        least = [min(m, b - a) for m, a, b in zip(least, before, now)]
        before = now
    return list(zip(nodes, least))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--per-node", action="store_true", help="also print every MAC node")
    parser.add_argument("--fp32", action="store_true",
                        help="profile the float model exported as is (qtk fp32) instead of int8")
    args = parser.parse_args(argv)

    peak = _C.measure_int8_peak(0.3)  # one core's vpdpbusd rate, or AVX2's vpmaddwd + vpaddd
    cpu = cpu_description()
    print(f"{cpu}; {int8_peak_name()} {peak / 1e9:.0f} GMAC/s a core")
    calibration = _inputs(CALIBRATION_BATCHES, seed=1)
    results = {"cpu": cpu, "int8_peak": int8_peak_name(), "int8_peak_gmacs": peak / 1e9,
               "models": {}}
    for name in args.models:
        with tempfile.TemporaryDirectory() as workdir:
            if args.fp32:
                path = str(Path(workdir) / "float.qmodel")
                qtk.export(float_model(name).eval(), calibration[0], path)
            else:
                path = _qmodel_file(float_model(name), calibration, workdir)
            for threads in args.threads:
                nodes = node_minima(path, threads, args.runs, calibration[0])
                by_algorithm = collections.defaultdict(lambda: [0.0, 0])
                for node, seconds in nodes:
                    by_algorithm[node["algorithm"]][0] += seconds
                    by_algorithm[node["algorithm"]][1] += node["macs"]
                conv = [(n, s) for n, s in nodes if n["op"] == "conv2d"]
                conv_gmacs = sum(n["macs"] for n, _ in conv) / sum(s for _, s in conv) / 1e9
                share = (f", {conv_gmacs * 1e9 / (peak * threads):.0%} of the peak"
                         if peak and not args.fp32 else "")
                print(f"\n{name}, {threads} thread(s): sum of node minima "
                      f"{sum(s for _, s in nodes) * 1e3:.3f} ms; convs {conv_gmacs:.1f} GMAC/s"
                      f"{share}")
                for algorithm, (seconds, macs) in sorted(by_algorithm.items(),
                                                         key=lambda kv: -kv[1][0]):
                    rate = f"{macs / seconds / 1e9:7.1f} GMAC/s" if macs and seconds else ""
                    print(f"  {seconds * 1e3:8.3f} ms {rate:>15}  {algorithm}")
                if args.per_node:
                    for node, seconds in nodes:
                        if node["macs"] and seconds:
                            print(f"    {node['name'][:32]:32} {seconds * 1e6:8.0f} us "
                                  f"{node['macs'] / seconds / 1e9:7.1f} GMAC/s  "
                                  f"{node['algorithm']}")
                results["models"][f"{name}{' fp32' if args.fp32 else ''} {threads}t"] = {
                    "sum_ms": sum(s for _, s in nodes) * 1e3, "conv_gmacs": conv_gmacs,
                    "nodes": [{"name": n["name"], "op": n["op"], "algorithm": n["algorithm"],
                               "us": s * 1e6, "macs": n["macs"]} for n, s in nodes]}
    RESULTS.mkdir(exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", cpu.lower()).strip("-")
    (RESULTS / f"layers_{'fp32_' if args.fp32 else ''}{slug}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
