"""Charts of the peer benchmarks, for people who would rather look than read a table: per model,
each engine's median latency at each thread count, relative to the fastest engine of that model
and thread count (1.0 = the fastest; qtk's bars in its own colour).

    python -m benchmarks.charts benchmarks/results/peers-<cpu>.json [--out chart.png]

benchmarks.peers draws one beside its JSON after every run (PNG, in benchmarks/results/).
"""
import argparse
import json
from pathlib import Path


def peers_chart(summary, out):
    """Writes the chart of a benchmarks.peers summary (its JSON, loaded) to the PNG file `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results, threads = summary["results"], summary["settings"]["threads"]
    models = list(results)
    engines = sorted({name for r in results.values() for name, e in r["engines"].items()
                      if any(f"median_ms_{t}t" in e for t in threads)})
    fig, axes = plt.subplots(len(threads), 1, figsize=(max(8, 1.6 * len(models)), 3.2 * len(threads)),
                             squeeze=False)
    width = 0.8 / max(1, len(engines))
    for ax, t in zip(axes[:, 0], threads):
        key = f"median_ms_{t}t"
        for i, name in enumerate(engines):
            ratios = []
            for model in models:
                times = [e[key] for e in results[model]["engines"].values() if key in e]
                mine = results[model]["engines"].get(name, {}).get(key)
                ratios.append(mine / min(times) if mine and times else 0.0)
            ax.bar([m + (i - (len(engines) - 1) / 2) * width for m in range(len(models))], ratios,
                   width, label=name, edgecolor="black" if name.startswith("qtk") else "none",
                   linewidth=1.2)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(models)), models)
        ax.set_ylabel(f"latency / fastest, {t} thread(s)")
    axes[0, 0].set_title(summary["machine"]["cpu"])
    axes[-1, 0].legend(ncol=4, fontsize="small", loc="upper center",
                       bbox_to_anchor=(0.5, -0.15))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary", type=Path, help="a JSON file written by benchmarks.peers")
    parser.add_argument("--out", type=Path, help="the PNG (default: beside the JSON)")
    args = parser.parse_args(argv)
    out = args.out or args.summary.with_suffix(".png")
    peers_chart(json.loads(args.summary.read_text()), out)
    print(f"chart: {out}")


if __name__ == "__main__":
    main()
