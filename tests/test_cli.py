"""The ``qtk`` deploy tools on a tiny exported model (tests/cli_models.py): export, inspect, run,
bench, profile (a Chrome trace with one slice per node per run), diff / qtk.debug.first_divergence
(names the node whose weights a test corrupts, None on an intact file), and the runtime's
keep_intermediates and per-run timestamps they rest on."""
import json
import pathlib

import numpy as np
import pytest
import torch

import qtk
from qtk import cli, debug
from qtk.export.qmodel_reader import read_qmodel

from conftest import assert_not_degenerate

MODELS = pathlib.Path(__file__).with_name("cli_models.py")
TINY = f"{MODELS}:tiny"


def _load_models_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("cli_models", MODELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(quantized model, example input, path of its .qmodel written by ``qtk export``)."""
    path = tmp_path_factory.mktemp("cli") / "tiny.qmodel"
    assert cli.main(["export", TINY, str(path)]) == 0
    quantized, example = _load_models_module().tiny()
    return quantized, example, path


def _corrupted(path, tmp_path, weight, index=7):
    """A copy of the file with one bit of ``weight``'s bytes flipped (weights live in the blob
    section, which the graph CRC does not cover)."""
    value = next(v for v in read_qmodel(path).values if v.name == weight)
    data = bytearray(path.read_bytes())
    data[value.file_offset + index] ^= 0x40
    bad = tmp_path / f"bad_{weight}.qmodel"
    bad.write_bytes(bytes(data))
    return bad


def test_export_writes_what_qtk_export_writes_and_runs_exactly(tiny):
    quantized, example, path = tiny
    assert path.read_bytes() == qtk.export(quantized, example)
    x = torch.randn(5, 3, 16, 16)
    session = qtk.runtime.load(path)
    got = session.run(x, output="int8")
    with qtk.int8_outputs(quantized), torch.no_grad():
        expected = quantized(x)
    assert torch.equal(got, expected)
    assert_not_degenerate(got, min_distinct=10)


def test_inspect_lists_nodes_qparams_algorithms_and_memory(tiny, capsys):
    _, _, path = tiny
    cli.main(["inspect", str(path)])
    text = capsys.readouterr().out
    session = qtk.runtime.load(path)
    for name in ("stem.0", "block.0", "expand.0", "pool", "fc"):
        assert name in text
    for algorithm in session.algorithms:
        assert algorithm in text
    assert "fused into 'block.0'" in text  # the residual add, as the runtime runs it
    assert f"{session.arena_bytes:,} bytes" in text and f"{session.arena_lower_bound:,}" in text

    cli.main(["inspect", str(path), "--json"])
    info = json.loads(capsys.readouterr().out)
    nodes = {n["name"]: n for n in info["nodes"]}
    assert nodes["stem.0"]["macs"] == 8 * 16 * 16 * 27  # 8 x 16 x 16 outputs, 3 x 3 x 3 each
    assert nodes["fc"]["macs"] == 10 * 16
    assert nodes["stem.0"]["constants"][0]["shape"] == [8, 3, 3, 3]
    out = nodes["stem.0"]["outputs"][0]
    assert out["dtype"] == "int8" and out["scale"] > 0 and -128 <= out["zero_point"] <= 127
    assert info["inputs"][0]["scale"] == pytest.approx(session.inputs[0]["scale"])
    assert info["arena_bytes"] == session.arena_bytes >= info["arena_lower_bound"] > 0


def test_run_reads_npy_and_images_and_writes_npy(tiny, tmp_path, capsys):
    _, _, path = tiny
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    cli.main(["run", str(path), "--input", str(tmp_path / "x.npy"),
              "--output", str(tmp_path / "y.npy"), "--threads", "2"])
    expected = qtk.runtime.load(path).run(x)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)
    np.save(tmp_path / "one.npy", x[0])  # no batch dim: it gets one
    cli.main(["run", str(path), "--input", str(tmp_path / "one.npy"), "--int8",
              "--output", str(tmp_path / "q.npy")])
    q = np.load(tmp_path / "q.npy")
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q, qtk.runtime.load(path).run(x[:1], output="int8"))
    assert "top-5" in capsys.readouterr().out

    from PIL import Image

    pixels = np.random.default_rng(1).integers(0, 256, (40, 30, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "image.png")
    cli.main(["run", str(path), "--input", str(tmp_path / "image.png"),
              "--output", str(tmp_path / "image.npy")])
    image = cli.read_image(str(tmp_path / "image.png"), [1, 3, 16, 16])
    assert image.shape == (1, 3, 16, 16) and 0 <= image.min() and image.max() <= 1
    np.testing.assert_array_equal(np.load(tmp_path / "image.npy"),
                                  qtk.runtime.load(path).run(image))


def test_bench_prints_a_distribution_per_threads_and_batch(tiny, capsys):
    _, _, path = tiny
    results = cli.bench(path, [1, 2], [1, 3], runs=4, warmup=1)
    assert [(r["threads"], r["batch"]) for r in results] == [(1, 1), (1, 3), (2, 1), (2, 3)]
    assert all(len(r["times"]) == 4 and min(r["times"]) > 0 for r in results)
    cli.main(["bench", str(path), "--threads", "1", "2", "--batch", "1", "3", "--runs", "4"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:6] == ["threads", "batch", "min", "median", "p90", "max"]
    rows = [line.split() for line in lines[3:]]
    assert [row[:2] for row in rows] == [["1", "1"], ["1", "3"], ["2", "1"], ["2", "3"]]
    for row in rows:
        low, median, p90, high = map(float, row[2:6])
        assert 0 < low <= median <= p90 <= high


def test_profile_writes_one_slice_per_node_per_run(tiny, tmp_path, capsys):
    _, _, path = tiny
    trace_path = tmp_path / "trace.json"
    runs = 3
    cli.main(["profile", str(path), "--trace", str(trace_path), "--runs", str(runs),
              "--threads", "2"])
    trace = json.loads(trace_path.read_text())
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["cat"] not in ("run", "range")]
    runtime_nodes = qtk.runtime.load(path, profile=True).profile()
    names = [n["name"] for n in runtime_nodes]
    assert len(slices) == runs * len(names)
    for run in range(runs):
        in_run = [e for e in slices if e["args"]["run"] == run]
        assert [e["name"] for e in in_run] == names  # execution order
        assert [e["args"]["algorithm"] for e in in_run] == [n["algorithm"] for n in runtime_nodes]
        for before, after in zip(in_run, in_run[1:]):  # one node after the other
            assert before["ts"] + before["dur"] <= after["ts"] + 1e-3
        whole = next(e for e in events if e.get("cat") == "run" and e["args"]["run"] == run)
        assert whole["ts"] <= in_run[0]["ts"] and whole["dur"] >= 0
    for e in slices:
        assert set(e) >= {"name", "ph", "ts", "dur", "pid", "tid", "args"}
        assert e["dur"] >= 0 and isinstance(e["ts"], (int, float))
    assert {e["tid"] for e in slices} == {1}  # nodes: on the calling thread's track
    assert {e["tid"] for e in events if e["name"] == "thread_name"} == {1, 2}
    text = capsys.readouterr().out
    assert "conv2d" in text and "GMAC/s" in text and str(trace_path) in text


def test_profile_traces_each_threads_ranges_within_their_node(tiny):
    _, _, path = tiny
    trace, nodes = cli.profile(path, runs=2, threads=2, batch=4)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    ranges = [e for e in events if e["cat"] == "range"]
    node_slices = {(e["args"]["run"], e["name"]): e for e in events
                   if e["cat"] not in ("run", "range")}
    # the caller's track and the worker's (which ranges the worker takes depends on when the OS
    # runs it: on a busy machine the caller may take them all)
    assert ranges and {e["tid"] for e in ranges} <= {1, 2}
    for (run, name), node in node_slices.items():
        assert node["args"]["ranges"] == sum(e["args"]["run"] == run and e["name"] == name
                                             for e in ranges)
    for e in ranges:
        node = node_slices[(e["args"]["run"], e["name"])]
        assert node["ts"] - 0.01 <= e["ts"]
        assert e["ts"] + e["dur"] <= node["ts"] + node["dur"] + 0.01
    for n in nodes:  # busy time: at most both threads for the whole node
        assert 0 < n["busy"] <= 2 * n["seconds"] * 1.01 + 1e-6


def test_first_divergence_is_none_on_an_intact_file(tiny, capsys):
    quantized, example, path = tiny
    assert debug.first_divergence(quantized, path, torch.randn(2, 3, 16, 16)) is None
    assert cli.main(["diff", TINY, str(path)]) == 0
    assert "byte for byte" in capsys.readouterr().out


@pytest.mark.parametrize("weight, node, value", [("expand.0.weight", "expand.0", "expand.0"),
                                                 ("block.0.weight", "block.0", "add")])
def test_diff_names_the_node_whose_weight_is_corrupted(tiny, tmp_path, capsys, weight, node,
                                                       value):
    """block.0's residual add is fused into it at load: its value is the add's."""
    quantized, example, path = tiny
    bad = _corrupted(path, tmp_path, weight)
    repro = tmp_path / "node.qmodel"
    found = debug.first_divergence(quantized, bad, example, repro_path=repro)
    assert (found.node, found.op, found.value) == (node, "conv2d", value)
    assert 0 < found.mismatches < found.size and len(found.indices) == len(found.got) > 0
    assert all(w != g for w, g in zip(found.expected, found.got))
    assert "reproduces the difference" in found.repro_note

    # the reproducer: the node alone, its reference inputs, and the runtime's wrong bytes on it
    nodes = qtk.runtime.load(repro, profile=True).profile()
    assert [(n["name"], n["op"]) for n in nodes] == [(node, "conv2d")]
    arrays = np.load(f"{repro}.inputs.npz")
    out = qtk.runtime.load(repro).run(*[arrays[k] for k in sorted(arrays) if k != "expected"],
                                      output="int8")
    assert (out != arrays["expected"]).any()

    assert cli.main(["diff", TINY, str(bad), "--repro", str(tmp_path / "cli.qmodel")]) == 1
    text = capsys.readouterr().out
    assert f"first divergent node: '{node}' (conv2d)" in text and "reference" in text


def test_diff_maps_channels_last_values_back(tiny, tmp_path, monkeypatch):
    """With an NHWC conv pinned, the layout pass adds permutes and "<name> (NHWC)" values;
    they compare after a permute back to NCHW."""
    quantized, example, path = tiny
    monkeypatch.setenv("QTK_CONV_ALGO", "conv2d_int8_gemm_nhwc_24x16_avx512_vnni")
    try:
        session = qtk.runtime.load(path)
    except qtk.runtime.QtkError as error:
        pytest.skip(f"no AVX-512 VNNI NHWC conv here: {error}")
    assert any(op == "permute" for op in session.model.op_names)
    assert debug.first_divergence(quantized, path, example) is None
    found = debug.first_divergence(quantized, _corrupted(path, tmp_path, "expand.0.weight"),
                                   example)
    assert (found.node, found.value) == ("expand.0", "expand.0")


def test_keep_intermediates_returns_every_value_without_changing_results(tiny):
    _, _, path = tiny
    x = torch.randn(3, 3, 16, 16)
    plain = qtk.runtime.load(path)
    kept = qtk.runtime.load(path, keep_intermediates=True)
    with pytest.raises(qtk.runtime.QtkError, match="not run"):
        kept.intermediates()
    assert torch.equal(kept.run(x, output="int8"), plain.run(x, output="int8"))
    values = kept.intermediates()
    assert list(values)[0] == "x" and values["x"]["node"] == ""
    assert values["add"]["node"] == "block.0"  # the fused add's value
    assert values["fc"]["data"].shape == (3, 10)
    np.testing.assert_array_equal(values["fc"]["data"], plain.run(x, output="int8").numpy())
    assert kept.arena_bytes > plain.arena_bytes
    with pytest.raises(qtk.runtime.QtkError, match="keep_intermediates"):
        plain.intermediates()


def test_profile_gives_each_nodes_last_start_and_time(tiny):
    _, _, path = tiny
    session = qtk.runtime.load(path, profile=True)
    session.run(torch.randn(1, 3, 16, 16))
    first = session.profile()
    session.run(torch.randn(1, 3, 16, 16))
    second = session.profile()
    assert all(b["last_start"] > a["last_start"] for a, b in zip(first, second))
    for nodes in (first, second):
        for before, after in zip(nodes, nodes[1:]):
            assert before["last_start"] + before["last_seconds"] <= after["last_start"]
        assert all(n["seconds"] >= n["last_seconds"] >= 0 for n in nodes)


def test_diff_compares_a_float_export_within_a_tolerance(tmp_path, capsys):
    """A float model exports as float32 ops, which need not give torch's bits: within
    qtk.debug's tolerance they agree, and a flipped exponent bit is found."""
    path = tmp_path / "float.qmodel"
    assert cli.main(["export", f"{MODELS}:tiny_float", str(path)]) == 0
    model, example = _load_models_module().tiny_float()
    assert debug.first_divergence(model, path, torch.randn(2, 3, 16, 16)) is None
    bad = _corrupted(path, tmp_path, "expand.0.weight", index=3)  # a float's sign/exponent byte
    assert cli.main(["diff", f"{MODELS}:tiny_float", str(bad)]) == 1
    assert "first divergent node: 'expand.0' (conv2d)" in capsys.readouterr().out


def test_diff_in_a_mixed_model_finds_a_corrupted_float_layer(tmp_path):
    """The linear kept float runs after a dequantize; its corrupted weight is found within the
    float tolerance, past the int8 part that agrees byte for byte."""
    path = tmp_path / "mixed.qmodel"
    assert cli.main(["export", f"{MODELS}:tiny_mixed", str(path)]) == 0
    model, example = _load_models_module().tiny_mixed()
    assert [n.op for n in read_qmodel(path).nodes][-2:] == ["dequantize", "linear"]
    assert debug.first_divergence(model, path, example) is None
    repro = tmp_path / "fc.qmodel"
    found = debug.first_divergence(model, _corrupted(path, tmp_path, "fc.weight", index=3),
                                   example, repro_path=repro)
    assert (found.node, found.op) == ("fc", "linear")
    # the input and every node's value up to fc's, but block.0's own: its add is fused into it
    assert found.checked == 1 + len(read_qmodel(path).nodes) - 1
    assert "reproduces the difference" in found.repro_note


def test_diff_tells_a_difference_that_only_arena_reuse_shows(tiny, monkeypatch):
    """Every value agrees in the debugging session (no memory reuse) but an ordinary session's
    output does not: the finder says so instead of reporting no divergence."""
    quantized, example, path = tiny
    load = qtk.runtime.load

    class Clobbered:
        def __init__(self, session):
            self.session = session

        def run(self, *inputs, output="float"):
            y = self.session.run(*inputs, output=output).copy()
            y[0, 3] ^= 1
            return y

    def fake_load(model, keep_intermediates=False, **kwargs):
        session = load(model, keep_intermediates=keep_intermediates, **kwargs)
        return session if keep_intermediates else Clobbered(session)

    monkeypatch.setattr(debug.runtime, "load", fake_load)
    found = debug.first_divergence(quantized, path, example)
    assert (found.node, found.value, found.indices) == ("(arena reuse)", "fc", [(0, 3)])
    assert "memory" in found.repro_note and found.checked > 5
