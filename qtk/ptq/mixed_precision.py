"""Automatic mixed precision: the fewest layers to keep in float (or at 8 bits) for a quantized
model to meet an accuracy target (``qtk.auto_mixed_precision``)."""
import copy
import dataclasses
import itertools
from typing import List, Optional

from tqdm import tqdm

from ..fake_quant import FakeQuantize
from ..qconfig import QConfigMapping, bits_qconfig, default_ptq_qconfig
from ..quantize import calibrate, convert, prepare_ptq
from .layer_switch import LayerSwitch
from .sensitivity import SensitivityReport, Sqnr, input_batches, layer_sensitivity, run

METRICS = ("sqnr", "agreement")


@dataclasses.dataclass
class MixedPrecisionReport:
    """What :func:`qtk.auto_mixed_precision` chose and what the Quantized reference achieves.

    Args:
        kept: the layers kept in float (or at 8 bits with ``low_bits``), most sensitive first.
        metric: ``"sqnr"`` (dB) or ``"agreement"`` (top-1 fraction), against the float model.
        target: the value asked for.
        achieved: the metric of the returned model, converted.
        all_quantized: the metric with every layer quantized, converted.
        sensitivity: the analysis that ordered the layers (None when no layer had to be kept).
        low_bits: the other layers' bit width, or None (they are int8, ``kept`` is float).
    """
    kept: List[str]
    metric: str
    target: float
    achieved: float
    all_quantized: float
    sensitivity: Optional[SensitivityReport] = None
    low_bits: Optional[int] = None

    def __str__(self):
        unit = " dB" if self.metric == "sqnr" else ""
        where = "in float" if self.low_bits is None else "at 8 bits"
        rest = "int8" if self.low_bits is None else f"{self.low_bits} bits"
        lines = [f"{self.metric} target {self.target:g}{unit}: all layers at {rest} "
                 f"{self.all_quantized:.4g}{unit}, {len(self.kept)} layer(s) kept {where} "
                 f"{self.achieved:.4g}{unit}"]
        return "\n".join(lines + [f"  {name}" for name in self.kept])


def auto_mixed_precision(model, data, target, metric="sqnr", method=None, low_bits=None,
                         num_batches=None, qconfig=None, validation_data=None):
    """Keep the fewest layers of ``model`` in float (with ``low_bits``: at 8 bits while the others
    get ``low_bits``) for its PTQ model to meet ``target`` on ``data`` (or on
    ``validation_data``).

    With every layer quantized meeting the target, no layer is kept. Otherwise
    :func:`qtk.ptq.sensitivity` orders the layers; the most sensitive are kept one by one until
    the target is met, then each kept layer is dropped again where the target holds without it,
    and any two kept layers are traded for one other where it holds (while a round of such
    trades is at most 64 checks), all in fake quantization. The model is calibrated once (with
    ``low_bits``, once more at 8 bits) and each choice switches fake quantization on it
    (:class:`LayerSwitch`). The Quantized
    reference of the choice (:func:`qtk.convert`), which is what deploys, is then measured; where
    it misses the target, the next most sensitive layers are kept until it meets it, and that
    choice is pruned and traded as above by the Quantized reference's own score. That model
    is a real :func:`qtk.prepare_ptq` of the mapping; its observers are copied from the calibrated
    ones where no layer is float (the same statistics, exactly), and calibrated again otherwise
    (a float layer computes its BatchNorm unfolded, so what follows it differs by float rounding).

    Args:
        model: a trained float ``nn.Module``, put in eval mode (prepare copies it).
        data: calibration and evaluation batches, as for :func:`qtk.calibrate` (read once).
        target: the least metric to reach: SQNR in dB of the network output against the float
            model's, or the fraction of inputs whose top-1 class (argmax over dim 1) is the float
            model's.
        metric: ``"sqnr"`` or ``"agreement"``.
        method: the calibration method (:func:`qtk.calibrate`).
        low_bits: quantize the layers not kept at this many bits (weights and activations,
            :func:`qtk.bits_qconfig`) and the kept ones at 8, instead of keeping those in float.
        num_batches: use the first ``num_batches`` batches of ``data``.
        qconfig: the int8 :class:`qtk.QConfig` (default :data:`qtk.default_ptq_qconfig`);
            ``low_bits`` narrows it.
        validation_data: batches, not seen by calibration, on which the target, the sensitivity
            and every choice are measured (default: ``data``). The target is met on the inputs
            it is measured on, and may be missed on others (CRAFT: 30.8 dB on its calibration
            crops, 25.7 on the test crops; ``docs/quantizers.md``).
    Returns:
        ``(prepared, report)``: the model prepared with the chosen :class:`qtk.QConfigMapping`
        and calibrated on ``data``, ready for :func:`qtk.convert` and :func:`qtk.export` like any
        mixed model, and a :class:`MixedPrecisionReport`.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
    qconfig = qconfig or default_ptq_qconfig
    quantized = qconfig if low_bits is None else bits_qconfig(low_bits, low_bits, base=qconfig)
    kept_as = None if low_bits is None else qconfig
    inputs = input_batches(data, num_batches)
    checks = inputs if validation_data is None else input_batches(validation_data,
                                                                 name="validation_data")
    reference = run(model.eval(), checks)
    score = _SCORES[metric]
    with tqdm(desc="mixed precision search", unit="model") as progress:
        switch = LayerSwitch(model, quantized, inputs, method)
        switches = [switch]  # with low_bits, and a layer to keep: the same model at 8 bits too

        def calibrated(kept):
            mapping = QConfigMapping(quantized, by_name=dict.fromkeys(kept, kept_as))
            prepared = prepare_ptq(model, mapping)
            if low_bits is None and kept:  # after a float layer (BatchNorm unfolded) values differ
                return calibrate(prepared, inputs, method=method)
            return _with_observers_of(prepared, switches) or calibrate(prepared, inputs,
                                                                        method=method)

        def fake_quant_score(kept):
            if low_bits is None:
                prepared = switch.use(float_layers=kept)
            else:
                prepared = switch.use(other=switches[-1], from_other=kept)
            progress.update()
            return score(reference, run(prepared, checks))

        def deployed_score(prepared):
            progress.update()
            return score(reference, run(convert(prepared), checks))

        prepared = calibrated([])
        all_quantized = achieved = deployed_score(prepared)
        report = MixedPrecisionReport([], metric, target, achieved, all_quantized, None, low_bits)
        if all_quantized >= target:
            return prepared, report
        if low_bits is not None:
            switches.append(LayerSwitch(model, qconfig, inputs, method))
        report.sensitivity = layer_sensitivity(switch, checks, reference, progress)
        order = report.sensitivity.names
        kept = _fewest(order, lambda kept: fake_quant_score(kept) >= target)
        prepared = calibrated(kept)
        achieved = deployed_score(prepared)
        missed = achieved < target
        for name in [name for name in order if name not in kept]:
            if achieved >= target:
                break
            kept.append(name)  # the Quantized reference missed it: keep the next layer too
            prepared = calibrated(kept)
            achieved = deployed_score(prepared)
        if missed and achieved >= target:  # prune what that added by the reference's own score
            kept = _pruned(kept, order,
                           lambda kept: deployed_score(calibrated(kept)) >= target)
            prepared = calibrated(kept)
            achieved = deployed_score(prepared)
    report.kept, report.achieved = kept, achieved
    return prepared, report


def _with_observers_of(prepared, switches):
    """``prepared`` (no layer float) with each fake quantizer's observer copied from the
    quantizer of the same name and range in a calibrated :class:`LayerSwitch`: their observers saw
    the float model's values, which is what a calibration of ``prepared`` shows them, so this is
    that calibration, exactly. None where a quantizer has no such twin."""
    calibrated = [dict(switch.use().named_modules()) for switch in switches]  # their own layers
    for name, quantizer in prepared.named_modules():
        if isinstance(quantizer, FakeQuantize):
            twins = [modules[name] for modules in calibrated if _same_quantizer(
                modules.get(name), quantizer)]
            if not twins:
                return None
            quantizer.observer = copy.deepcopy(twins[0].observer)
    return prepared


def _same_quantizer(calibrated, fresh):
    """Same kind of quantizer with the same range: its observer gives ``fresh`` its qparams."""
    def range_of(quantizer):
        observer = quantizer.observer
        return observer.qmin, observer.qmax, observer.ch_axis, observer.symmetric
    return type(calibrated) is type(fresh) and range_of(calibrated) == range_of(fresh)


def _fewest(order, meets):
    """Greedy: keep layers in ``order`` until ``meets(kept)``, then :func:`_pruned`. The result
    meets it (if keeping all layers does)."""
    kept = []
    for name in order:
        kept.append(name)
        if meets(kept):
            break
    return _pruned(kept, order, meets)


def _pruned(kept, order, meets, max_trades=64):
    """``kept`` (which meets) less each layer whose removal still meets it; then any two kept
    layers traded for one other layer of ``order`` where that still meets it, while a round of
    such trades is at most ``max_trades`` checks. So no single kept layer can go and (where tried)
    no two can become one: ``order`` ranks layers alone, and one that matters only beside another
    ranks low (a small CNN at w4a4, whose Quantized reference missed the target with the one
    layer fake quantization chose and met it with the next two kept too, met it with its first
    and last layer)."""
    for name in list(kept):
        fewer = [other for other in kept if other != name]
        if meets(fewer):
            kept = fewer
    while len(kept) >= 2:
        others = [name for name in order if name not in kept]
        pairs = list(itertools.combinations(kept, 2))
        if len(pairs) * len(others) > max_trades:
            break
        trades = ([name for name in order if name in kept and name not in pair] + [other]
                  for pair in pairs for other in others)
        traded = next((trade for trade in trades if meets(trade)), None)
        if traded is None:
            break
        kept = traded
    return kept


def _sqnr(reference, outputs):
    sqnr = Sqnr()
    for expected, actual in zip(reference, outputs):
        sqnr.add(expected, actual)
    return sqnr.db


def _agreement(reference, outputs):
    same = sum(int((e.argmax(1) == a.argmax(1)).sum()) for e, a in zip(reference, outputs))
    return same / sum(e.shape[0] for e in reference)


_SCORES = {"sqnr": _sqnr, "agreement": _agreement}
