"""qtk on one GPU: whole models through DeviceSession, and each conv layer's kernel, beside PyTorch.

    python -m benchmarks.cuda --export DIR              (here: writes DIR/<model>.qmodel)
    python -m benchmarks.cuda --json R.json --models DIR (on a machine with a GPU and nvcc)
    python -m benchmarks.cuda --from-json R.json         (anywhere: writes the README section)

--export makes resnet18, mobilenet_v2, resnet50, mobilenet_v3_small and shufflenet_v2_x1_0 as
benchmarks.peers does (torchvision, random weights, BatchNorm statistics re-estimated, qtk PTQ on 8
random images). The measuring form builds
deploy_runtime with QTK_CUDA for this GPU, then:
- `qtk_cuda_models` runs each .qmodel through a DeviceSession on the GPU (with the default
  convolution, and with Fast-Run's per-layer choice of mma or dp4a) and a CPU Session on the same
  random int8 inputs at batch 1 and 32: the outputs must be byte-identical; the GPU runs are timed
  with CUDA events, inputs already on the device (the kernels alone);
- `qtk_cuda_layers` times each conv layer shape of the two models on each qtk kernel;
- PyTorch's conv2d on the same shapes in fp16 and fp32 (channels-last, cuDNN autotuned; fp32 may
  use TF32), launched from a captured CUDA graph so Python's dispatch stays out, and PyTorch's
  whole float models (fp16, channels-last) at both batches, eager and replayed from a CUDA graph
  (eager's time is mostly Python's dispatch on the host).
ONNX Runtime's providers there are recorded: its CUDA provider comes only with the onnxruntime-gpu
wheel, which the GPU machines here do not have.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "benchmarks", "README.md")
BEGIN = "<!-- BEGIN CUDA RESULTS: written by `python -m benchmarks.cuda`, do not edit -->"
END = "<!-- END CUDA RESULTS -->"


# qtk_cuda_layers times the first two's layers; mobilenet_v3_small brings table lookups and
# squeeze-excite multiplies, shufflenet_v2 channel shuffles and splits.
MODELS = ("resnet18", "mobilenet_v2", "resnet50", "mobilenet_v3_small", "shufflenet_v2_x1_0")


def export_models(directory):
    from benchmarks.peers import _inputs, _qmodel_file, float_model
    os.makedirs(directory, exist_ok=True)
    for name in MODELS:
        workdir = os.path.join(directory, name)
        os.makedirs(workdir, exist_ok=True)
        os.replace(_qmodel_file(float_model(name), _inputs(8, seed=1), workdir),
                   os.path.join(directory, name + ".qmodel"))
        os.rmdir(workdir)


def build_qtk(build_dir, cuda_arch):
    subprocess.run(["cmake", "-S", os.path.join(ROOT, "deploy_runtime"), "-B", build_dir,
                    "-DCMAKE_BUILD_TYPE=Release", "-DQTK_CUDA=ON", "-DQTK_BUILD_TOOLS=ON",
                    f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "-j", "--target", "qtk_cuda_layers",
                    "qtk_cuda_models"], check=True, stdout=subprocess.DEVNULL)


def json_lines(command):
    run = subprocess.run(command, capture_output=True, text=True)
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0:
        print(run.stdout, file=sys.stderr)
        sys.exit(f"{command[0]} failed ({run.returncode}): {run.stderr}")
    return lines


def time_cuda(fn, rounds=7, repeats=20, graph=False):
    """Median ms per call of fn over `rounds` rounds of `repeats` calls between CUDA events; with
    `graph`, the repeats are one captured CUDA graph's replay."""
    import torch
    for _ in range(3):
        fn()
    run = lambda: [fn() for _ in range(repeats)]  # noqa: E731
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured):
            run()
        run = captured.replay
    times = []
    for _ in range(rounds):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / repeats)
    return statistics.median(times)


def time_torch_layers(layers):
    import torch
    import torch.nn.functional as F
    torch.backends.cudnn.benchmark = True
    results = []
    for layer in layers:
        if layer["qtk_kernel"] == "conv2d_int8_mma":
            continue  # one row per shape and batch
        row = {}
        for dtype in (torch.float16, torch.float32):
            x = torch.randn(layer["batch"], layer["in"], layer["size"], layer["size"],
                            device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
            w = torch.randn(layer["out"], layer["in"] // layer["groups"], layer["kernel"],
                            layer["kernel"], device="cuda", dtype=dtype
                            ).to(memory_format=torch.channels_last)
            pad = layer["kernel"] // 2
            row[str(dtype).split(".")[-1]] = time_cuda(
                lambda: F.conv2d(x, w, None, layer["stride"], pad, 1, layer["groups"]),
                repeats=200 if layer["batch"] == 1 else 20, graph=True)
        results.append({"model": layer["model"], "layer": layer["layer"],
                        "batch": layer["batch"], "torch_ms": row})
    return results


def time_models():
    import torch
    import torchvision
    results = []
    for name in MODELS:
        model = getattr(torchvision.models, name)(weights=None).eval().cuda().half()
        model = model.to(memory_format=torch.channels_last)
        for batch in (1, 32):
            x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.float16
                            ).to(memory_format=torch.channels_last)
            for engine, graph in (("PyTorch fp16 eager", False),
                                  ("PyTorch fp16 CUDA graph", True)):
                with torch.no_grad():
                    ms = time_cuda(lambda: model(x), repeats=20, graph=graph)
                results.append({"model": name, "batch": batch, "engine": engine, "ms": ms})
    return results


def onnxruntime_providers():
    """ONNX Runtime's providers here: the CUDA one comes only with the onnxruntime-gpu wheel."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return {"version": onnxruntime.__version__,
            "providers": onnxruntime.get_available_providers()}


def measure(args):
    import torch
    build_qtk(args.build_dir, args.cuda_arch)
    models = json_lines([os.path.join(args.build_dir, "qtk_cuda_models"), "--batch", "1",
                         "--batch", "32"] +
                        [os.path.join(args.models, name + ".qmodel") for name in MODELS])
    layers = json_lines([os.path.join(args.build_dir, "qtk_cuda_layers"), "1", "32"])
    results = {"gpu": layers[0], "torch": torch.__version__, "cuda": torch.version.cuda,
               "host": platform.node(), "qtk_models": models, "qtk_layers": layers[1:],
               "torch_layers": time_torch_layers(layers[1:]), "models": time_models(),
               "onnxruntime": onnxruntime_providers()}
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    return results


def render(results):
    """The README section's title and lines: whole models first (both batches), then each
    batch's layers."""
    gpu = results["gpu"]
    torch_ms = {(r["model"], r["layer"], r["batch"]): r["torch_ms"]
                for r in results["torch_layers"]}
    qtk_ms = {}
    for r in results["qtk_layers"]:
        qtk_ms.setdefault((r["model"], r["layer"], r["batch"]), {})[r["qtk_kernel"]] = r
    layer_lines, sums = [], {}  # sums[(model, batch)]: the conv layers' ms, each shape x count
    for batch in (1, 32):
        layer_lines += [f"Conv layers at batch {batch}:", "",
                        "| model | layer | count | qtk dp4a ms | qtk mma ms | qtk depthwise ms | "
                        "best qtk TOPS | cuDNN fp16 ms | cuDNN fp32 ms | cuDNN fp16 / best qtk |",
                        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key, kernels in qtk_ms.items():
            if key[2] != batch:
                continue
            best = min(kernels.values(), key=lambda r: r["ms"])
            peer = torch_ms[key]
            cells = " | ".join(f"{kernels[k]['ms']:.4f}" if k in kernels else ""
                               for k in ("conv2d_int8_dp4a", "conv2d_int8_mma",
                                         "conv2d_int8_depthwise"))
            layer_lines.append(f"| {key[0]} | {key[1]} | {best['count']} | {cells} | "
                               f"{best['tops']:.1f} | {peer['float16']:.4f} | "
                               f"{peer['float32']:.4f} | {peer['float16'] / best['ms']:.2f}x |")
            total = sums.setdefault((key[0], batch), {"qtk": 0.0, "fp16": 0.0, "fp32": 0.0})
            total["qtk"] += best["count"] * best["ms"]
            total["fp16"] += best["count"] * peer["float16"]
            total["fp32"] += best["count"] * peer["float32"]
        layer_lines.append("")
    heading = (f"{gpu['gpu']} (compute capability {gpu['compute_capability']}, "
               f"{gpu['multiprocessors']} SMs)")
    lines = [f"PyTorch {results['torch']} (CUDA {results['cuda']}); ONNX Runtime "
             f"{(results['onnxruntime'] or {}).get('version')} with providers "
             f"{(results['onnxruntime'] or {}).get('providers')}: no CUDA provider to compare. "
             "Median ms; TOPS counts 2 operations per multiply-accumulate.", "",
             "| model | batch | qtk int8 DeviceSession ms: default / Fast-Run (its dp4a layers) "
             "| byte-identical to the CPU (distinct output values) | its conv layers: best qtk "
             "kernels ms | the same layers in cuDNN fp16 ms | cuDNN fp32 ms | whole model, "
             "PyTorch fp16 CUDA graph ms | PyTorch fp16 eager ms |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    runs = {}
    for r in results.get("qtk_models", []):
        name = os.path.basename(r["model"]).rsplit(".", 1)[0]
        runs.setdefault((name, r["batch"]), {})[r.get("fast_run", False)] = r
    for (model, batch), by_mode in sorted(runs.items()):
        default, searched = by_mode.get(False), by_mode.get(True)
        times = f"{default['median_ms']:.3f}" if default else ""
        if searched:
            times += (f" / {searched['median_ms']:.3f} ({searched['dp4a_layers']} of "
                      f"{searched['dp4a_layers'] + searched['mma_layers']})")
        identical = all(r["byte_identical"] for r in by_mode.values())
        distinct = min(r["distinct_output_values"] for r in by_mode.values())
        total = sums.get((model, batch))
        layers = (f"{total['qtk']:.3f} | {total['fp16']:.3f} | {total['fp32']:.3f}" if total
                  else " |  | ")
        whole = [next((f"{r['ms']:.3f}" for r in results["models"]
                       if r["model"] == model and r["batch"] == batch
                       and r.get("engine") == engine), "")
                 for engine in ("PyTorch fp16 CUDA graph", "PyTorch fp16 eager")]
        lines.append(f"| {model} | {batch} | {times} | {'yes' if identical else 'NO'} "
                     f"({distinct}) | {layers} | {' | '.join(whole)} |")
    return heading, lines + [""] + layer_lines


def write_readme(heading, lines):
    """Replaces this GPU's section of the README's CUDA block, keeping other GPUs' sections."""
    from benchmarks.peers import replace_cpu_section
    with open(README) as f:
        text = f.read()
    with open(README, "w") as f:
        f.write(replace_cpu_section(text, heading, lines, (BEGIN, END)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="measure on this GPU and write the results here")
    parser.add_argument("--from-json", help="write the README section from earlier results")
    parser.add_argument("--export", help="write the models' .qmodel files to this folder")
    parser.add_argument("--models", help="the folder --export wrote (with --json)")
    parser.add_argument("--build-dir", default="/tmp/qtk-cuda-build")
    parser.add_argument("--cuda-arch", default="native", help="CMAKE_CUDA_ARCHITECTURES")
    args = parser.parse_args()
    if args.export:
        export_models(args.export)
        return
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
        write_readme(*render(results))
    elif args.json and args.models:
        results = measure(args)
    else:
        parser.error("give --export DIR, --json FILE --models DIR (measure) or --from-json FILE")
    heading, lines = render(results)
    print("\n".join(["## " + heading, ""] + lines))


if __name__ == "__main__":
    main()
