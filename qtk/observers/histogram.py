"""Histogram calibration: a range chosen from the value distribution, not its extremes.

The histogram is symmetric about zero: ``bins`` equal bins over [-amax, amax], amax the largest
magnitude observed so far, one row per tensor or per channel (a row's counts are re-binned when
its amax grows). Zero is the edge between the two middle bins, so the entropy rule's windows can
grow around it as ONNX Runtime's do. ``calculate_qparams`` picks each row's clipping range by one
of these rules, computed for all rows at once, and clips it to the observed [min, max]:

- ``percentile``: drop the outermost ``(100 - percentile) / 2`` percent of the mass on each side.
- ``mse``: the least expected squared quantization error among ``candidates`` shrunken ranges.
- ``minmax``: the observed [min, max] itself (so one calibration can be read by every rule:
  ``qtk.quantize_ptq(method="auto")``).
- ``kl``: entropy calibration (TensorRT's, S. Migacz, "8-bit Inference with TensorRT", GTC 2017)
  in the form ONNX Runtime implements (``onnxruntime.quantization.calibrate``,
  ``HistogramCollector.get_entropy_threshold``; see :func:`entropy_windows`), with two details
  of TensorRT's calibrator (NVIDIA's ``pytorch-quantization``, ``_compute_amax_entropy``) that
  ORT leaves out. The bin holding zero takes its neighbour's count: after a ReLU most values are
  exactly zero, and that one spike made every window but the narrowest (amax / 16) diverge, so a
  sparse network (CRAFT's VGG) was clipped to nothing. A one-sided row (min >= 0) merges each
  window into twice the groups: ORT's windows are symmetric, so its empty negative half took
  half of them, while qtk's asymmetric grid puts every level on the side that holds values.

  KL compares the shapes of the distributions and is blind to how far the values it clips lie
  beyond the window, so on heavy-tailed tensors seen in few samples it clips values that carry
  much of the signal. With ``kl_guard`` (the default) a row keeps its KL window only where the
  window's expected squared quantization error on the histogram (the ``mse`` rule's measure) is
  no larger than the observed range's, else the observed range: on ``docs/ptq.md``'s networks
  the guard raised MTCNN ONet's output SQNR from 23.9 to 28.3 dB (every window clipped more than
  it saved) and CRAFT's from 24.9 to 25.6, and lowered PP-LCNet's from 12.0 to 11.2 (ONNX
  Runtime's entropy rows, the observed range: 26.2, 24.9, 10.6 dB).
"""
import torch
import torch.distributed as dist

from .. import arithmetic
from ..arithmetic import qparams_from_range
from .minmax import Observer, _distributed

METHODS = ("percentile", "mse", "kl", "minmax")
SMOOTHING = 1e-4  # ONNX Runtime's smooth_distribution: an empty Q bin holds 1e-4 of a count
ENTROPY_ROWS_AT_ONCE = 32  # bounds the sweep's [rows, candidates, groups] tensors to ~4M values


class HistogramObserver(Observer):
    """Range from a histogram of everything observed (PTQ calibration), per tensor or per channel.

    Args:
        method: ``"percentile"``, ``"mse"``, ``"kl"`` or ``"minmax"``.
        bins: histogram resolution per row (even; 2048 as in TensorRT).
        percentile: two-sided mass kept by the percentile rule, in percent.
        candidates: clipping ranges tried by the mse rule.
        quantized_bins: the groups the kl rule merges a window into; default half the integer
            levels, ``(qmax - qmin + 1) // 2``: 128 at 8 bits, ONNX Runtime's default (a
            one-sided row gets twice as many).
        kl_guard: the kl rule keeps a window only where its expected squared error is no larger
            than the observed range's (module docstring); False gives the sweep's window always.
        ch_axis: ``None`` for one histogram, else one per channel along this axis (weights: 0).
        qmin, qmax, symmetric: as for :class:`qtk.observers.Observer`.
    """
    _version = 2  # version 1 binned [min, max]; version 2 bins [-amax, amax]

    def __init__(self, method="mse", bins=2048, percentile=99.99, candidates=64,
                 quantized_bins=None, kl_guard=True, **kwargs):
        super().__init__(**kwargs)
        if method not in METHODS:
            raise ValueError(f"unknown histogram method {method!r}; choose one of {METHODS}")
        if bins % 2:
            raise ValueError(f"bins must be even (zero is the edge of the middle bins), got {bins}")
        self.method, self.bins = method, bins
        self.percentile, self.candidates = percentile, candidates
        self.kl_guard = kl_guard
        self.quantized_bins = quantized_bins or (self.qmax - self.qmin + 1) // 2
        if not 2 <= self.quantized_bins <= bins:
            raise ValueError(f"quantized_bins must be in [2, bins], got {self.quantized_bins}")
        self.register_buffer("histogram", torch.zeros(0, dtype=torch.float64))

    def _rows(self, x):
        if self.ch_axis is None:
            return x.reshape(1, -1)
        return x.transpose(0, self.ch_axis).reshape(x.shape[self.ch_axis], -1)

    def _amax(self):
        return torch.maximum(-self.min_val, self.max_val).reshape(-1).double()

    @torch.no_grad()
    def forward(self, x):
        readable = self._readable(x)
        old_amax = self._amax() if self.has_statistics else None
        self._update_range(readable)  # running min / max, all-reduced under DDP
        amax = self._amax()
        rows = self._rows(readable).double()
        shape = (self.bins,) if self.ch_axis is None else (rows.shape[0], self.bins)
        if self.histogram.shape != shape:
            self.histogram.resize_(shape).zero_()
        elif old_amax is not None and not torch.equal(old_amax, amax):
            old = self.histogram.reshape(-1, self.bins)
            self.histogram.copy_(_bin(_centers(old_amax, self.bins), amax, self.bins,
                                      weights=old).reshape(shape))
        counts = _bin(rows, amax, self.bins).reshape(shape)
        if self.training and _distributed():  # ranks share the range, so they can sum counts
            dist.all_reduce(counts)
        self.histogram += counts
        return x

    def reset_statistics(self):
        super().reset_statistics()
        self.histogram.resize_(0)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "histogram" in state_dict:
            self.histogram.resize_(state_dict[prefix + "histogram"].shape)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def calculate_qparams(self):
        if not self.has_statistics or self.histogram.sum() == 0:
            return super().calculate_qparams()
        lo, hi = self._clip_range()
        lo = torch.clamp(lo.reshape(self.min_val.shape).float(), min=self.min_val)
        hi = torch.clamp(hi.reshape(self.max_val.shape).float(), max=self.max_val)
        return self.qparams_from_range(lo, hi)

    def _clip_range(self):
        """(lo, hi) per row, float64 tensors of shape [rows]."""
        counts, amax = self.histogram.reshape(-1, self.bins), self._amax()
        if self.method == "minmax":
            return self._observed_range()
        centers = _centers(amax, self.bins)
        if self.method == "kl":
            first, end = self._entropy_windows(counts)
            width = 2 * amax / self.bins
            lo, hi = -amax + first * width, -amax + end * width
            return self._guarded(centers, counts, lo, hi) if self.kl_guard else (lo, hi)
        if self.method == "percentile":
            cumulative = torch.cumsum(counts, 1) / counts.sum(1, keepdim=True)
            tail = (100.0 - self.percentile) / 200.0
            tails = torch.tensor([[tail, 1 - tail]], dtype=torch.float64).expand(len(counts), 2)
            index = torch.searchsorted(cumulative, tails.contiguous()).clamp(max=self.bins - 1)
            return centers.gather(1, index).unbind(1)
        return self._least_squared_error(centers, counts)

    def _entropy_windows(self, counts):
        """(first, end) bin edges of each row's KL window, with TensorRT's two departures from
        ONNX Runtime's sweep (see the module docstring): the zero bin holds its neighbour's count,
        and a one-sided row merges its windows into twice the groups."""
        counts = counts.clone()
        zero = self.bins // 2
        counts[:, zero] = counts[:, zero + 1]
        one_sided = (self.min_val.reshape(-1) >= 0).expand(len(counts))
        windows = torch.empty(2, len(counts), dtype=torch.float64)
        for rows, groups in ((~one_sided, self.quantized_bins),
                             (one_sided, min(2 * self.quantized_bins, self.bins))):
            if rows.any():
                windows[:, rows] = torch.cat([entropy_windows(chunk, groups) for chunk in
                                              counts[rows].split(ENTROPY_ROWS_AT_ONCE)], 1)
        return windows

    def _observed_range(self):
        """(min, max) per row, float64 tensors of shape [rows]."""
        return self.min_val.reshape(-1).double(), self.max_val.reshape(-1).double()

    def _guarded(self, centers, counts, lo, hi):
        """Each row's (lo, hi), or its observed [min, max] where that has the smaller expected
        squared error (the window as calculate_qparams clips it to the observed range)."""
        observed_lo, observed_hi = self._observed_range()
        window = self._squared_error(centers, counts, torch.maximum(lo, observed_lo),
                                     torch.minimum(hi, observed_hi))
        keep = window <= self._squared_error(centers, counts, observed_lo, observed_hi)
        return torch.where(keep, lo, observed_lo), torch.where(keep, hi, observed_hi)

    def _least_squared_error(self, centers, counts):
        lo, hi = self._observed_range()
        fractions = torch.linspace(1.0, 1.0 / self.candidates, self.candidates,
                                   dtype=torch.float64)
        errors = torch.stack([self._squared_error(centers, counts, lo * f, hi * f)
                              for f in fractions.tolist()], 1)
        best = fractions[errors.argmin(1)]
        return lo * best, hi * best

    def _squared_error(self, centers, counts, lo, hi):
        """Histogram-weighted squared error of fake-quantizing each row's bin centers."""
        scale, zero_point = qparams_from_range(lo, hi, self.qmin, self.qmax, self.symmetric)
        q = arithmetic.quantize(centers, scale, zero_point, self.qmin, self.qmax, axis=0)
        restored = arithmetic.dequantize(q, scale[:, None], zero_point[:, None])
        return (counts * (centers - restored.double()) ** 2).sum(1)

    def extra_repr(self):
        return f"{super().extra_repr()}, method={self.method}, bins={self.bins}"


class PerChannelHistogramObserver(HistogramObserver):
    """:class:`HistogramObserver` per channel along ``ch_axis`` (weights: output channels)."""

    def __init__(self, ch_axis=0, **kwargs):
        super().__init__(ch_axis=ch_axis, **kwargs)


def _centers(amax, bins):
    """[rows, bins] bin centers of histograms over [-amax, amax]."""
    unit = (2 * torch.arange(bins, dtype=torch.float64) + 1) / bins - 1
    return amax[:, None] * unit


def _bin(values, amax, bins, weights=None):
    """Histogram each row of ``values`` [rows, n] over its own [-amax, amax]: [rows, bins].
    Bins are half-open [edge, next edge), the last one closed, as numpy's."""
    rows = values.shape[0]
    position = (values / amax.clamp(min=1e-300)[:, None] + 1) * (bins / 2)
    index = torch.nan_to_num(position.floor(), nan=0.0).clamp(0, bins - 1).long()
    flat = index + bins * torch.arange(rows)[:, None]
    return torch.bincount(flat.reshape(-1), None if weights is None else weights.reshape(-1),
                          minlength=rows * bins).reshape(rows, bins).double()


def entropy_windows(counts, quantized_bins):
    """The entropy rule: for each histogram row (``counts`` [rows, bins] over [-amax, amax]),
    the window of bins, ``(first, end)`` bin-edge indices [2, rows], of least KL divergence.

    It follows ONNX Runtime's ``get_entropy_threshold`` step for step, computed in closed form
    from cumulative sums, so every candidate of every row is evaluated at once:

    - Candidates are windows [zero - i, zero + i + 1) around the zero edge, i = quantized_bins / 2
      ... bins / 2 (the last one is the whole histogram): a symmetric sweep over signed values,
      so one-sided data (after ReLU) spends half the groups on its empty side, as in ORT.
    - P is the window's counts with the mass outside it folded into its first and last bins.
    - Q merges the window into ``quantized_bins`` groups of floor(width / quantized_bins) bins;
      each group's mass (the last also takes the remainder bins' mass) is divided by the number
      of non-empty P bins in it, truncated to a whole count (ORT keeps Q in an integer array,
      which empties Q bins in sparse tails) and given to every bin of the group. Remainder bins
      past the last
      group get no Q, exactly as in ORT: a window whose remainder holds mass pays for it, which
      favours windows about a multiple of ``quantized_bins`` wide.
    - Empty Q bins hold :data:`SMOOTHING` of a count (ORT smooths P and Q alike; smoothing P's
      empty bins changes the divergence by under SMOOTHING per bin and is left out).
    - The answer is the window of least KL(P || Q); ties go to the narrowest.
    """
    rows, bins = counts.shape
    zero, groups = bins // 2, quantized_bins
    half_width = torch.arange(groups // 2, zero + 1)
    start = zero - half_width
    end = torch.clamp(zero + half_width + 1, max=bins)
    group_width = (end - start) // groups
    group_edges = start[:, None] + group_width[:, None] * torch.arange(groups + 1)  # [K, G + 1]
    has_remainder = group_edges[:, -1] < end  # [K]

    def cumulative(values):
        return torch.cat([torch.zeros(rows, 1, dtype=torch.float64), torch.cumsum(values, 1)], 1)

    def between(sums, lo, hi):
        return sums[:, hi] - sums[:, lo]

    mass, filled = cumulative(counts), cumulative((counts > 0).double())
    total = mass[:, -1:]
    first_bin = counts[:, start] + mass[:, start]  # P's first bin: the window's plus all below
    last_bin = counts[:, end - 1] + total - mass[:, end]
    group_mass = between(mass, group_edges[:, :-1], group_edges[:, 1:])  # [rows, K, G]
    remainder_mass = between(mass, group_edges[:, -1], end)
    filled_bins = between(filled, group_edges[:, :-1], group_edges[:, 1:])
    filled_bins[:, :, 0] += (first_bin > 0).double() - (counts[:, start] > 0).double()
    filled_bins[:, :, -1] += torch.where(
        has_remainder, 0.0, (last_bin > 0).double() - (counts[:, end - 1] > 0).double())

    q_mass = group_mass.clone()
    q_mass[:, :, -1] += remainder_mass
    # per bin of each group, truncated to whole counts as ORT's integer array stores it
    q = torch.trunc(torch.where(filled_bins > 0, q_mass / filled_bins.clamp(min=1), 0.0))
    q_total = (q * group_width[:, None]).sum(2)

    p_group = group_mass.clone()
    p_group[:, :, 0] += mass[:, start]
    p_group[:, :, -1] += torch.where(has_remainder, 0.0, total - mass[:, end])
    p_remainder = remainder_mass + torch.where(has_remainder, total - mass[:, end], 0.0)
    log_q = torch.log(torch.where(q > 0, q, SMOOTHING))
    cross = (p_group * log_q).sum(2) + p_remainder * torch.log(torch.tensor(SMOOTHING))

    p_log_p = between(cumulative(torch.xlogy(counts, counts)), start, end)
    for window_bin, p_bin in ((counts[:, start], first_bin), (counts[:, end - 1], last_bin)):
        p_log_p += torch.xlogy(p_bin, p_bin) - torch.xlogy(window_bin, window_bin)

    divergence = (p_log_p - cross) / total - torch.log(total) + torch.log(q_total)
    divergence = torch.where(q_total > 0, divergence, torch.inf)
    best = divergence.argmin(1)
    return torch.stack([start[best], end[best]]).double()
