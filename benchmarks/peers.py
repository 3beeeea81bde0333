"""qtk against the peers, side by side in one process: latency of torchvision models at batch 1.

    python -m benchmarks.peers [--models resnet18 mobilenet_v2 ...] [--threads 1 2] [--runs 50]
                               [--json benchmarks/results/peers-<cpu>.json]

Engines: qtk int8 (its default kernel choice, and Fast-Run; on a CPU with AMX also capped at
AVX-512 VNNI by QTK_ISA), qtk fp32 (the float model exported as is), PyTorch fp32 and int8 (FX
graph mode PTQ, 'x86' backend), ONNX Runtime fp32 and int8 (static QDQ, per-channel weights) and
OpenVINO fp32 (pinned to f32 arithmetic), bf16 (its default on CPUs with bf16 units) and int8
(NNCF PTQ). Every model has random weights with BatchNorm statistics re-estimated on random data
(so activations are not degenerate), and every int8 engine calibrates on the same random batches.
Peers that are not installed are reported as missing, not silently dropped.

Timing: each engine warms up, then the engines take turns of 10 runs (interleaved), so drift on
a shared machine hits all of them alike, each turn starting once the previous engine's worker
threads have stopped spinning; the table shows the median and the ratio to
qtk int8. Peak RSS is measured per engine in a fresh child process that imports only that engine,
loads its deployable file (.qmodel, .onnx, OpenVINO IR) and runs it.

The report goes under a heading per CPU (its model name, int8 units and core count) in the
generated section of benchmarks/README.md: a run replaces its own CPU's results and keeps the
others'. It names the ISA each engine's kernels used, as far as the engine says.
"""
import argparse
import collections
import contextlib
import copy
import datetime
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

import qtk
from qtk import _C
from benchmarks.charts import peers_chart
from model_zoo.training import reestimate_batchnorm

SIZE = 224
CALIBRATION_BATCHES = 8


def _inputs(count, seed):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 3, SIZE, SIZE, generator=generator) for _ in range(count)]


def float_model(name):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    return reestimate_batchnorm(model, (8, 3, SIZE, SIZE))


# ---- engines: build(float model, calibration inputs, workdir, threads) -> (run(x), file, isa) ----
# isa: what the engine says of the instruction sets its kernels used, for this model: a Counter of
# kernel labels, or a sentence where it says nothing per layer.

# qtk's algorithm names end in the ISA their kernels need (deploy_runtime/kernels/); the rest are
# portable C++.
QTK_ISA_SUFFIXES = ("amx_int8", "avx512_vnni", "avx_vnni", "avx512", "avx2")


def qtk_isa(session):
    """Counter of the ISA of each node's kernel, read off its algorithm's name."""
    return collections.Counter(
        next((isa for isa in QTK_ISA_SUFFIXES if algorithm.endswith("_" + isa)), "scalar")
        for algorithm in session.algorithms)


def _qmodel_file(model, calibration, workdir, qconfig=None):
    path = os.path.join(workdir, "model.qmodel")
    if not os.path.exists(path):
        prepared = qtk.prepare_ptq(model, qconfig)
        qtk.calibrate(prepared, calibration)
        qtk.export(qtk.convert(prepared), calibration[0], path)
    return path


def qtk_int8(model, calibration, workdir, threads):
    path = _qmodel_file(model, calibration, workdir)
    session = qtk.runtime.load(path, threads=threads)
    return session.run, path, qtk_isa(session)


def qtk_int8_per_channel(model, calibration, workdir, threads):
    """The activations that depthwise convs read quantized per channel, as qtk.quantize_ptq does
    (spec 25): what its accuracy costs in speed."""
    path = _qmodel_file(model, calibration, workdir,
                        qtk.per_channel_activations(qtk.default_ptq_qconfig))
    session = qtk.runtime.load(path, threads=threads)
    return session.run, path, qtk_isa(session)


def qtk_int8_fast_run(model, calibration, workdir, threads):
    """Fast-Run: each layer's algorithm timed on this machine, cached beside the model."""
    path = _qmodel_file(model, calibration, workdir)
    session = qtk.runtime.load(path, threads=threads, fast_run="search",
                               fast_run_cache=os.path.join(workdir, "fastrun.cache"))
    return session.run, path, qtk_isa(session)


def qtk_fp32(model, calibration, workdir, threads):
    """The float model exported as is (qtk.export of an unquantized model)."""
    path = os.path.join(workdir, "float.qmodel")
    qtk.export(model.eval(), calibration[0], path)
    session = qtk.runtime.load(path, threads=threads)
    return session.run, path, qtk_isa(session)


def qtk_details(path, threads, inputs, runs=20, warmup=5):
    """From a profiled qtk session: the conv layers' multiply-accumulates per second, their share
    of this CPU's measured int8 peak (int8_peak_name: one core's, times the threads), and the
    memory plan. The first `warmup` runs are not counted: a new session's first runs fault in its
    arena and wake its threads (resnet18 at 2 threads on a Zen 4: 66% of the peak counting them
    among 20 runs, 84% after 5 warm-up runs)."""
    session = qtk.runtime.load(path, threads=threads, profile=True)

    def conv_seconds():
        return sum(n["seconds"] for n in session.profile() if n["op"] == "conv2d")

    for i in range(warmup):
        session.run(inputs[i % len(inputs)])
    before = conv_seconds()
    for i in range(runs):
        session.run(inputs[i % len(inputs)])
    macs = sum(n["macs"] for n in session.profile() if n["op"] == "conv2d")
    macs_per_second = macs * runs / (conv_seconds() - before)
    peak = _C.measure_int8_peak(0.3) * threads
    return {f"conv_gmacs_{threads}t": macs_per_second / 1e9,
            f"conv_share_of_int8_peak_{threads}t": macs_per_second / peak if peak else None,
            "arena_kib": session.arena_bytes / 1024,
            "arena_lower_bound_kib": session.arena_lower_bound / 1024}


def torch_fp32(model, calibration, workdir, threads):
    model = copy.deepcopy(model).eval()

    def run(x):
        torch.set_num_threads(threads)
        with torch.no_grad():
            return model(x)
    return run, None, (f"ATen's vector code at {torch.backends.cpu.get_cpu_capability()}; its "
                       f"oneDNN and FBGEMM kernels are not reported")


def torch_int8(model, calibration, workdir, threads):
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    prepared = prepare_fx(copy.deepcopy(model).eval(), get_default_qconfig_mapping("x86"),
                          (calibration[0],))
    with torch.no_grad():
        for x in calibration:
            prepared(x)
    return torch_fp32(convert_fx(prepared), calibration, workdir, threads)


def _onnx_file(model, calibration, workdir):
    path = os.path.join(workdir, "model.onnx")
    if not os.path.exists(path):
        torch.onnx.export(copy.deepcopy(model).eval(), (calibration[0],), path, dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=17)
    return path


def _ort_session(path, threads):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x.numpy()})[0]


ORT_ISA = "not reported (its MLAS kernels are chosen by CPUID inside the library)"


def onnxruntime_fp32(model, calibration, workdir, threads):
    path = _onnx_file(model, calibration, workdir)
    return _ort_session(path, threads), path, ORT_ISA


def onnxruntime_int8(model, calibration, workdir, threads):
    from onnxruntime import quantization as ortq

    class Reader(ortq.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": x.numpy()} for x in calibration])

        def get_next(self):
            return next(self.batches, None)

    path = os.path.join(workdir, "model.int8.onnx")
    if not os.path.exists(path):
        ortq.quantize_static(_onnx_file(model, calibration, workdir), path, Reader(),
                             quant_format=ortq.QuantFormat.QDQ, per_channel=True,
                             activation_type=ortq.QuantType.QUInt8,
                             weight_type=ortq.QuantType.QInt8)
    return _ort_session(path, threads), path, ORT_ISA


def _openvino_compiled(ov_model, threads, precision=None):
    import openvino as ov

    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    if precision:
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = ov.Core().compile_model(ov_model, "CPU", config)
    request = compiled.create_infer_request()
    return lambda x: request.infer({0: x.numpy()})[0], openvino_isa(compiled)


# The layers that carry the multiply-accumulates; the rest (reorders, pooling) follow their ISA.
OPENVINO_MAC_LAYERS = ("Convolution", "Deconvolution", "FullyConnected", "MatMul")


def openvino_isa(compiled):
    """Counter of the primitive types (their names carry ISA and precision, such as
    brgconv_avx512_core_amx_int8) that the compiled model's MAC layers execute."""
    return collections.Counter(
        op.get_rt_info()["primitiveType"].astype(str)
        for op in compiled.get_runtime_model().get_ordered_ops()
        if op.get_rt_info()["layerType"].astype(str) in OPENVINO_MAC_LAYERS)


def _openvino_ir(model, calibration, workdir, int8):
    import openvino as ov

    path = os.path.join(workdir, "model.int8.xml" if int8 else "model.xml")
    if not os.path.exists(path):
        ov_model = ov.convert_model(copy.deepcopy(model).eval(), example_input=calibration[0])
        if int8:
            import nncf

            ov_model = nncf.quantize(ov_model, nncf.Dataset([x.numpy() for x in calibration]),
                                     subset_size=len(calibration))
        ov.save_model(ov_model, path)
    return path


# On a CPU with bf16 units (AMX, AVX512_BF16) OpenVINO's default precision hint runs an fp32 model
# in bf16: its fp32 engine pins f32, so that the column is fp32 arithmetic, and the bf16 engine
# shows that default.
def openvino_fp32(model, calibration, workdir, threads):
    path = _openvino_ir(model, calibration, workdir, int8=False)
    run, isa = _openvino_compiled(path, threads, "f32")
    return run, path, isa


def openvino_bf16(model, calibration, workdir, threads):
    path = _openvino_ir(model, calibration, workdir, int8=False)
    run, isa = _openvino_compiled(path, threads, "bf16")
    return run, path, isa


def openvino_int8(model, calibration, workdir, threads):
    path = _openvino_ir(model, calibration, workdir, int8=True)
    run, isa = _openvino_compiled(path, threads)
    return run, path, isa


# On a CPU with AMX, qtk capped at AVX-512 VNNI shows what the tile unit gives (and how qtk
# stands on a CPU without one).
QTK_CAPPED = "qtk int8 (QTK_ISA=avx512_vnni)"
QTK_PER_CHANNEL = "qtk int8 per-channel activations"

# name: (build, the package it needs, the environment it loads under). QTK_ISA is read when a model
# is loaded (kernel choice), so it is set while the engine builds and in its peak RSS child.
ENGINES = {
    "qtk int8": (qtk_int8, None, {}),
    QTK_CAPPED: (qtk_int8, None, {"QTK_ISA": "avx512_vnni"}),
    "qtk int8 Fast-Run": (qtk_int8_fast_run, None, {}),
    QTK_PER_CHANNEL: (qtk_int8_per_channel, None, {}),
    "qtk fp32": (qtk_fp32, None, {}),
    "PyTorch fp32": (torch_fp32, None, {}),
    "PyTorch int8": (torch_int8, None, {}),
    "ONNX Runtime fp32": (onnxruntime_fp32, "onnxruntime", {}),
    "ONNX Runtime int8": (onnxruntime_int8, "onnxruntime", {}),
    "OpenVINO fp32": (openvino_fp32, "openvino", {}),
    "OpenVINO bf16": (openvino_bf16, "openvino", {}),
    "OpenVINO int8": (openvino_int8, "nncf", {}),
}


def default_engines():
    """Every engine; the capped qtk only where there is something to cap; qtk with per-channel
    activations only when asked (``--engines``)."""
    return [name for name in ENGINES if name != QTK_PER_CHANNEL and (
        name != QTK_CAPPED or "amx_int8" in cpu_info().get("flags", "").split())]


@contextlib.contextmanager
def environment(**values):
    """Sets the environment variables ``values`` for the block, then restores what was there."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---- timing --------------------------------------------------------------------------------------

def wait_until_idle(window=0.01, limit=1.0):
    """Sleeps until this process used under a tenth of ``window`` of CPU time in one ``window``
    (or ``limit`` passed): an engine's worker threads keep spinning after its last run (ONNX
    Runtime's for about 50 ms, measured), and the next engine's runs would share a core with them.
    A deployed engine runs alone; so does each turn here."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        used = time.process_time()
        time.sleep(window)
        if time.process_time() - used < window / 10:
            return


def time_interleaved(runs, inputs, count, warmup, block=10):
    """{engine: [seconds]}: after ``warmup`` runs each, the engines take turns, ``block`` runs at a
    time, until each has ``count``, each turn starting once the previous engine's threads are idle
    (:func:`wait_until_idle`)."""
    for run in runs.values():
        for x in inputs[:warmup]:
            run(x)
    times = {name: [] for name in runs}
    for first in range(0, count, block):
        for name, run in runs.items():
            wait_until_idle()
            for i in range(first, min(first + block, count)):
                start = time.perf_counter()
                run(inputs[i % len(inputs)])
                times[name].append(time.perf_counter() - start)
    return times


# ---- peak RSS in a child process -----------------------------------------------------------------

def peak_rss(engine, path, threads, env):
    """Peak resident bytes of a child process that only loads and runs ``path``, with the
    environment variables ``env`` added."""
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peak_rss_child.py")
    out = subprocess.run([sys.executable, child, engine, path, str(threads)], capture_output=True,
                         text=True, env={**os.environ, **env})
    if out.returncode != 0:
        raise RuntimeError(f"peak RSS child for {engine} failed:\n{out.stderr}")
    return int(out.stdout.strip().splitlines()[-1])


# ---- report --------------------------------------------------------------------------------------

def report_lines(results, args):
    """The markdown report: a ratio table per thread count, the conv layers' share of the peak,
    the memory plan and peak RSS."""
    names = [n for n in args.engines]
    lines = [f"Median of {args.runs} runs after {args.warmup} warm-up runs each, interleaved in "
             f"turns of 10 runs per engine (each once the previous engine's threads were idle), "
             f"batch 1, 224x224, random weights (BatchNorm re-estimated). Cells: ms (ratio to "
             f"qtk int8; above 1 means slower than qtk).", ""]
    for threads in args.threads:
        lines += [f"### {threads} thread(s)", "",
                  "| model | " + " | ".join(names) + " |", "|---" + "|---:" * len(names) + "|"]
        for model, result in results.items():
            engines = result["engines"]
            base = engines["qtk int8"][f"median_ms_{threads}t"]
            cells = []
            for name in names:
                ms = engines.get(name, {}).get(f"median_ms_{threads}t")
                cells.append("missing" if ms is None else f"{ms:.2f} ({ms / base:.2f}x)")
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
        reads = [(model, result[f"core_to_core_{threads}t"]) for model, result in results.items()
                 if f"core_to_core_{threads}t" in result]
        if reads:
            lines += ["Reading what the other thread's core had just written, in ns per KiB "
                      "(reading one's own: in brackets), measured before and after each model's "
                      "turns: " + ", ".join(
                          f"{model} {before[1]:.1f} ({before[0]:.1f}) / {after[1]:.1f} "
                          f"({after[0]:.1f})" for model, (before, after) in reads)
                      + ". On the Zen 5 VM, about 13 means the two vCPUs share a core complex "
                      "and about 29 that they do not; qtk's 2-thread times follow it "
                      "(see the Zen 5 notes).", ""]
    lines += ["### qtk int8: conv layers, memory plan, peak RSS", "",
              "| model | " + " | ".join(f"conv GMAC/s ({t}t), share of {int8_peak_name()}"
                                        for t in args.threads)
              + " | arena KiB (lower bound) | peak RSS MiB: " + ", ".join(
                  n for n in names if n != "qtk int8 Fast-Run") + " |",
              "|---" + "|---:" * (len(args.threads) + 2) + "|"]
    for model, result in results.items():
        q = result["engines"]["qtk int8"]
        cells = []
        for t in args.threads:
            share = q.get(f"conv_share_of_int8_peak_{t}t")
            cells.append(f"{q[f'conv_gmacs_{t}t']:.1f}" +
                         ("" if share is None else f", {100 * share:.0f}%"))
        rss = ", ".join(f"{result['engines'][n]['peak_rss_mib']:.0f}" if "peak_rss_mib" in
                        result["engines"].get(n, {}) else "–"
                        for n in names if n != "qtk int8 Fast-Run")
        lines.append(f"| {model} | " + " | ".join(cells) +
                     f" | {q['arena_kib']:.0f} ({q['arena_lower_bound_kib']:.0f}) | {rss} |")
    return lines + [""]


# ISA caps of the peers, read once as each library initializes: oneDNN's (in PyTorch and OpenVINO)
# and OpenVINO's own kernels'.
PEER_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OV_CPU_MAX_ISA")


def isa_lines(results, names, openvino_capabilities):
    """One line per engine: the ISA its kernels used, summed over the models, as far as the engine
    says; then how the engines were capped."""
    lines = ["### ISA each engine used", "",
             "qtk: nodes counted by the ISA of their kernel; OpenVINO: its layers with the "
             "multiply-accumulates (convolutions, fully connected, matmuls) counted by the "
             "primitive they executed, whose name gives ISA and precision.", "",
             "| engine | ISA (all models) |", "|---|---|"]
    for name in names:
        reports = [r["engines"][name]["isa"] for r in results.values()
                   if "isa" in r["engines"].get(name, {})]
        if not reports:
            continue
        if isinstance(reports[0], dict):
            counts = sum((collections.Counter(r) for r in reports), collections.Counter())
            summary = ", ".join(f"{label} {count}" for label, count in counts.most_common())
        else:
            summary = reports[0]
        if name.startswith("qtk"):
            cap = ENGINES[name][2].get("QTK_ISA") or os.environ.get("QTK_ISA")
            summary = (f"QTK_ISA={cap}" if cap else "QTK_ISA unset") + ": " + summary
        lines.append(f"| {name} | {summary} |")
    lines.append("")
    if openvino_capabilities:
        lines += ["OpenVINO's CPU plugin reports OPTIMIZATION_CAPABILITIES "
                  + ", ".join(openvino_capabilities) + ".", ""]
    peer_caps = [f"{key}={os.environ[key]}" for key in PEER_CAPS if os.environ.get(key)]
    lines += [("The peers ran with " + ", ".join(peer_caps) + " set in the environment (ONNX "
               "Runtime's MLAS has no such cap)." if peer_caps else
               "The peers ran uncapped: oneDNN (in OpenVINO and PyTorch) reads its cap "
               "(ONEDNN_MAX_CPU_ISA) once, as it initializes, and every engine shares this "
               "process; ONNX Runtime's MLAS has no such cap."), ""]
    return lines


PEER_INT8 = ("PyTorch int8", "ONNX Runtime int8", "OpenVINO int8")
PEER_FP32 = ("ONNX Runtime fp32", "OpenVINO fp32")  # the deploy runtimes: PyTorch eager is not one


def target_lines(results, args):
    """Issue 19's targets, and issue 5's memory targets that keep holding, computed from this
    run: one line each, with ✅ or ❌."""
    checks = []

    def ms(model, engine, threads):
        return results.get(model, {}).get("engines", {}).get(engine, {}).get(
            f"median_ms_{threads}t")

    def against_fastest(model, engine, peers, threads, limit):
        times = {e: ms(model, e, threads) for e in peers if ms(model, e, threads)}
        if ms(model, engine, threads) and times:
            best = min(times, key=times.get)
            ratio = ms(model, engine, threads) / times[best]
            label = best if len(peers) == 1 else f"fastest peer {best.split()[-1]} ({best})"
            checks.append((f"{threads}t {model}: {engine} / {label} = {ratio:.2f} "
                           f"(target <= {limit})", ratio <= limit))

    for threads in args.threads:
        for model in ("resnet18", "resnet50"):
            against_fastest(model, "qtk int8", ["OpenVINO int8"], threads, 1.0)
        for model in ("mobilenet_v2", "mobilenet_v3_large", "shufflenet_v2_x1_0"):
            against_fastest(model, "qtk int8", PEER_INT8, threads, 0.8)
        for model in ("resnet18", "mobilenet_v2"):
            against_fastest(model, "qtk fp32", PEER_FP32, threads, 1.0)
        for model in ("resnet18", "resnet50"):
            share = results.get(model, {}).get("engines", {}).get("qtk int8", {}).get(
                f"conv_share_of_int8_peak_{threads}t")
            if share is not None:
                checks.append((f"{threads}t {model}: qtk int8 conv layers at {100 * share:.0f}% "
                               f"of the {int8_peak_name()} (target >= 85%)", share >= 0.85))
    for model, result in results.items():
        q = result["engines"].get("qtk int8", {})
        ort = result["engines"].get("ONNX Runtime int8", {})
        if "arena_kib" in q:
            ratio = q["arena_kib"] / q["arena_lower_bound_kib"]
            checks.append((f"{model}: memory plan {ratio:.3f}x its lower bound (target <= 1.1)",
                           ratio <= 1.1))
        if "peak_rss_mib" in q and "peak_rss_mib" in ort:
            checks.append((f"{model}: peak RSS qtk int8 {q['peak_rss_mib']:.0f} MiB vs ONNX "
                           f"Runtime int8 {ort['peak_rss_mib']:.0f} MiB (target: below)",
                           q["peak_rss_mib"] < ort["peak_rss_mib"]))
    lines = ["### Targets (issue 19; memory plan and peak RSS: issue 5), computed from this run",
             ""] + [f"- {'✅' if holds else '❌'} {text}" for text, holds in checks] + [""]
    ratios = [f"{model} {t}t {ms(model, 'qtk int8', t) / ms(model, 'qtk fp32', t):.2f}"
              for model in results for t in args.threads
              if ms(model, "qtk fp32", t) and ms(model, "qtk int8", t)]
    if ratios:  # MegEngine reports int8 at 30-50% of its float time
        lines += ["qtk int8 / qtk fp32 (same runtime): " + ", ".join(ratios) + ".", ""]
    return lines


# ---- the CPU and its section of the README -------------------------------------------------------

BEGIN = "<!-- BEGIN GENERATED RESULTS: written by `python -m benchmarks.peers`, do not edit -->"
END = "<!-- END GENERATED RESULTS -->"


def cpu_info(cpuinfo=None):
    """The first processor's fields in /proc/cpuinfo (or in the text ``cpuinfo``); {} without."""
    if cpuinfo is None:
        if not os.path.exists("/proc/cpuinfo"):
            return {}
        with open("/proc/cpuinfo") as f:
            cpuinfo = f.read()
    fields = {}
    for line in cpuinfo.splitlines():
        if not line.strip() and fields:
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def amd_core(family, model):
    """AMD's core generation by cpu family and model (family 25 is Zen 3 but for the Zen 4 models
    0x10-0x1f Genoa, 0x60-0x7f client, 0xa0-0xaf Bergamo and Siena), None before Zen 3."""
    if family == 26:
        return "Zen 5"
    if family == 25:
        zen4 = any(model in range(first, first + 16) for first in (0x10, 0x60, 0x70, 0xa0))
        return "Zen 4" if zen4 else "Zen 3"
    return None


def cpu_description(cpuinfo=None):
    """The CPU's model name and its int8 matrix units: results differ most between machines
    by these (peers use AMX-INT8 where the CPU has it). An AMD CPU also gets its core generation
    and cpu family and model: a VM may name it just "AMD EPYC", and Zen 4 splits each AVX-512
    instruction into two 256-bit halves where Zen 5 (EPYC) does not."""
    fields = cpu_info(cpuinfo)
    name = fields.get("model name") or platform.processor() or platform.machine()
    flags, details = set(fields.get("flags", "").split()), []
    if fields.get("vendor_id") == "AuthenticAMD" and "cpu family" in fields:
        family, model = int(fields["cpu family"]), int(fields["model"])
        core = amd_core(family, model)
        details.append((f"{core}, " if core else "") + f"family {family} model {model}")
    units = [label for flag, label in (("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"),
                                       ("amx_int8", "AMX-INT8")) if flag in flags]
    # Without an int8 unit, the widest SIMD: int8 products then take vpmaddwd (int16).
    units = units or [label for flag, label in (("avx512f", "AVX-512, no VNNI"),
                                                ("avx2", "AVX2, no VNNI")) if flag in flags][:1]
    if units:
        details.append(", ".join(units))
    return name + (f" ({'; '.join(details)})" if details else "")


def int8_peak_name(cpuinfo=None):
    """What qtk._C.measure_int8_peak times on this CPU: vpdpbusd with AVX-512 VNNI, else AVX2's
    vpmaddwd and vpaddd (the exact int8 products of qtk's AVX2 kernels)."""
    flags = set(cpu_info(cpuinfo).get("flags", "").split())
    return "VNNI peak" if "avx512_vnni" in flags else "int8 peak (AVX2 vpmaddwd)"


def binary_peak_name(cpuinfo=None):
    """What qtk._C.measure_binary_peak times on this CPU: vpopcntq where the AVX-512 binary kernels
    run (VNNI, VBMI and VPOPCNTDQ), else AVX2's nibble-table popcount (vpshufb)."""
    flags = set(cpu_info(cpuinfo).get("flags", "").split())
    if {"avx512_vnni", "avx512vbmi", "avx512_vpopcntdq"} <= flags:  # Linux's spelling
        return "popcount peak (AVX-512 vpopcntq)"
    return "popcount peak (AVX2 nibble table)"


def cpu_heading():
    """The title of this CPU's section of the README, and the name of its JSON files."""
    return f"{cpu_description()}, {os.cpu_count()} cores"


def cpu_slug():
    return re.sub(r"[^a-z0-9]+", "-", cpu_heading().lower()).strip("-")


def replace_cpu_section(text, heading, lines, markers=(BEGIN, END)):
    """``text`` with the section titled ``## heading`` between the markers replaced by ``lines``,
    or added after the other CPUs' sections, which stay as they are (so does anything before the
    first title). Without the markers, they are appended. ``lines`` hold no "## " title of their
    own (the report's titles are "### ")."""
    assert not any(line.startswith("## ") for line in lines), "a line would start a CPU section"
    begin, end = markers
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        block, after = rest.split(end, 1)
    else:
        before, block, after = text + ("\n" if text else ""), "", "\n"
    sections, title = {}, ""  # title -> its lines, the title first; "" for text before any
    for line in block.splitlines():
        if line.startswith("## "):
            title = line
        sections.setdefault(title, []).append(line)
    sections["## " + heading] = ["## " + heading, ""] + lines
    body = [joined for joined in ("\n".join(s).strip("\n") for s in sections.values()) if joined]
    return before + begin + "\n" + "\n\n".join(body) + "\n" + end + after


def write_readme(path, lines, command, markers=(BEGIN, END)):
    """Replaces this CPU's section in the generated part of ``path`` (kept between ``markers``)
    with ``lines``, keeping the other CPUs' sections."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"Generated by `{command}` on {stamp} (torch {torch.__version__}, "
              f"qtk {qtk.__version__}).")
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    text = replace_cpu_section(text, cpu_heading(), [header, ""] + lines, markers)
    with open(path, "w") as f:
        f.write(text)


DEFAULT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
                  "shufflenet_v2_x1_0"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--engines", nargs="+", default=default_engines(), choices=list(ENGINES))
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       f"peers-{cpu_slug()}.json"))
    parser.add_argument("--readme", default=os.path.join(os.path.dirname(__file__), "README.md"),
                        help="markdown file whose generated section gets the tables ('' : none)")
    args = parser.parse_args(argv)

    calibration = _inputs(CALIBRATION_BATCHES, seed=1)
    inputs = _inputs(max(args.warmup, 8), seed=2)
    results = {}
    for model_name in args.models:
        model = float_model(model_name)
        engines, core_to_core = {}, {}
        with tempfile.TemporaryDirectory() as workdir:
            for threads in args.threads:
                runs, files = {}, {}
                for name in args.engines:
                    build, requirement, env = ENGINES[name]
                    if requirement and importlib.util.find_spec(requirement) is None:
                        engines.setdefault(name, {"missing": f"pip install {requirement}"})
                        continue
                    os.makedirs(os.path.join(workdir, name), exist_ok=True)
                    with environment(**env):
                        runs[name], files[name], isa = build(model, calibration,
                                                             os.path.join(workdir, name), threads)
                    engines.setdefault(name, {})["isa"] = isa
                before = _C.measure_core_to_core() if threads > 1 else None
                times = time_interleaved(runs, inputs, args.runs, args.warmup)
                if before is not None:
                    core_to_core[f"core_to_core_{threads}t"] = [before,
                                                                _C.measure_core_to_core()]
                for name, samples in times.items():
                    entry = engines[name]
                    entry[f"median_ms_{threads}t"] = 1e3 * statistics.median(samples)
                    entry[f"runs_{threads}t"] = len(samples)
                    if files[name] and threads == args.threads[-1]:
                        entry["peak_rss_mib"] = peak_rss(name, files[name], threads,
                                                         ENGINES[name][2]) / 2**20
                if "qtk int8" in files:
                    engines["qtk int8"].update(qtk_details(files["qtk int8"], threads, inputs))
        results[model_name] = {"engines": engines, **core_to_core}
        print(f"{model_name}: done", flush=True)

    openvino_capabilities = None
    if any(name.startswith("OpenVINO") and "isa" in engines
           for result in results.values() for name, engines in result["engines"].items()):
        import openvino as ov

        openvino_capabilities = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    summary = {"machine": {"cpu": cpu_heading(), "python": platform.python_version(),
                           "torch": torch.__version__, "qtk": qtk.__version__,
                           "openvino_capabilities": openvino_capabilities},
               "settings": vars(args), "results": results}
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(summary, f, indent=2)
    peers_chart(summary, os.path.splitext(args.json)[0] + ".png")
    lines = (target_lines(results, args) + report_lines(results, args)
             + isa_lines(results, args.engines, openvino_capabilities))
    print("\n".join(lines))
    if args.readme:
        write_readme(args.readme, lines, "python -m benchmarks.peers " + " ".join(
            sys.argv[1:] if argv is None else argv))
    print(f"\nJSON: {args.json} (chart: .png beside it)")


if __name__ == "__main__":
    main()
