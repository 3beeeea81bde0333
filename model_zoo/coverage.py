"""Model coverage: every torchvision classification and segmentation model, and the deployable
trunk of every detection model (backbone and dense head), through PTQ, convert, export and the
runtime, with random weights (BatchNorm statistics re-estimated on random data).
Rewrites docs/coverage.md: per model, whether it deploys, the share of its multiply-accumulates in
int8 (qtk.report), whether the runtime's int8 output equals the Quantized reference byte for byte,
and the .qmodel's size.

    python -m model_zoo.coverage                 # every model (about an hour on 2 cores)
    python -m model_zoo.coverage --models resnet18 vit_b_16
"""
import argparse
import signal
import textwrap
import time
import traceback
import warnings
from pathlib import Path

import torch
import torchvision
from torch import nn

import qtk
from benchmarks.peers import cpu_description
from model_zoo.training import reestimate_batchnorm

DOC = Path(__file__).resolve().parent.parent / "docs" / "coverage.md"
FIXED_224 = ("vit_", "swin", "maxvit", "vgg", "alexnet")  # their input size is part of the model
SECONDS_PER_MODEL = 600


SEGMENTATION = torchvision.models.list_models(module=torchvision.models.segmentation)
DETECTION = torchvision.models.list_models(module=torchvision.models.detection)


def input_size(name):
    if name.startswith("inception"):
        return 299
    if name in DETECTION:
        return 300 if name.startswith("ssd300") else 320 if "320" in name else 256
    return 224 if name.startswith(FIXED_224) else 112


def _tensors(value):
    """Every tensor of a nested output (dicts, lists, tuples), in order (traced ones too)."""
    if not isinstance(value, (dict, list, tuple)):
        return [value]
    values = value.values() if isinstance(value, dict) else value
    return [t for v in values for t in _tensors(v)]


class DetectionTrunk(nn.Module):
    """What of a detector deploys: its backbone and dense head (RetinaNet's, FCOS's and SSD's
    head; the R-CNNs' region proposal head), returning the features and the head's outputs. Box
    decoding, NMS and the R-CNNs' RoI heads stay in Python."""

    def __init__(self, detector):
        super().__init__()
        self.backbone = detector.backbone
        self.head = detector.head if hasattr(detector, "head") else detector.rpn.head

    def forward(self, x):
        features = _tensors(self.backbone(x))
        return tuple(features) + tuple(_tensors(self.head(features)))


def build(name):
    if name in SEGMENTATION:
        return torchvision.models.get_model(name, weights=None, weights_backbone=None,
                                            num_classes=21, aux_loss=False)
    if name in DETECTION:
        return DetectionTrunk(torchvision.models.get_model(name, weights=None,
                                                           weights_backbone=None))
    return torchvision.models.get_model(name, weights=None)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _randomize_zero_weights(model):
    """torchvision starts some layers at zero (ViT's head, zero_init_residual): their outputs
    would be one value, and 'byte-identical' would hold trivially."""
    with torch.no_grad():
        for module in model.modules():
            weight = getattr(module, "weight", None)
            if isinstance(weight, nn.Parameter) and weight.dim() >= 2 and not weight.any():
                weight.normal_(0, 0.02)
    return model


DISTINCT_OUTPUTS = 16  # fewer distinct int8 output values than this: a degenerate comparison


def run(name, row):
    """Fills ``row`` (status, int8 MAC share, .qmodel bytes) of one model as each step passes, so
    a model that fails late keeps its MAC share."""
    torch.manual_seed(0)
    size = input_size(name)
    model = reestimate_batchnorm(_randomize_zero_weights(build(name)), (2, 3, size, size),
                                 batches=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qtk.FloatFallbackWarning)
        prepared = qtk.prepare_ptq(model, example_inputs=torch.randn(1, 3, size, size))
    row["share"] = qtk.report(prepared, torch.randn(1, 3, size, size)).int8_mac_share
    with torch.no_grad():
        for _ in range(2):
            prepared(torch.randn(2, 3, size, size))
    quantized = qtk.convert(prepared)
    data = qtk.export(quantized, torch.randn(1, 3, size, size))
    row["size"] = len(data)
    session = qtk.runtime.load(data, threads=2)
    x = torch.randn(1, 3, size, size)
    with qtk.int8_outputs(quantized), torch.no_grad():
        references = _tensors(quantized(x))
    runtimes = _tensors(session.run(x, output="int8"))
    distinct = len(torch.unique(torch.cat([r.float().reshape(-1) for r in references])))
    differing = sum(int((r != t).sum()) for r, t in zip(references, runtimes))
    total = sum(r.numel() for r in references)
    if distinct < DISTINCT_OUTPUTS:
        status = f"degenerate output ({distinct} distinct values)"
    elif differing == 0:
        status = "byte-identical"
    else:  # float parts inside: compare the deployment's error with quantization's own
        with torch.no_grad():
            expected, reference = _tensors(model(x)), _tensors(quantized(x))
        deployed = _largest_difference(_tensors(session.run(x)), reference)
        quantization = _largest_difference(reference, expected)
        verdict = "within tolerance" if deployed <= quantization else "outside tolerance"
        status = (f"{verdict}: {differing} of {total} int8 outputs differ, by up to "
                  f"{deployed:.2g} against the int8 model's {quantization:.2g} from float")
    row["status"] = status


def _largest_difference(a, b):
    return max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b))


def first_line(error):
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    return text[:160].replace("|", "/")


INTRO = (
    "Every torchvision classification, segmentation and detection model with random weights "
    "(BatchNorm statistics re-estimated on random data, zero-initialized layers made random), "
    "through `qtk.prepare_ptq` with default settings and `example_inputs`, two calibration "
    "batches, `qtk.convert`, `qtk.export` and the runtime at 2 threads, batch 1 (224x224 where "
    "the model fixes its input size, 299 for Inception, 256 to 320 for detection, else 112). "
    "*int8 MACs* is `qtk.report`'s share of multiply-accumulates in int8; *result* compares the "
    "runtime's int8 output with the Quantized reference: *byte-identical* where every op is "
    "int8; where float parts remain (spec 15), *within tolerance* when the runtime's dequantized "
    "output is no farther from the Quantized model's than that is from the float model's. "
    "*refused* is a clear qtk error; *crashed* is any other error, a bug to fix. Detection models "
    "deploy their backbone and dense head. Regenerate with `python -m model_zoo.coverage`.")


def write_document(rows, cpu):
    deployed = sum(row["status"].startswith(("byte-identical", "within tolerance"))
                   for _, row in rows)
    lines = ["# Model coverage", "", textwrap.fill(INTRO, 100), "",
             f"Run on {cpu}: **{deployed} of {len(rows)} models deploy.**", "",
             "| model | result | int8 MACs | .qmodel |", "|---|---|---:|---:|"]
    for name, row in rows:
        share_text = "" if row["share"] is None else f"{100 * row['share']:.1f}%"
        size_text = "" if row["size"] is None else f"{row['size'] / 2**20:.1f} MiB"
        lines.append(f"| {name} | {row['status']} | {share_text} | {size_text} |")
    DOC.write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="only these (default: all)")
    args = parser.parse_args()
    names = args.models or (torchvision.models.list_models(module=torchvision.models)
                            + SEGMENTATION + DETECTION)
    torch.set_num_threads(2)
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    for name in names:
        start = time.time()
        signal.alarm(SECONDS_PER_MODEL)
        row = {"status": "", "share": None, "size": None}
        try:
            run(name, row)
        except _Timeout:
            row["status"] = f"not finished in {SECONDS_PER_MODEL} s"
        except (qtk.UnsupportedOpError, qtk.arithmetic.NonFiniteRangeError,
                qtk.QtkError) as error:  # a clear refusal
            row["status"] = f"refused: {first_line(error)}"
        except Exception as error:  # a row per model, whatever fails
            row["status"] = f"crashed: {first_line(error)}"  # a bug: a clear error is owed
            traceback.print_exc()
        finally:
            signal.alarm(0)
        rows.append((name, row))
        print(f"{name}: {row['status']} ({time.time() - start:.0f} s)", flush=True)
        write_document(rows, cpu_description())


if __name__ == "__main__":
    main()
