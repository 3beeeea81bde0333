"""qtk against the peers, side by side in one process: latency of torchvision models at batch 1.

    python -m benchmarks.peers [--models resnet18 mobilenet_v2 shufflenet_v2_x1_0]
                               [--threads 1 2] [--runs 50] [--json benchmarks/results/peers.json]

Engines: qtk int8 (its default kernel choice, and Fast-Run), qtk fp32 (the float model exported
as is), PyTorch fp32 and int8 (FX graph mode PTQ, 'x86' backend), ONNX Runtime fp32 and int8
(static QDQ, per-channel weights) and OpenVINO fp32 (pinned to f32 arithmetic), bf16 (its default
on CPUs with bf16 units) and int8 (NNCF PTQ). Every model has random weights with BatchNorm
statistics re-estimated on random data
(so activations are not degenerate), and every int8 engine calibrates on the same random batches.
Peers that are not installed are reported as missing, not silently dropped.

Timing: each engine warms up, then the engines take turns of 10 runs (interleaved), so drift on
a shared machine hits all of them alike; the table shows the median and the ratio to
qtk int8. Peak RSS is measured per engine in a fresh child process that imports only that engine,
loads its deployable file (.qmodel, .onnx, OpenVINO IR) and runs it.
"""
import argparse
import copy
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

import qtk
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


# ---- engines: build(float model, calibration inputs, workdir, threads) -> (run(x), file) -----------

def _qmodel_file(model, calibration, workdir):
    path = os.path.join(workdir, "model.qmodel")
    if not os.path.exists(path):
        prepared = qtk.prepare_ptq(model)
        qtk.calibrate(prepared, calibration)
        qtk.export(qtk.convert(prepared), calibration[0], path)
    return path


def qtk_int8(model, calibration, workdir, threads):
    session = qtk.runtime.load(_qmodel_file(model, calibration, workdir), threads=threads)
    return session.run, _qmodel_file(model, calibration, workdir)


def qtk_int8_fast_run(model, calibration, workdir, threads):
    """Fast-Run: each layer's algorithm timed on this machine, cached beside the model."""
    path = _qmodel_file(model, calibration, workdir)
    session = qtk.runtime.load(path, threads=threads, fast_run="search",
                               fast_run_cache=os.path.join(workdir, "fastrun.cache"))
    return session.run, path


def qtk_fp32(model, calibration, workdir, threads):
    """The float model exported as is (qtk.export of an unquantized model)."""
    path = os.path.join(workdir, "float.qmodel")
    qtk.export(model.eval(), calibration[0], path)
    return qtk.runtime.load(path, threads=threads).run, path


def qtk_details(path, threads, inputs, runs=20):
    """From a profiled qtk session: the conv layers' multiply-accumulates per second, their share
    of this CPU's measured VNNI peak (one core's, times the threads), and the memory plan."""
    from qtk import _C

    session = qtk.runtime.load(path, threads=threads, profile=True)
    for i in range(runs):
        session.run(inputs[i % len(inputs)])
    convs = [n for n in session.profile() if n["op"] == "conv2d"]
    macs_per_second = sum(n["macs"] for n in convs) * runs / sum(n["seconds"] for n in convs)
    peak = _C.measure_int8_peak(0.3) * threads
    return {f"conv_gmacs_{threads}t": macs_per_second / 1e9,
            f"conv_share_of_vnni_peak_{threads}t": macs_per_second / peak if peak else None,
            "arena_kib": session.arena_bytes / 1024,
            "arena_lower_bound_kib": session.arena_lower_bound / 1024}


def torch_fp32(model, calibration, workdir, threads):
    model = copy.deepcopy(model).eval()

    def run(x):
        torch.set_num_threads(threads)
        with torch.no_grad():
            return model(x)
    return run, None


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


def onnxruntime_fp32(model, calibration, workdir, threads):
    path = _onnx_file(model, calibration, workdir)
    return _ort_session(path, threads), path


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
    return _ort_session(path, threads), path


def _openvino_compiled(ov_model, threads, precision=None):
    import openvino as ov

    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    if precision:
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = ov.Core().compile_model(ov_model, "CPU", config)
    request = compiled.create_infer_request()
    return lambda x: request.infer({0: x.numpy()})[0]


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
    return _openvino_compiled(path, threads, "f32"), path


def openvino_bf16(model, calibration, workdir, threads):
    path = _openvino_ir(model, calibration, workdir, int8=False)
    return _openvino_compiled(path, threads, "bf16"), path


def openvino_int8(model, calibration, workdir, threads):
    path = _openvino_ir(model, calibration, workdir, int8=True)
    return _openvino_compiled(path, threads), path


ENGINES = {
    "qtk int8": (qtk_int8, None),
    "qtk int8 Fast-Run": (qtk_int8_fast_run, None),
    "qtk fp32": (qtk_fp32, None),
    "PyTorch fp32": (torch_fp32, None),
    "PyTorch int8": (torch_int8, None),
    "ONNX Runtime fp32": (onnxruntime_fp32, "onnxruntime"),
    "ONNX Runtime int8": (onnxruntime_int8, "onnxruntime"),
    "OpenVINO fp32": (openvino_fp32, "openvino"),
    "OpenVINO bf16": (openvino_bf16, "openvino"),
    "OpenVINO int8": (openvino_int8, "nncf"),
}


# ---- timing ----------------------------------------------------------------------------------------

def time_interleaved(runs, inputs, count, warmup, block=10):
    """{engine: [seconds]}: after ``warmup`` runs each, the engines take turns, ``block`` runs at a
    time, until each has ``count``. Turns of one run each would put every run right after another
    engine's, whose worker threads may still spin (OpenMP, ONNX Runtime) and take a core from it;
    in blocks only the first run of a turn meets them, and the median drops it."""
    for run in runs.values():
        for x in inputs[:warmup]:
            run(x)
    times = {name: [] for name in runs}
    for first in range(0, count, block):
        for name, run in runs.items():
            for i in range(first, min(first + block, count)):
                start = time.perf_counter()
                run(inputs[i % len(inputs)])
                times[name].append(time.perf_counter() - start)
    return times


# ---- peak RSS in a child process ------------------------------------------------------------------

def peak_rss(engine, path, threads):
    """Peak resident bytes of a child process that only loads and runs ``path``."""
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peak_rss_child.py")
    out = subprocess.run([sys.executable, child, engine, path, str(threads)], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise RuntimeError(f"peak RSS child for {engine} failed:\n{out.stderr}")
    return int(out.stdout.strip().splitlines()[-1])


# ---- report ----------------------------------------------------------------------------------------

def report_lines(results, args):
    """The markdown report: a ratio table per thread count, the conv layers' share of the peak,
    the memory plan and peak RSS."""
    names = [n for n in args.engines]
    lines = [f"Median of {args.runs} runs after {args.warmup} warm-up runs each, interleaved in "
             f"turns of 10 runs per engine, "
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
    lines += ["### qtk int8: conv layers, memory plan, peak RSS", "",
              "| model | " + " | ".join(f"conv GMAC/s ({t}t), share of VNNI peak"
                                         for t in args.threads)
              + " | arena KiB (lower bound) | peak RSS MiB: " + ", ".join(
                  n for n in names if n != "qtk int8 Fast-Run") + " |",
              "|---" + "|---:" * (len(args.threads) + 2) + "|"]
    for model, result in results.items():
        q = result["engines"]["qtk int8"]
        cells = []
        for t in args.threads:
            share = q.get(f"conv_share_of_vnni_peak_{t}t")
            cells.append(f"{q[f'conv_gmacs_{t}t']:.1f}" +
                         ("" if share is None else f", {100 * share:.0f}%"))
        rss = ", ".join(f"{result['engines'][n]['peak_rss_mib']:.0f}" if "peak_rss_mib" in
                        result["engines"].get(n, {}) else "–"
                        for n in names if n != "qtk int8 Fast-Run")
        lines.append(f"| {model} | " + " | ".join(cells) +
                     f" | {q['arena_kib']:.0f} ({q['arena_lower_bound_kib']:.0f}) | {rss} |")
    return lines


PEER_INT8 = ("PyTorch int8", "ONNX Runtime int8", "OpenVINO int8")
PEER_FP32 = ("PyTorch fp32", "ONNX Runtime fp32", "OpenVINO fp32")


def target_lines(results, args):
    """The issue's targets, computed from this run: one line each, with ✅ or ❌."""
    def ms(model, engine, threads):
        return results.get(model, {}).get("engines", {}).get(engine, {}).get(
            f"median_ms_{threads}t")

    checks = []
    for threads in args.threads:
        qtk_ms = {m: ms(m, "qtk int8", threads) for m in results}
        if "resnet18" in results and ms("resnet18", "OpenVINO int8", threads):
            ratio = qtk_ms["resnet18"] / ms("resnet18", "OpenVINO int8", threads)
            checks.append((f"{threads}t resnet18: qtk int8 / OpenVINO int8 = {ratio:.2f} "
                           f"(target <= 1.1)", ratio <= 1.1))
        for model in ("mobilenet_v2", "shufflenet_v2_x1_0"):
            peers = {e: ms(model, e, threads) for e in PEER_INT8 if ms(model, e, threads)}
            if model in results and peers:
                best = min(peers, key=peers.get)
                checks.append((f"{threads}t {model}: qtk int8 {qtk_ms[model]:.2f} ms vs fastest "
                               f"peer int8 ({best}) {peers[best]:.2f} ms (target: faster)",
                               qtk_ms[model] < peers[best]))
        fp32 = {e: ms("resnet18", e, threads) for e in PEER_FP32 if ms("resnet18", e, threads)}
        if "resnet18" in results and fp32:
            best = min(fp32, key=fp32.get)
            ratio = qtk_ms["resnet18"] / fp32[best]
            checks.append((f"{threads}t resnet18: qtk int8 / fastest peer fp32 ({best}) = "
                           f"{ratio:.2f} (target <= 0.3)", ratio <= 0.3))
    for model, result in results.items():
        q, ort = result["engines"].get("qtk int8", {}), result["engines"].get("ONNX Runtime int8",
                                                                               {})
        if "arena_kib" in q:
            ratio = q["arena_kib"] / q["arena_lower_bound_kib"]
            checks.append((f"{model}: memory plan {ratio:.3f}x its lower bound (target <= 1.1)",
                           ratio <= 1.1))
        if "peak_rss_mib" in q and "peak_rss_mib" in ort:
            checks.append((f"{model}: peak RSS qtk int8 {q['peak_rss_mib']:.0f} MiB vs ONNX "
                           f"Runtime int8 {ort['peak_rss_mib']:.0f} MiB (target: below)",
                           q["peak_rss_mib"] < ort["peak_rss_mib"]))
    lines = ["### Targets (issue 5), computed from this run", ""] + [
        f"- {'✅' if holds else '❌'} {text}" for text, holds in checks] + [""]
    ratios = [f"{model} {t}t {ms(model, 'qtk int8', t) / ms(model, 'qtk fp32', t):.2f}"
              for model in results for t in args.threads if ms(model, "qtk fp32", t)]
    if ratios:  # MegEngine reports int8 at 30-50% of its float time
        lines += ["qtk int8 / qtk fp32 (same runtime): " + ", ".join(ratios) + ".", ""]
    return lines


BEGIN = "<!-- BEGIN GENERATED RESULTS: written by `python -m benchmarks.peers`, do not edit -->"
END = "<!-- END GENERATED RESULTS -->"


def cpu_description():
    """The CPU's model name and its int8 matrix units: results differ most between machines
    by these (peers use AMX-INT8 where the CPU has it)."""
    name, flags = platform.processor() or platform.machine(), set()
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    units = [label for flag, label in (("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"),
                                        ("amx_int8", "AMX-INT8")) if flag in flags]
    return name + (f" ({', '.join(units)})" if units else "")


def write_readme(path, lines, command, markers=None):
    """Replaces the generated section of ``path`` (kept between the ``markers``, BEGIN and END by
    default) with ``lines``."""
    begin, end = markers or (BEGIN, END)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{cpu_description()}, {os.cpu_count()} cores"
    header = (f"Generated by `{command}` on {stamp} ({machine}, torch {torch.__version__}, "
              f"qtk {qtk.__version__}).")
    section = "\n".join([begin, header, ""] + lines + [end])
    text = open(path).read() if os.path.exists(path) else ""
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text + ("\n" if text else "") + section + "\n"
    with open(path, "w") as f:
        f.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+",
                        default=["resnet18", "mobilenet_v2", "shufflenet_v2_x1_0"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--json", default="benchmarks/results/peers.json")
    parser.add_argument("--readme", default=os.path.join(os.path.dirname(__file__), "README.md"),
                        help="markdown file whose generated section gets the tables ('' : none)")
    args = parser.parse_args(argv)

    calibration = _inputs(CALIBRATION_BATCHES, seed=1)
    inputs = _inputs(max(args.warmup, 8), seed=2)
    results = {}
    for model_name in args.models:
        model = float_model(model_name)
        engines = {}
        with tempfile.TemporaryDirectory() as workdir:
            for threads in args.threads:
                runs, files = {}, {}
                for name in args.engines:
                    build, requirement = ENGINES[name]
                    if requirement and importlib.util.find_spec(requirement) is None:
                        engines.setdefault(name, {"missing": f"pip install {requirement}"})
                        continue
                    os.makedirs(os.path.join(workdir, name), exist_ok=True)
                    runs[name], files[name] = build(model, calibration,
                                                    os.path.join(workdir, name), threads)
                times = time_interleaved(runs, inputs, args.runs, args.warmup)
                for name, samples in times.items():
                    entry = engines.setdefault(name, {})
                    entry[f"median_ms_{threads}t"] = 1e3 * statistics.median(samples)
                    entry[f"runs_{threads}t"] = len(samples)
                    if files[name] and threads == args.threads[-1]:
                        entry["peak_rss_mib"] = peak_rss(name, files[name], threads) / 2**20
                if "qtk int8" in files:
                    engines["qtk int8"].update(qtk_details(files["qtk int8"], threads, inputs))
        results[model_name] = {"engines": engines}
        print(f"{model_name}: done", flush=True)

    summary = {"machine": {"cpu": cpu_description(),
                          "cores": os.cpu_count(), "python": platform.python_version(),
                          "torch": torch.__version__, "qtk": qtk.__version__},
              "settings": vars(args), "results": results}
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(summary, f, indent=2)
    lines = target_lines(results, args) + report_lines(results, args)
    print("\n".join(lines))
    if args.readme:
        write_readme(args.readme, lines, "python -m benchmarks.peers " + " ".join(
            sys.argv[1:] if argv is None else argv))
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
