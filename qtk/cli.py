"""The ``qtk`` command: deploy tools for .qmodel files.

    qtk inspect model.qmodel [--json]
    qtk run model.qmodel --input x.npy|image.png [--output out.npy] [--threads N] [--int8]
    qtk bench model.qmodel [--threads 1 2] [--batch 1 4] [--runs N] [--warmup N]
    qtk profile model.qmodel --trace trace.json [--runs N] [--threads N] [--batch N]
                [--chart time.png [--chart-by node|op]]
    qtk diff module:function model.qmodel [--input x.npy] [--repro node.qmodel]
    qtk export module:function out.qmodel
    qtk fastrun model.qmodel --cache FILE [--threads N]

``inspect`` lists the nodes (ops, shapes, dtypes, scales and zero points, weights, MACs, the
algorithm each gets on this CPU) and the activation arena against its lower bound. ``run`` runs
.npy inputs (or an image, resized to the model's input) and writes outputs as .npy. ``bench``
prints the latency distribution per (threads, batch), as ncnn's benchncnn does. ``profile`` writes a
Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev) with one slice per node per run and a
track per thread, and prints the time per op. ``diff`` finds the first node whose bytes in the
runtime differ from the Quantized model's in torch (docs/tools.md). ``export`` writes a .qmodel from a function that
returns (model, example input). ``fastrun`` times every candidate algorithm of each layer on this
machine (Fast-Run), records the winners in FILE and prints which algorithm serves each node;
``qtk.runtime.load(path, threads=N, fast_run="use", fast_run_cache=FILE)`` then takes them.

``module:function`` is an importable module (``pkg.models:tiny``, found from the current
directory as ``python -m`` would) or a file (``path/to/models.py:tiny``); the function takes no
arguments.
"""
import argparse
import collections
import importlib
import importlib.util
import json
import os
import sys
import time

import numpy as np

from . import runtime


def _progress(iterable=None, **kwargs):
    """tqdm on stderr, quiet when stderr is not a terminal unless QTK_PROGRESS=1."""
    import tqdm

    disable = not (sys.stderr.isatty() or os.environ.get("QTK_PROGRESS") == "1")
    return tqdm.tqdm(iterable, disable=disable, leave=False, **kwargs)


def _table(header, rows, align=None):
    """Rows of strings as aligned columns; ``align`` per column, '<' or '>' (numbers)."""
    rows = [[str(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]
    align = align or ["<"] * len(header)
    line = lambda cells: "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _load_function(spec):
    """``module:function`` or ``file.py:function`` -> the function."""
    module_name, sep, function = spec.rpartition(":")
    if not sep or not module_name or not function:
        raise SystemExit(f"expected module:function or file.py:function, got {spec!r}")
    if module_name.endswith(".py") or os.sep in module_name:
        name = os.path.splitext(os.path.basename(module_name))[0]
        loader = importlib.util.spec_from_file_location(name, module_name)
        if loader is None:
            raise SystemExit(f"cannot import {module_name!r}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    if not hasattr(module, function):
        raise SystemExit(f"{module_name} has no function {function!r}")
    return getattr(module, function)


def _model_and_input(spec):
    result = _load_function(spec)()
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise SystemExit(f"{spec} must return (model, example_input), got {type(result).__name__}")
    return result


def _human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _time_unit(seconds):
    """(factor, name): microseconds where a typical time is below a millisecond."""
    return (1e6, "us") if seconds < 1e-3 else (1e3, "ms")


def _shape(shape):
    return "x".join(str(d) for d in shape)


def _random_inputs(session, batch, rng):
    """Float inputs within each input's representable range (int8 inputs) or standard normal;
    random pixels for an image input."""
    arrays = []
    for info in session.inputs:
        shape = [batch] + list(info["shape"][1:])
        if info["dtype"] == "uint8":
            arrays.append(rng.integers(0, 256, size=shape, dtype=np.uint8))
        elif info["dtype"] == "int8":
            low = (-128 - info["zero_point"]) * info["scale"]
            high = (127 - info["zero_point"]) * info["scale"]
            arrays.append(rng.uniform(low, high, size=shape).astype(np.float32))
        else:
            arrays.append(rng.standard_normal(size=shape).astype(np.float32))
    return arrays


# ---------------------------------------------------------------------------------------- inspect

def _runtime_nodes(path, threads):
    """The runtime's view: the session (its arena), per node (execution order) name, op,
    algorithm and MACs, and which runtime node writes each value (one run on zeros of a second
    session that keeps intermediates, whose arena is larger)."""
    session = runtime.load(path, threads=threads, profile=True)
    debugging = runtime.load(path, threads=threads, keep_intermediates=True)
    debugging.run(*[np.zeros(info["shape"], dtype=np.uint8 if info["dtype"] == "uint8"
                             else np.float32) for info in session.inputs])
    writes = {}  # an NHWC twin's writer writes the value (a permute back only copies it)
    for v in debugging._session.intermediates():
        if v["node"] and v["value"].endswith(" (NHWC)"):
            writes[v["value"][:-len(" (NHWC)")]] = v["node"]
        elif v["node"]:
            writes.setdefault(v["value"], v["node"])
    return session, session.profile(), writes


def inspect_model(path, threads=1):
    """A dict describing the model as the file has it and as the runtime runs it here."""
    from .export.qmodel_reader import read_qmodel

    qfile = read_qmodel(path)
    session, nodes, writes = _runtime_nodes(path, threads)
    # A runtime node keeps its file node's name and op; a permute the layout pass adds is named
    # after the value it writes, which may be a file node's name too.
    by_key = {}
    for n in nodes:
        by_key.setdefault((n["name"], n["op"]), n)
    file_keys = {(n.name, n.op) for n in qfile.nodes}

    def describe_value(vid):
        v = qfile.values[vid]
        d = dict(name=v.name, dtype=v.dtype, shape=v.shape)
        if v.dtype == "int8" and not v.constant:
            d.update(scale=v.scale, zero_point=v.zero_point)
        return d

    rows = []
    for index, node in enumerate(qfile.nodes):
        served = by_key.get((node.name, node.op))
        outputs = [describe_value(v) for v in node.outputs]
        if served is not None:
            algorithm, macs = served["algorithm"], served["macs"]
        else:  # the runtime merged it into another node
            fused_into = writes.get(qfile.values[node.outputs[0]].name, "")
            algorithm, macs = f"fused into {fused_into!r}" if fused_into else "(not run)", 0
        weights = [describe_value(v) for v in node.inputs if qfile.values[v].constant]
        quant = {}
        for key in ("multiplier", "shift"):
            if key in node.attrs and len(node.attrs[key]) > 0:
                values = node.attrs[key]
                quant[key] = [min(values), max(values)] if len(values) > 1 else values
        rows.append(dict(index=index, op=node.op, name=node.name,
                         inputs=[describe_value(v) for v in node.inputs
                                 if not qfile.values[v].constant],
                         outputs=outputs, constants=weights, requantize=quant, macs=macs,
                         algorithm=algorithm))
    added = [dict(op=n["op"], name=n["name"], algorithm=n["algorithm"]) for n in nodes
             if (n["name"], n["op"]) not in file_keys]
    size = os.path.getsize(path)
    return dict(
        path=os.fspath(path), producer=qfile.producer, file_bytes=size,
        inputs=[describe_value(v) for v in qfile.inputs],
        outputs=[describe_value(v) for v in qfile.outputs],
        nodes=rows, runtime_added_nodes=added, runtime_node_count=len(nodes),
        macs=sum(n["macs"] for n in nodes), batch=qfile.values[qfile.inputs[0]].shape[0],
        threads=threads, arena_bytes=session.arena_bytes,
        arena_lower_bound=session.arena_lower_bound,
        weight_bytes=sum(v.file_size for v in qfile.values if v.constant))


def _qparams(v):
    return f"{v['scale']:.4g}/{v['zero_point']}" if "scale" in v else ""


def inspect_command(args):
    info = inspect_model(args.model, args.threads)
    if args.json:
        print(json.dumps(info, indent=1))
        return
    print(f"{info['path']}: {info['producer']}, {_human_bytes(info['file_bytes'])} "
          f"({_human_bytes(info['weight_bytes'])} of constants), {len(info['nodes'])} nodes in "
          f"the file, {info['runtime_node_count']} as the runtime runs them")
    for kind in ("inputs", "outputs"):
        for v in info[kind]:
            print(f"  {kind[:-1]} {v['name']!r}: {v['dtype']} [{_shape(v['shape'])}]"
                  + (f" scale {v['scale']:.6g} zero point {v['zero_point']}" if "scale" in v
                     else ""))
    rows = []
    for n in info["nodes"]:
        out = n["outputs"][0]
        const = ", ".join(f"{c['dtype']}[{_shape(c['shape'])}]" for c in n["constants"])
        req = n["requantize"]
        requant = (f"m {req['multiplier'][0]}..{req['multiplier'][-1]} s "
                   f"{req['shift'][0]}..{req['shift'][-1]}" if "multiplier" in req and
                   "shift" in req else "")
        rows.append([n["index"], n["op"], n["name"],
                     " ".join(f"[{_shape(i['shape'])}]" for i in n["inputs"]),
                     f"{out['dtype']} [{_shape(out['shape'])}]"
                     + ("" if len(n["outputs"]) == 1 else f" +{len(n['outputs']) - 1}"),
                     _qparams(out), const, requant,
                     f"{n['macs']:,}" if n["macs"] else "", n["algorithm"]])
    print()
    print(_table(["#", "op", "name", "inputs", "output", "scale/zp", "constants",
                  "requantize", "MACs", "algorithm (this CPU)"], rows,
                 [">", "<", "<", "<", "<", "<", "<", "<", ">", "<"]))
    if info["runtime_added_nodes"]:
        print(f"\nadded by the runtime's graph passes: "
              + ", ".join(f"{n['op']} {n['name']!r} ({n['algorithm']})"
                          for n in info["runtime_added_nodes"]))
    lower = info["arena_lower_bound"]
    ratio = info["arena_bytes"] / lower if lower else float("nan")
    print(f"\n{info['macs']:,} MACs per batch of {info['batch']}; activation arena "
          f"{_human_bytes(info['arena_bytes'])} ({info['arena_bytes']:,} bytes) against a lower "
          f"bound of {_human_bytes(lower)} ({lower:,} bytes): {ratio:.3f}x, batch {info['batch']}, "
          f"{info['threads']} thread(s)")


# -------------------------------------------------------------------------------------------- run

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def read_image(path, shape, mean=None, std=None):
    """An image file as a float32 [1, C, H, W] array for an input of ``shape`` [N, C, H, W]:
    converted to C channels (1: grayscale, 3: RGB, 4: RGBA), resized to H x W (bilinear), scaled
    to [0, 1], then ``(x - mean) / std`` per channel when given. Reads with PIL, else matplotlib
    (PNG only)."""
    if len(shape) != 4 or shape[1] not in (1, 3, 4):
        raise SystemExit(f"an image can feed an input of shape [N, 1|3|4, H, W], this one is "
                         f"{list(shape)}: give an .npy")
    channels, height, width = shape[1], shape[2], shape[3]
    try:
        from PIL import Image
    except ImportError:
        Image = None
    if Image is not None:
        with Image.open(path) as image:
            image = image.convert({1: "L", 3: "RGB", 4: "RGBA"}[channels])
            image = image.resize((width, height), Image.BILINEAR)
            pixels = np.asarray(image, dtype=np.float32) / 255.0
    else:
        try:
            import matplotlib.image
            import torch
        except ImportError:
            raise SystemExit("reading an image needs PIL (pip install pillow) or matplotlib")
        pixels = matplotlib.image.imread(path).astype(np.float32)
        if pixels.max() > 1.0:
            pixels = pixels / 255.0
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        if channels == 1 and pixels.shape[2] >= 3:
            pixels = (pixels[:, :, :3] @ np.array([0.299, 0.587, 0.114], np.float32))[:, :, None]
        elif channels >= 3 and pixels.shape[2] == 1:
            pixels = np.repeat(pixels, channels, axis=2)
        pixels = pixels[:, :, :channels]
        resized = torch.nn.functional.interpolate(
            torch.from_numpy(pixels).permute(2, 0, 1)[None], size=(height, width),
            mode="bilinear", align_corners=False)
        pixels = resized[0].permute(1, 2, 0).numpy()
    x = pixels.reshape(height, width, channels).transpose(2, 0, 1)[None].copy()
    if mean is not None:
        x -= np.asarray(mean, np.float32).reshape(1, -1, 1, 1)
    if std is not None:
        x /= np.asarray(std, np.float32).reshape(1, -1, 1, 1)
    return x


def read_image_pixels(path, shape, bgr=False):
    """An image file as uint8 [1, H, W, C] pixels for a model exported with ``image=`` (input
    ``shape`` [N, H, W, C]): decoded and converted to C channels (1: grayscale, 3: RGB, or BGR
    where the model was exported for it) but not resized, since the model resizes and crops from
    the size it was exported for, which the file must have. Reads with PIL."""
    height, width, channels = shape[1:]
    try:
        from PIL import Image
    except ImportError:
        raise SystemExit("reading an image for an image model needs PIL (pip install pillow)")
    with Image.open(path) as image:
        pixels = np.asarray(image.convert({1: "L", 3: "RGB", 4: "RGBA"}[channels]))
    if pixels.shape[:2] != (height, width):
        raise SystemExit(f"{path} is {pixels.shape[1]} x {pixels.shape[0]} pixels, but the model "
                         f"takes {width} x {height} images (the size it was exported for: its "
                         f"resize and crop start from there)")
    pixels = pixels.reshape(1, height, width, channels)
    return np.ascontiguousarray(pixels[..., ::-1]) if bgr else pixels


def _exported_for_bgr(path):
    """Whether the model's image_to_int8 node reads BGR sources (its channel map is 2, 1, 0)."""
    from .export.qmodel_reader import read_qmodel

    return any(n.op == "image_to_int8" and list(n.attrs["channels"]) == [2, 1, 0]
               for n in read_qmodel(path).nodes)


def read_input(path, info, mean=None, std=None, bgr=False):
    """An .npy (float or int8, or uint8 pixels for an image input; without the batch dim it gets
    one) or an image file."""
    image_input = info["dtype"] == "uint8"
    if image_input and (mean is not None or std is not None):
        raise SystemExit("this model normalizes its images itself (it was exported with image=): "
                         "leave out --mean and --std")
    if path.lower().endswith(IMAGE_SUFFIXES):
        if image_input:
            return read_image_pixels(path, info["shape"], bgr)
        return read_image(path, info["shape"], mean, std)
    x = np.load(path)
    if x.ndim == len(info["shape"]) - 1:
        x = x[None]
    if x.dtype != np.int8 and not image_input:
        x = x.astype(np.float32)
    return x


def run_command(args):
    session = runtime.load(args.model, threads=args.threads)
    if len(args.input) != len(session.inputs):
        raise SystemExit(f"the model takes {len(session.inputs)} input(s) "
                         f"({', '.join(i['name'] for i in session.inputs)}), got "
                         f"{len(args.input)}")
    bgr = any(info["dtype"] == "uint8" for info in session.inputs) and _exported_for_bgr(
        args.model)
    inputs = [read_input(p, info, args.mean, args.std, bgr) for p, info in zip(args.input,
                                                                                session.inputs)]
    outputs = session.run(*inputs, output="int8" if args.int8 else "float")
    outputs = outputs if isinstance(outputs, list) else [outputs]
    for index, (y, info) in enumerate(zip(outputs, session.outputs)):
        line = f"output {info['name']!r}: {y.dtype} [{_shape(y.shape)}]"
        if y.ndim == 2 and y.shape[1] > 1:
            top = np.argsort(-y.astype(np.float64), axis=1)[:, :5]
            line += "; top-5 per sample: " + "; ".join(
                " ".join(f"{k}:{y[n, k]:.4g}" for k in row) for n, row in enumerate(top[:4]))
        print(line)
        if args.output:
            path = args.output
            if len(outputs) > 1:
                stem, ext = os.path.splitext(args.output)
                path = f"{stem}_{index}{ext or '.npy'}"
            np.save(path, y)
            print(f"  written to {path}")


# ------------------------------------------------------------------------------------------ bench

def bench(path, threads_list, batches, runs, warmup, seed=0):
    """Per (threads, batch): latencies in seconds of ``runs`` timed runs after ``warmup``."""
    rng = np.random.default_rng(seed)
    results = []
    total = len(threads_list) * len(batches) * (runs + warmup)
    with _progress(total=total, desc="bench", unit="run") as bar:
        for threads in threads_list:
            session = runtime.load(path, threads=threads)
            for batch in batches:
                inputs = _random_inputs(session, batch, rng)
                for _ in range(warmup):
                    session.run(*inputs)
                    bar.update()
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    session.run(*inputs)
                    times.append(time.perf_counter() - start)
                    bar.update()
                results.append(dict(threads=threads, batch=batch, times=times))
    return results


def _percentile(values, q):
    return float(np.percentile(np.asarray(values), q, method="linear"))


def bench_command(args):
    results = bench(args.model, args.threads, args.batch, args.runs, args.warmup)
    factor, unit = _time_unit(min(float(np.median(r["times"])) for r in results))
    rows = []
    for r in results:
        t = np.asarray(r["times"]) * factor
        median = float(np.median(t))
        rows.append([r["threads"], r["batch"], f"{t.min():.3f}", f"{median:.3f}",
                     f"{_percentile(t, 90):.3f}", f"{t.max():.3f}",
                     f"{median / r['batch']:.3f}", f"{factor * r['batch'] / median:.1f}"])
    print(f"{args.model}: {args.runs} runs after {args.warmup} warm-up; times in {unit}")
    print(_table(["threads", "batch", "min", "median", "p90", "max", "median/sample",
                  "samples/s"], rows, [">"] * 8))


# ---------------------------------------------------------------------------------------- profile

def _us(seconds):
    return round(seconds * 1e6, 3)


def profile(path, runs, threads, batch=None, warmup=1, seed=0):
    """``(trace, nodes)``: a Chrome trace-event dict and, per node, its seconds over the traced
    runs and ``busy``, the seconds its threads spent in its work.

    The trace has complete ("X") events, ts and dur in microseconds: on the calling thread's track
    (tid 1) one slice per node per run (category: the op) inside one slice per run (category
    "run"); on every thread's track (tid 1 + the pool's thread index) one slice per range of a
    node's parallel loops that the thread ran (category "range"), nested in the node's time."""
    session = runtime.load(path, threads=threads, profile=True)
    batch = batch or session.inputs[0]["shape"][0]
    inputs = _random_inputs(session, batch, np.random.default_rng(seed))
    for _ in range(warmup):
        session.run(*inputs)
    pid = 1
    events = [dict(name="process_name", ph="M", pid=pid, tid=1,
                   args=dict(name=f"qtk {os.path.basename(os.fspath(path))}"))]
    for thread in range(threads):
        name = (f"session: calling thread ({threads} thread(s), batch {batch})" if thread == 0
                else f"worker {thread}")
        events.append(dict(name="thread_name", ph="M", pid=pid, tid=1 + thread,
                           args=dict(name=name)))
        events.append(dict(name="thread_sort_index", ph="M", pid=pid, tid=1 + thread,
                           args=dict(sort_index=thread)))
    per_node = None
    for run in _progress(range(runs), desc="profile", unit="run"):
        session.run(*inputs)
        nodes = session.profile()
        if per_node is None:
            per_node = [dict(name=n["name"], op=n["op"], algorithm=n["algorithm"],
                             macs=n["macs"], seconds=0.0, busy=0.0) for n in nodes]
        for n, total in zip(nodes, per_node):
            total["seconds"] += n["last_seconds"]
            ranges = n.get("last_ranges", [])
            total["busy"] += sum(r[2] for r in ranges) if ranges else n["last_seconds"]
            events.append(dict(name=n["name"], cat=n["op"], ph="X", pid=pid, tid=1,
                               ts=_us(n["last_start"]), dur=_us(n["last_seconds"]),
                               args=dict(op=n["op"], algorithm=n["algorithm"], macs=n["macs"],
                                         run=run, ranges=len(ranges))))
            for part, (thread, start, seconds) in enumerate(ranges):
                events.append(dict(name=n["name"], cat="range", ph="X", pid=pid, tid=1 + thread,
                                   ts=_us(start), dur=_us(seconds),
                                   args=dict(op=n["op"], run=run, part=part)))
        if nodes:
            start = min(n["last_start"] for n in nodes)
            end = max(n["last_start"] + n["last_seconds"] for n in nodes)
            events.append(dict(name=f"run {run}", cat="run", ph="X", pid=pid, tid=1,
                               ts=_us(start), dur=_us(end - start),
                               args=dict(run=run, batch=batch, threads=threads)))
    trace = dict(traceEvents=events, displayTimeUnit="ms",
                 otherData=dict(model=os.fspath(path), threads=threads, batch=batch, runs=runs))
    return trace, per_node or []


def profile_command(args):
    trace, nodes = profile(args.model, args.runs, args.threads, args.batch)
    with open(args.trace, "w") as f:
        json.dump(trace, f)
    runs = args.runs
    total = sum(n["seconds"] for n in nodes) / runs or float("nan")
    by_op = collections.OrderedDict()
    for n in sorted(nodes, key=lambda n: -n["seconds"]):
        entry = by_op.setdefault(n["op"], dict(count=0, seconds=0.0, busy=0.0, macs=0))
        entry["count"] += 1
        entry["seconds"] += n["seconds"] / runs
        entry["busy"] += n["busy"] / runs
        entry["macs"] += n["macs"]
    threads = trace["otherData"]["threads"]
    factor, unit = _time_unit(total)
    rows = [[op, e["count"], f"{e['seconds'] * factor:.3f}", f"{100 * e['seconds'] / total:.1f}",
             f"{e['macs']:,}" if e["macs"] else "",
             f"{e['macs'] / e['seconds'] / 1e9:.2f}" if e["macs"] and e["seconds"] else "",
             f"{100 * e['busy'] / (threads * e['seconds']):.0f}" if e["seconds"] else ""]
            for op, e in by_op.items()]
    print(f"{args.model}: {runs} run(s), {trace['otherData']['threads']} thread(s), batch "
          f"{trace['otherData']['batch']}; {total * factor:.3f} {unit} per run in nodes")
    print(_table(["op", "nodes", f"{unit}/run", "%", "MACs", "GMAC/s", "threads busy %"], rows,
                 ["<", ">", ">", ">", ">", ">", ">"]))
    slowest = sorted(nodes, key=lambda n: -n["seconds"])[:args.top]
    print()
    print(_table(["node", "op", "algorithm", f"{unit}/run", "%"],
                 [[n["name"], n["op"], n["algorithm"], f"{n['seconds'] / runs * factor:.3f}",
                   f"{100 * n['seconds'] / runs / total:.1f}"] for n in slowest],
                 ["<", "<", "<", ">", ">"]))
    print(f"\ntrace: {args.trace} (open in ui.perfetto.dev or chrome://tracing)")
    if args.chart:
        profile_chart(nodes, runs, args.chart, by=args.chart_by,
                      title=f"{os.path.basename(args.model)}: {threads} thread(s), batch "
                            f"{trace['otherData']['batch']}, mean of {runs} run(s)")
        print(f"chart: {args.chart}")


def profile_chart(nodes, runs, out, by="node", title=""):
    """A bar chart (PNG ``out``) of the time per run of each node, in execution order, or (``by=
    "op"``) of each op's nodes together, slowest first; ``nodes`` as :func:`profile` returns
    them."""
    from .charts import Panel, save_bar_chart

    if by == "node":
        labels = [f"{n['name']} ({n['op']})" for n in nodes]
        seconds = [n["seconds"] / runs for n in nodes]
    else:
        per_op = collections.Counter()
        for n in nodes:
            per_op[n["op"]] += n["seconds"] / runs
        labels, seconds = zip(*per_op.most_common()) if per_op else ((), ())
    factor, unit = _time_unit(max(seconds, default=0.0))
    save_bar_chart([Panel(list(labels), {"time": [s * factor for s in seconds]},
                          f"{unit} per run", title=title)], out)


# ------------------------------------------------------------------------------------- diff, export

def diff_command(args):
    from . import debug

    model, example = _model_and_input(args.source)
    inputs = example
    if args.input:
        import torch

        inputs = tuple(torch.from_numpy(np.load(p).astype(np.float32)) for p in args.input)
    found = debug.first_divergence(model, args.model, inputs, threads=args.threads,
                                   repro_path=args.repro, progress=_progress)
    if found is None:
        print(f"{args.model}: every value the runtime computed equals the reference's (int8 "
              f"byte for byte, float32 within the tolerance of qtk.debug)")
        return 0
    print(found)
    return 1


def export_command(args):
    from .export.exporter import export
    from .export.qmodel_reader import read_qmodel

    model, example = _model_and_input(args.source)
    data = export(model, example, args.output)
    session = runtime.load(data)  # the runtime checks it
    print(f"{args.output}: {len(read_qmodel(data).nodes)} nodes, {_human_bytes(len(data))}, "
          f"inputs " + ", ".join(f"{i['name']} {i['dtype']} [{_shape(i['shape'])}]"
                                 for i in session.inputs))


def fastrun(args):
    session = runtime.load(args.model, threads=args.threads, fast_run="search",
                           fast_run_cache=args.cache)
    ops = session.model.op_names
    width = max(len(op) for op in ops)
    for index, (op, algorithm) in enumerate(zip(ops, session.algorithms)):
        if algorithm != "reference":
            print(f"{index:4d}  {op:<{width}}  {algorithm}")
    counts = collections.Counter(a for a in session.algorithms if a != "reference")
    summary = ", ".join(f"{n} x {a}" for a, n in counts.most_common()) or "no layer had a choice"
    print(f"{args.model}: {summary} ({args.threads} thread(s)); cache: {args.cache}")


def _parser():
    parser = argparse.ArgumentParser(prog="qtk", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:11]))
    commands = parser.add_subparsers(dest="command", required=True)

    command = commands.add_parser("inspect", help="nodes, shapes, qparams, MACs, algorithms, "
                                                  "memory")
    command.add_argument("model", help="the .qmodel file")
    command.add_argument("--threads", type=int, default=1, help="the session's thread count")
    command.add_argument("--json", action="store_true", help="print a JSON document instead")
    command.set_defaults(run=inspect_command)

    command = commands.add_parser("run", help="run on .npy or image inputs, write .npy outputs")
    command.add_argument("model", help="the .qmodel file")
    command.add_argument("--input", required=True, nargs="+",
                         help="one .npy (float32 or int8, with or without the batch dim) or image "
                              "file per model input; an image is resized to the input's H x W, "
                              "converted to its channel count and scaled to [0, 1], or for a "
                              "model exported with image= given as its uint8 pixels")
    command.add_argument("--output", help="the .npy to write (several outputs: NAME_<i>.npy)")
    command.add_argument("--threads", type=int, default=1)
    command.add_argument("--int8", action="store_true", help="raw int8 outputs, not dequantized")
    command.add_argument("--mean", type=float, nargs="+", help="images: subtract per channel")
    command.add_argument("--std", type=float, nargs="+", help="images: divide per channel")
    command.set_defaults(run=run_command)

    command = commands.add_parser("bench", help="latency distribution per threads and batch")
    command.add_argument("model", help="the .qmodel file")
    command.add_argument("--threads", type=int, nargs="+", default=[1])
    command.add_argument("--batch", type=int, nargs="+", default=[1])
    command.add_argument("--runs", type=int, default=50, help="timed runs per configuration")
    command.add_argument("--warmup", type=int, default=5, help="untimed runs first")
    command.set_defaults(run=bench_command)

    command = commands.add_parser("profile", help="Chrome/Perfetto trace and time per op")
    command.add_argument("model", help="the .qmodel file")
    command.add_argument("--trace", required=True, help="the trace JSON file to write")
    command.add_argument("--runs", type=int, default=10)
    command.add_argument("--threads", type=int, default=1)
    command.add_argument("--batch", type=int, default=None, help="default: the file's")
    command.add_argument("--top", type=int, default=10, help="slowest nodes to list")
    command.add_argument("--chart", help="also draw the time per run as a bar chart (PNG; needs "
                                         "matplotlib)")
    command.add_argument("--chart-by", choices=("node", "op"), default="node",
                         help="one bar per node (execution order) or per op (slowest first)")
    command.set_defaults(run=profile_command)

    command = commands.add_parser("diff", help="first node whose runtime bytes differ from the "
                                               "Quantized reference's")
    command.add_argument("source", help="module:function returning (quantized_model, "
                                        "example_input)")
    command.add_argument("model", help="the .qmodel exported from that model")
    command.add_argument("--input", nargs="+", help=".npy float input(s); default: the example")
    command.add_argument("--repro", help="write the divergent node alone as this .qmodel (and "
                                         "its inputs as REPRO.inputs.npz)")
    command.add_argument("--threads", type=int, default=1)
    command.set_defaults(run=diff_command)

    command = commands.add_parser("export", help="write a .qmodel from module:function")
    command.add_argument("source", help="module:function returning (model, example_input): a "
                                        "qtk.convert model, or a float model for a float export")
    command.add_argument("output", help="the .qmodel to write")
    command.set_defaults(run=export_command)

    command = commands.add_parser("fastrun", help="choose each layer's algorithm by timing")
    command.add_argument("model", help="the .qmodel file")
    command.add_argument("--cache", required=True, help="the Fast-Run cache file to fill")
    command.add_argument("--threads", type=int, default=1, help="the sessions' thread count")
    command.set_defaults(run=fastrun)
    return parser


def main(argv=None):
    """Returns (and, run as ``qtk``, exits with) 0, or 1 where ``diff`` found a divergence."""
    args = _parser().parse_args(argv)
    try:
        status = args.run(args)
    except runtime.QtkError as error:
        sys.exit(f"qtk {args.command}: {error}")
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
