"""PTQ in one call (``qtk.quantize_ptq``): the steps of this package in the order they compose."""
import copy

from ..fake_quant import FakeQuantize
from ..observers import HistogramObserver
from ..qconfig import default_ptq_qconfig, per_channel_activations
from ..quantize import calibrate, prepare_ptq
from .adaround import adaround as learn_rounding, fake_quantized_as_converted
from .bias_correction import correct_biases
from .equalization import equalize as equalize_layers
from .mixed_precision import _sqnr, auto_mixed_precision
from .sensitivity import input_batches, run

# What method="auto" tries. KL is left out: on none of docs/ptq.md's networks was it the best
# rule, and its sweep per channel is the slowest to compute (38 s on PP-LCNet).
AUTO_METHODS = ("percentile", "mse", "minmax")


def quantize_ptq(model, data, method="auto", equalize=False, adaround=False,
                 adaround_time_budget_s=None, target=None, metric="sqnr", num_batches=None,
                 qconfig=None, validation_data=None, bias_correction=False):
    """Post-training quantization of a trained float model in one call, as
    :func:`qtk.quantize_qat` is for QAT: the result goes to :func:`qtk.convert`, then
    :func:`qtk.export`.

    The steps, each optional but the calibration, in the order they compose. A step that is
    asked for but makes the model (in fake quantization) farther from the float model on
    ``data`` (or on ``validation_data``) is undone: equalization and AdaRound optimize proxies
    (weight ranges, each layer's own output), which need not be the network output.

    1. ``equalize``: cross-layer equalization with bias absorption (:func:`qtk.ptq.equalize`),
       kept if the equalized model calibrates closer to float (the result's ``qtk_equalized``).
       Off by default: with qtk's per-channel weights it balances little that matters, and it
       moved the output SQNR of the study's networks by -2.7 to 0 dB (``docs/ptq.md``).
    2. calibration of the activation ranges with ``method`` (:func:`qtk.calibrate`); ``"auto"``
       collects one histogram per activation and keeps the rule of :data:`AUTO_METHODS` whose
       model (in fake quantization) is closest to the float model by output SQNR, with the
       ranges fitted to the other batches of ``data`` and measured on each fold in turn, in up
       to four folds (:func:`held_out_scores`), or measured on ``validation_data`` (the result's
       ``qtk_calibration_scores``: dB per rule).
    3. ``target``: keep the fewest layers in float for the Quantized model to reach ``target``
       (:func:`qtk.auto_mixed_precision`, calibrated by the rule step 2 chose; its report is the
       result's ``qtk_mixed_precision`` attribute); otherwise every layer is quantized.
    4. ``adaround``: learned weight rounding (:func:`qtk.ptq.adaround`), within
       ``adaround_time_budget_s`` seconds if given, kept if it brings the model closer to float
       (the result's ``qtk_adaround_kept``).
    5. ``bias_correction``: empirical bias correction (:func:`qtk.ptq.correct_biases`; not
       :func:`qtk.calibrate`'s, which corrects the weights' error alone), each layer's mean
       output error moved into its bias, kept if the ranges and corrections fitted to the
       other batches of ``data`` bring each fold closer to float, pooled over the folds of
       :func:`held_out_folds` (or if it brings ``validation_data`` closer), measured on the
       calibrated model without steps 3 and 4. Off by default: fitted to all of PP-LCNet's
       calibration photos it raised the one call on the test photos from 20.8 to 22.8 dB, but
       fitted to either half it lowered the other (22.4 -> 20.7, 20.9 -> 20.3 dB; measured when
       the check had two folds), so the check undoes it there; on MTCNN RNet it lowered the
       test faces' 33.9 to 32.9 dB with percentile ranges (result's ``qtk_bias_corrected``).

    Args:
        model: a trained float ``nn.Module`` (copied, not changed).
        data: calibration batches (tensors or ``(input, ...)`` tuples); held in memory.
        method: ``"auto"``, ``"minmax"``, ``"percentile"``, ``"mse"`` or ``"kl"``.
        metric: what ``target`` measures: ``"sqnr"`` (dB) or ``"agreement"`` (top-1 fraction).
        num_batches: use the first ``num_batches`` batches of ``data``.
        qconfig: the :class:`qtk.QConfig` or :class:`qtk.QConfigMapping`; default
            :data:`qtk.default_ptq_qconfig` with the outputs that depthwise convolutions read
            quantized per channel (:func:`qtk.per_channel_activations`, spec 25).
        validation_data: batches not used for calibration or AdaRound, on which every choice
            above (the rule, keeping equalization, AdaRound or the bias correction, the target) is
            measured instead of ``data``: each step fits the calibration inputs, so measuring it
            there favours it (on MTCNN RNet, AdaRound raised the calibration SQNR and lowered the
            test one).
    Returns:
        the prepared, calibrated model.
    """
    qconfig = qconfig or per_channel_activations(default_ptq_qconfig)
    batches = input_batches(data, num_batches)
    checks = batches if validation_data is None else input_batches(validation_data,
                                                                 name="validation_data")
    reference = run(model.eval(), checks)
    candidates = [model] + ([equalize_layers(model, batches[0][:1])] if equalize else [])
    calibrated = [_calibrated(candidate, qconfig, batches, method, checks, reference)
                  for candidate in candidates]
    best = max(range(len(candidates)), key=lambda i: calibrated[i][2])
    model, (prepared, method, score, scores) = candidates[best], calibrated[best]
    if target is not None:
        prepared, report = auto_mixed_precision(model, batches, target, metric, method,
                                                qconfig=qconfig, validation_data=checks)
        prepared.qtk_mixed_precision = report
        score = _score(prepared, checks, reference)
    adaround_kept, unrounded = None, prepared
    if adaround:
        rounded = learn_rounding(copy.deepcopy(prepared), batches,
                                 time_budget_s=adaround_time_budget_s)
        adaround_kept = _score(rounded, checks, reference) > score
        if adaround_kept:
            prepared = rounded
    bias_corrected = None
    if bias_correction:
        bias_corrected = _bias_correction_helps(model, qconfig, batches, method, checks,
                                                reference)
        if bias_corrected:
            prepared = correct_biases(prepared, batches, progress=False, float_model=unrounded)
    prepared.qtk_calibration_scores = scores
    prepared.qtk_equalized = best == 1 if equalize else None
    prepared.qtk_adaround_kept = adaround_kept
    prepared.qtk_bias_corrected = bias_corrected
    return prepared


def _bias_correction_helps(model, qconfig, batches, method, checks, reference):
    """Whether correcting the biases brings the quantized model closer to float on inputs the
    corrections were not fitted to: on ``checks`` when they are not ``batches``, else on the
    :func:`held_out_folds` of ``batches``, pooled (a single batch is fitted and measured alike)."""
    splits = ([(batches, checks, reference)] if checks is not batches or len(batches) < 2 else
              held_out_folds(batches, reference))
    expected, plain, corrected = [], [], []
    for fitted, measured, measured_reference in splits:
        prepared = _histograms(model, qconfig, fitted, method)
        expected += measured_reference
        plain += _quantized_outputs(prepared, measured)
        corrected += _quantized_outputs(correct_biases(prepared, fitted, progress=False),
                                        measured)
    return _sqnr(expected, corrected) > _sqnr(expected, plain)


def _calibrated(model, qconfig, batches, method, checks, reference):
    """(prepared and calibrated on ``batches``, the rule used, its output SQNR on ``checks``, the
    SQNR of each rule tried or None)."""
    prepared = _histograms(model, qconfig, batches, method)
    if method != "auto":
        return prepared, method, _score(prepared, checks, reference), None
    if checks is batches and len(batches) >= 2:
        scores = held_out_scores(model, qconfig, batches, reference)
        method = max(scores, key=scores.get)
        _set_rule(prepared, method)
        return prepared, method, _score(prepared, checks, reference), scores
    method, scores = best_calibration_method(prepared, checks, reference)
    return prepared, method, scores[method], scores


def _histograms(model, qconfig, batches, method="auto"):
    """``model`` prepared and calibrated on ``batches`` by ``method`` (histograms for "auto")."""
    return calibrate(prepare_ptq(model, qconfig, example_inputs=(batches[0][:1],)), batches,
                     method="percentile" if method == "auto" else method)


# Folds of held_out_scores, each fitted to the batches of the others (3/4 of them with 4 batches
# or more; CRAFT's 3 make 3 folds of 2/3). Fitted to half (two folds), CRAFT's rules ranked
# min/max first, while fitted to all its calibration crops MSE came closest to float on the test
# crops (26.4 dB, min/max 25.0). Each fold costs a calibration: four, not leave-one-out.
HELD_OUT_FOLDS = 4


def held_out_folds(batches, reference):
    """[(batches fitted, batches measured, the float outputs of those measured)]: batch ``i`` is
    measured in fold ``i % folds`` and fitted in the others, ``folds`` =
    min(:data:`HELD_OUT_FOLDS`, len(batches)). ``reference[i]`` is batch ``i``'s float output;
    two batches or more."""
    if len(batches) < 2:
        raise ValueError(f"held-out folds need 2 batches or more, got {len(batches)}")
    folds = min(HELD_OUT_FOLDS, len(batches))
    return [([b for i, b in enumerate(batches) if i % folds != fold], batches[fold::folds],
             reference[fold::folds]) for fold in range(folds)]


def held_out_scores(model, qconfig, batches, reference, methods=AUTO_METHODS):
    """{rule: output SQNR} of each rule with the ranges fitted to the other batches and measured
    on each fold of :func:`held_out_folds`, pooled. Measured on the inputs the ranges were
    fitted to, min/max never clips and so scores above the rules that clip a rare extreme: on
    MTCNN RNet it won there (34.6 dB, percentile 34.2) and came last on the test faces (30.3
    against percentile's 33.9)."""
    expected, outputs = [], {method: [] for method in methods}
    for fitted, measured, measured_reference in held_out_folds(batches, reference):
        prepared = _histograms(model, qconfig, fitted)
        expected += measured_reference
        for method in methods:
            _set_rule(prepared, method)
            outputs[method] += _quantized_outputs(prepared, measured)
    return {method: _sqnr(expected, outputs[method]) for method in methods}


def _quantized_outputs(prepared, inputs):
    """``prepared``'s outputs on ``inputs`` in fake quantization as converted."""
    with fake_quantized_as_converted(prepared):
        return run(prepared, inputs)


def _score(prepared, inputs, reference):
    """Output SQNR (dB) against the float outputs, in fake quantization as converted."""
    return _sqnr(reference, _quantized_outputs(prepared, inputs))


def best_calibration_method(prepared, inputs, reference, methods=AUTO_METHODS):
    """The activation rule of ``methods`` under which ``prepared`` (calibrated with histogram
    observers) is closest to the float outputs ``reference`` on ``inputs``, by output SQNR in
    fake quantization; the observers are left on it. Returns (method, {method: dB})."""
    scores = {}
    for method in methods:
        _set_rule(prepared, method)
        scores[method] = _score(prepared, inputs, reference)
    best = max(scores, key=scores.get)
    _set_rule(prepared, best)
    return best, scores


def _set_rule(prepared, method):
    """Every activation histogram of ``prepared`` reads its range by ``method``."""
    weights = {id(m.weight_fake_quant) for m in prepared.modules()
               if hasattr(m, "weight_fake_quant")}
    for m in prepared.modules():
        if (isinstance(m, FakeQuantize) and id(m) not in weights
                and isinstance(m.observer, HistogramObserver)):
            m.observer.method = method
