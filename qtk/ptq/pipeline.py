"""PTQ in one call (``qtk.quantize_ptq``): the steps of this package in the order they compose."""
import itertools

from ..qconfig import default_ptq_qconfig, per_channel_activations
from ..quantize import calibrate, prepare_ptq
from .adaround import adaround as learn_rounding
from .equalization import equalize as equalize_layers
from .mixed_precision import auto_mixed_precision


def quantize_ptq(model, data, method="percentile", equalize=False, adaround=False,
                 adaround_time_budget_s=None, target=None, metric="sqnr", num_batches=None,
                 qconfig=None):
    """Post-training quantization of a trained float model in one call, as
    :func:`qtk.quantize_qat` is for QAT: the result goes to :func:`qtk.convert`, then
    :func:`qtk.export`.

    The steps, each optional but the calibration:

    1. ``equalize``: cross-layer equalization with bias absorption (:func:`qtk.ptq.equalize`).
       Off by default: with qtk's per-channel weights it balances little that matters, and it
       moved the output SQNR of the study's networks by -2.7 to 0 dB (``docs/ptq.md``).
    2. ``target``: keep the fewest layers in float for the Quantized model to reach ``target``
       (:func:`qtk.auto_mixed_precision`; its report is the result's
       ``qtk_mixed_precision`` attribute); otherwise every layer is quantized.
    3. calibration of the activation ranges with ``method`` (:func:`qtk.calibrate`).
    4. ``adaround``: learned weight rounding (:func:`qtk.ptq.adaround`), within
       ``adaround_time_budget_s`` seconds if given.

    Args:
        model: a trained float ``nn.Module`` (copied, not changed).
        data: calibration batches (tensors or ``(input, ...)`` tuples); held in memory.
        method: ``"minmax"``, ``"percentile"``, ``"mse"`` or ``"kl"``.
        metric: what ``target`` measures: ``"sqnr"`` (dB) or ``"agreement"`` (top-1 fraction).
        num_batches: use the first ``num_batches`` batches of ``data``.
        qconfig: the :class:`qtk.QConfig` or :class:`qtk.QConfigMapping`; default
            :data:`qtk.default_ptq_qconfig` with the outputs that depthwise convolutions read
            quantized per channel (:func:`qtk.per_channel_activations`, spec 25).
    Returns:
        the prepared, calibrated model.
    """
    qconfig = qconfig or per_channel_activations(default_ptq_qconfig)
    batches = [batch[0] if isinstance(batch, (tuple, list)) else batch
               for batch in itertools.islice(data, num_batches)]
    if equalize:
        model = equalize_layers(model, batches[0][:1])
    if target is None:
        prepared = calibrate(prepare_ptq(model, qconfig, example_inputs=(batches[0][:1],)),
                             batches, method=method)
    else:
        prepared, report = auto_mixed_precision(model, batches, target, metric, method,
                                                qconfig=qconfig)
        prepared.qtk_mixed_precision = report
    if adaround:
        learn_rounding(prepared, batches, time_budget_s=adaround_time_budget_s)
    return prepared
