"""Peak RSS of one engine alone: python peak_rss_child.py ENGINE FILE THREADS prints bytes.

Imports only numpy and that engine's runtime (qtk's extension module is loaded from its file, so
neither torch nor the qtk package is imported), loads the deployable file, runs it 20 times.
"""
import importlib.util
import os
import sys

import numpy as np

SIZE = 224


def load_qtk_extension():
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "qtk")
    extension = next(f for f in os.listdir(package) if f.startswith("_C."))
    spec = importlib.util.spec_from_file_location("_C", os.path.join(package, extension))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runner(engine, path, threads, x):
    if engine.startswith("qtk"):
        native = load_qtk_extension()
        session = native.Session(native.Model.load(path), threads)
        if engine == "qtk fp32":  # a float model: float32 in, no quantization
            return lambda: session.run([x])
        return lambda: session.run([session.quantize_input(0, x)])
    if engine.startswith("ONNX"):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        return lambda: session.run(None, {"x": x})
    if engine.startswith("OpenVINO"):
        import openvino as ov

        config = {"INFERENCE_NUM_THREADS": threads}
        precision = {"OpenVINO fp32": "f32", "OpenVINO bf16": "bf16"}.get(engine)  # as peers.py
        if precision:
            config["INFERENCE_PRECISION_HINT"] = precision
        compiled = ov.Core().compile_model(path, "CPU", config)
        request = compiled.create_infer_request()
        return lambda: request.infer({0: x})
    raise ValueError(f"no standalone runner for {engine!r}")


def main(engine, path, threads):
    x = np.random.default_rng(0).standard_normal((1, 3, SIZE, SIZE), dtype=np.float32)
    run = runner(engine, path, int(threads), x)
    for _ in range(20):
        run()
    print(peak_resident_bytes())


def peak_resident_bytes():
    """VmHWM, this address space's high-water mark (getrusage's ru_maxrss would include the
    parent's peak: Linux carries it across the fork and exec that started this process)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024


if __name__ == "__main__":
    main(*sys.argv[1:])
