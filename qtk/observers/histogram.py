"""Histogram calibration: a range chosen from the value distribution, not its extremes.

One histogram of fixed bin count follows the running min/max (old counts are re-binned when the
range grows); ``calculate_qparams`` then picks the clipping range by one of three rules:
``percentile`` (drop the outermost mass), ``mse`` (least expected quantization error) or ``kl``
(least information lost, as in TensorRT's entropy calibration).
"""
import torch
import torch.distributed as dist

from ..arithmetic import qparams_from_range
from .minmax import Observer, _distributed

METHODS = ("percentile", "mse", "kl")


class HistogramObserver(Observer):
    """Per-tensor range from a histogram of everything observed (PTQ calibration).

    Args:
        method: ``"percentile"``, ``"mse"`` or ``"kl"``.
        bins: histogram resolution.
        percentile: two-sided mass kept by the percentile rule, in percent.
        candidates: clipping ranges tried by the mse and kl rules.
    """

    def __init__(self, method="mse", bins=2048, percentile=99.99, candidates=64, **kwargs):
        super().__init__(**kwargs)
        if method not in METHODS:
            raise ValueError(f"unknown histogram method {method!r}; choose one of {METHODS}")
        if self.ch_axis is not None:
            raise ValueError("HistogramObserver is per tensor; use it for activations")
        self.method, self.bins = method, bins
        self.percentile, self.candidates = percentile, candidates
        self.register_buffer("histogram", torch.zeros(bins, dtype=torch.float64))

    @torch.no_grad()
    def forward(self, x):
        x = x.detach().to(torch.float32).reshape(-1)
        old_min, old_max = (self.min_val.clone(), self.max_val.clone()) if self.has_statistics \
            else (None, None)
        super().forward(x)  # running min / max
        lo, hi = float(self.min_val), float(self.max_val)
        if hi <= lo:
            return x
        if old_min is not None and (float(old_min), float(old_max)) != (lo, hi):
            centers = self._centers(float(old_min), float(old_max))
            self.histogram.copy_(torch.histogram(centers, self.bins, range=(lo, hi),
                                                 weight=self.histogram)[0])
        counts = torch.histogram(x.double(), self.bins, range=(lo, hi))[0]
        if self.training and _distributed():  # ranks share the range, so they can sum counts
            dist.all_reduce(counts)
        self.histogram += counts
        return x

    def reset_statistics(self):
        super().reset_statistics()
        self.histogram.zero_()

    def _centers(self, lo, hi):
        edges = torch.linspace(lo, hi, self.bins + 1, dtype=torch.float64)
        return (edges[:-1] + edges[1:]) / 2

    def calculate_qparams(self):
        if not self.has_statistics or self.histogram.sum() == 0:
            return super().calculate_qparams()
        lo, hi = self._clip_range()
        return qparams_from_range(torch.tensor(lo), torch.tensor(hi), self.qmin, self.qmax,
                                  self.symmetric)

    def _clip_range(self):
        lo, hi = float(self.min_val), float(self.max_val)
        centers, counts = self._centers(lo, hi), self.histogram
        if self.method == "percentile":
            cumulative = torch.cumsum(counts, 0) / counts.sum()
            tail = (100.0 - self.percentile) / 200.0
            first = int(torch.searchsorted(cumulative, torch.tensor(tail, dtype=torch.float64)))
            last = int(torch.searchsorted(cumulative, torch.tensor(1 - tail, dtype=torch.float64)))
            return float(centers[first]), float(centers[min(last, self.bins - 1)])
        cost = self._mse if self.method == "mse" else self._kl
        smallest = 1.0 / self.candidates
        if self.method == "kl":
            # KL compares bins with levels: a range narrower than one bin per level makes every
            # level a single bin (no error seen inside the range), so KL would clip ever harder
            smallest = max(smallest, (self.qmax - self.qmin + 1) / self.bins)
        fractions = torch.linspace(1.0, smallest, self.candidates)
        best = min(fractions.tolist(), key=lambda f: cost(centers, counts, lo * f, hi * f))
        return lo * best, hi * best

    def _fake_quantize(self, centers, lo, hi):
        scale, zero_point = qparams_from_range(torch.tensor(lo), torch.tensor(hi), self.qmin,
                                               self.qmax, self.symmetric)
        q = torch.clamp(torch.round(centers / float(scale)) + int(zero_point), self.qmin, self.qmax)
        return (q - int(zero_point)) * float(scale), q

    def _mse(self, centers, counts, lo, hi):
        restored, _ = self._fake_quantize(centers, lo, hi)
        return float((counts * (centers - restored) ** 2).sum())

    def _kl(self, centers, counts, lo, hi):
        """KL(P || Q) as in TensorRT's calibrator: P is the histogram inside [lo, hi] with the mass
        outside folded into its edge bins; Q quantizes the inside alone, each level's mass spread
        over its non-empty bins. Clipped mass appears in P but not in Q, so it costs."""
        inside = (centers >= lo) & (centers <= hi)
        if int(inside.sum()) == 0:
            return float("inf")
        first, last = int(inside.nonzero()[0]), int(inside.nonzero()[-1])
        window = counts[first:last + 1]
        p = window.clone()
        p[0] += counts[:first].sum()
        p[-1] += counts[last + 1:].sum()
        _, levels = self._fake_quantize(centers[first:last + 1], lo, hi)
        index = (levels - self.qmin).long()
        level_mass = torch.zeros(self.qmax - self.qmin + 1, dtype=torch.float64)
        level_bins = torch.zeros_like(level_mass)
        level_mass.index_add_(0, index, window)
        level_bins.index_add_(0, index, (window > 0).double())
        q = torch.where(window > 0, level_mass[index] / level_bins[index].clamp(min=1), 0.0)
        p, q = p / p.sum(), q / q.sum().clamp(min=1e-300)
        used = p > 0
        return float((p[used] * torch.log(p[used] / q[used].clamp(min=1e-12))).sum())
