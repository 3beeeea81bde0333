"""A/B of two builds of the runtime on the same .qmodel files: `qtk_run` of each build in turn,
the order alternating pair by pair, and the ratio B/A per pair (its median is the figure to quote:
a shared machine's speed drifts, and a ratio taken pair by pair survives it).

    python -m benchmarks.runtime_ab OLD/qtk_run NEW/qtk_run resnet18.qmodel mobilenet_v2.qmodel

Prints a table and writes benchmarks/results/runtime_ab_<cpu>.json (one file per CPU, so each
machine's results are kept). Build each side with `cmake -S deploy_runtime -B DIR -G Ninja
-DCMAKE_BUILD_TYPE=Release && cmake --build DIR --target qtk_run` at the two commits.
"""
import argparse
import json
import re
import statistics
import subprocess
from pathlib import Path

from benchmarks.peers import cpu_description

RESULTS = Path(__file__).resolve().parent / "results"


def median_us(binary, model, threads, iterations):
    out = subprocess.run([binary, model, "--threads", str(threads), "--iters", str(iterations)],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"median ([\d.]+) us", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="qtk_run of the baseline build")
    parser.add_argument("b", help="qtk_run of the build under test")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--iters", type=int, default=25)
    args = parser.parse_args()
    cpu, rows = cpu_description(), []
    print(f"{cpu}; B/A per pair, median (min, max)")
    for model in args.models:
        for threads in (1, 2):
            a_times, b_times, ratios = [], [], []
            for pair in range(args.pairs):
                order = (args.a, args.b) if pair % 2 == 0 else (args.b, args.a)
                times = {binary: median_us(binary, model, threads, args.iters) for binary in order}
                a_times.append(times[args.a])
                b_times.append(times[args.b])
                ratios.append(times[args.b] / times[args.a])
            row = {"model": Path(model).stem, "threads": threads,
                   "a_ms": statistics.median(a_times) / 1000,
                   "b_ms": statistics.median(b_times) / 1000,
                   "ratio": statistics.median(ratios), "ratio_min": min(ratios),
                   "ratio_max": max(ratios)}
            rows.append(row)
            print(f"{row['model']:22} {threads}t  A {row['a_ms']:7.2f} ms  B {row['b_ms']:7.2f} ms"
                  f"  B/A {row['ratio']:.3f} ({row['ratio_min']:.3f}, {row['ratio_max']:.3f})",
                  flush=True)
    RESULTS.mkdir(exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "_", cpu.lower()).strip("_")
    (RESULTS / f"runtime_ab_{slug}.json").write_text(json.dumps(
        {"cpu": cpu, "a": args.a, "b": args.b, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
