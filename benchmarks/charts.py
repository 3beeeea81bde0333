"""Charts of the peer benchmarks, for people who would rather look than read a table: per model,
each engine's median latency at each thread count, relative to the fastest engine of that model
and thread count (1.0 = the fastest; qtk's bars in its own colour).

    python -m benchmarks.charts benchmarks/results/peers-<cpu>.json [--out chart.png]

benchmarks.peers draws one beside its JSON after every run (PNG, in benchmarks/results/).
"""
import argparse
import json
from pathlib import Path

from qtk.charts import Panel, save_bar_chart


def peers_chart(summary, out):
    """Writes the chart of a benchmarks.peers summary (its JSON, loaded) to the PNG file `out`."""
    results, threads = summary["results"], summary["settings"]["threads"]
    models = list(results)
    engines = sorted({name for r in results.values() for name, e in r["engines"].items()
                      if any(f"median_ms_{t}t" in e for t in threads)})
    panels = []
    for t in threads:
        key = f"median_ms_{t}t"
        series = {}
        for name in engines:
            ratios = []
            for model in models:
                times = [e[key] for e in results[model]["engines"].values() if key in e]
                mine = results[model]["engines"].get(name, {}).get(key)
                ratios.append(mine / min(times) if mine and times else 0.0)
            series[name] = ratios
        panels.append(Panel(models, series, f"latency / fastest, {t} thread(s)", line=1.0,
                            highlight="qtk"))
    panels[0] = panels[0]._replace(title=summary["machine"]["cpu"])
    save_bar_chart(panels, out)


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
