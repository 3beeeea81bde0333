"""Grouped bar charts as PNG files (matplotlib), the one drawing code of every chart qtk writes:
``qtk profile --chart`` (time per node or op), the accuracy study's (model_zoo/accuracy_study.py:
accuracy per method and bit width) and the peer benchmarks' (benchmarks/charts.py)."""
import math
from typing import Mapping, NamedTuple, Optional, Sequence


class Panel(NamedTuple):
    """One axes of grouped bars: per category along x, one bar per series (NaN: no bar).

    Args:
        categories: the x labels.
        series: ``{name: one value per category}``; several series get a legend.
        ylabel: the y axis's label.
        title: above the axes.
        line: a horizontal reference line (1.0 for ratios, the float model's accuracy), or None.
        highlight: series whose names start with this get a black edge (qtk's own bars).
    """
    categories: Sequence[str]
    series: Mapping[str, Sequence[float]]
    ylabel: str
    title: str = ""
    line: Optional[float] = None
    highlight: str = ""


def save_bar_chart(panels, out, dpi=110):
    """Draws ``panels`` (a list of :class:`Panel`) one above the other and writes the PNG ``out``."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("drawing a chart needs matplotlib (pip install matplotlib)")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    widest = max(len(p.categories) * max(1, len(p.series)) for p in panels)
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(min(24, max(8, 0.3 * widest + 2)), 4 * len(panels)))
    for ax, panel in zip(axes[:, 0], panels):
        names = list(panel.series)
        width = 0.8 / max(1, len(names))
        for i, name in enumerate(names):
            values = [math.nan if v is None else v for v in panel.series[name]]
            edge = panel.highlight and name.startswith(panel.highlight)
            ax.bar([c + (i - (len(names) - 1) / 2) * width for c in range(len(panel.categories))],
                   values, width, label=name, edgecolor="black" if edge else "none",
                   linewidth=1.2)
        if panel.line is not None:
            ax.axhline(panel.line, color="grey", linewidth=0.8)
        long_labels = max((len(str(c)) for c in panel.categories), default=0) > 10
        ax.set_xticks(range(len(panel.categories)), panel.categories,
                      rotation=35 if long_labels else 0, ha="right" if long_labels else "center",
                      fontsize="small" if long_labels else None)
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title)
        if len(names) > 1:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=dpi, bbox_inches="tight")  # "tight": the legends beside the axes too
    plt.close(fig)
