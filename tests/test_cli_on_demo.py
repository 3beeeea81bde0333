"""Every ``qtk`` subcommand on the README demo's model, as a user runs them after the demo:
``qtk export model_zoo.mnist:short_demo`` (the demo's own training code, one epoch of float and
one of QAT), then inspect, run (an .npy and a real digit as PNG), bench, profile (trace and chart)
and diff (intact and tampered file). tests/test_cli.py tests each subcommand's details on a tiny
model with a random input."""
import json

import numpy as np
import pytest
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, require_module
from model_zoo.data import MNIST_MEAN, MNIST_STD, mnist_5k
from model_zoo.mnist import short_demo, small_cnn
from qtk import cli
from qtk.export.qmodel_reader import read_qmodel

DEMO = "model_zoo.mnist:short_demo"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(the demo's Quantized model, its example digit, the .qmodel ``qtk export`` wrote)."""
    path = tmp_path_factory.mktemp("demo") / "mnist.qmodel"
    assert cli.main(["export", DEMO, str(path)]) == 0
    quantized, example = short_demo()
    return quantized, example, path


@pytest.fixture(scope="module")
def digits():
    """The demo's test digits, normalized as it trains on them, and their labels."""
    return mnist_5k()[1]


def test_export_writes_the_demos_model(demo, digits):
    quantized, example, path = demo
    assert path.read_bytes() == qtk.export(quantized, example)  # short_demo is reproducible
    images, labels = digits
    with qtk.int8_outputs(quantized), torch.no_grad():
        reference = quantized(images[:200])
    runtime = qtk.runtime.load(path).run(images[:200], output="int8")
    assert torch.equal(runtime, reference)
    assert (runtime.argmax(1) == labels[:200]).float().mean() > 0.8  # a trained model


def _expected_macs():
    """MACs of the demo's conv and linear layers at batch 1, from the float model's shapes."""
    macs = {}

    def count(name):
        def hook(module, inputs, output):
            if isinstance(module, nn.Conv2d):
                per_output = module.in_channels // module.groups * np.prod(module.kernel_size)
            else:
                per_output = module.in_features
            macs[name] = int(output.numel() * per_output)
        return hook

    model = small_cnn().eval()
    for name, module in model.named_modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            module.register_forward_hook(count(name))
    with torch.no_grad():
        model(torch.zeros(1, 1, 28, 28))
    return macs


def test_inspect_lists_the_demos_layers_and_their_macs(demo, capsys):
    _, _, path = demo
    expected = _expected_macs()
    assert set(expected) == {"0", "4", "7.conv1", "7.conv2", "9", "15"}
    cli.main(["inspect", str(path), "--json"])
    info = json.loads(capsys.readouterr().out)
    nodes = {n["name"]: n for n in info["nodes"]}
    assert {name: nodes[name]["macs"] for name in expected} == expected
    assert info["macs"] == sum(expected.values())
    assert nodes["7.add"]["algorithm"] == "fused into '7.conv2'"  # the residual block's add
    assert [n["op"] for n in info["nodes"]] == [n.op for n in read_qmodel(path).nodes]

    cli.main(["inspect", str(path)])
    text = capsys.readouterr().out
    rows = {line.split()[2]: line for line in text.splitlines()
            if line.split()[:1] and line.split()[0].isdigit() and len(line.split()) > 3}
    for name, macs in expected.items():
        assert f"{macs:,}" in rows[name]
    assert f"{sum(expected.values()):,} MACs per batch of 1" in text


def test_run_from_npy_and_from_a_digit_image_equals_the_runtime(demo, digits, tmp_path, capsys):
    _, _, path = demo
    images, labels = digits
    session = qtk.runtime.load(path)
    np.save(tmp_path / "x.npy", images[:8].numpy())
    cli.main(["run", str(path), "--input", str(tmp_path / "x.npy"), "--output",
              str(tmp_path / "y.npy")])
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), session.run(images[:8].numpy()))

    # A test digit as a grayscale PNG: at the input's size, --mean/--std give the demo's inputs
    pixels = np.round((images[:3, 0].numpy() * MNIST_STD + MNIST_MEAN) * 255).astype(np.uint8)
    from PIL import Image

    for index in range(3):
        Image.fromarray(pixels[index]).save(tmp_path / f"digit{index}.png")
        capsys.readouterr()
        cli.main(["run", str(path), "--input", str(tmp_path / f"digit{index}.png"), "--mean",
                  str(MNIST_MEAN), "--std", str(MNIST_STD), "--output", str(tmp_path / "d.npy")])
        got = np.load(tmp_path / "d.npy")
        np.testing.assert_array_equal(got, session.run(images[index:index + 1].numpy()))
        assert_not_degenerate(got, min_distinct=5)
        top1 = int(capsys.readouterr().out.split("top-5 per sample: ")[1].split(":")[0])
        assert top1 == int(np.argmax(got)) == int(labels[index])


def test_bench_prints_the_demos_latency_per_threads_and_batch(demo, capsys):
    _, _, path = demo
    cli.main(["bench", str(path), "--threads", "1", "2", "--batch", "1", "8", "--runs", "5",
              "--warmup", "1"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines[3:]]
    assert [row[:2] for row in rows] == [["1", "1"], ["1", "8"], ["2", "1"], ["2", "8"]]
    for row in rows:
        low, median, p90, high = map(float, row[2:6])
        assert 0 < low <= median <= p90 <= high


@pytest.mark.parametrize("chart_by", ["node", "op"])
def test_profile_traces_one_slice_per_node_and_draws_a_chart(demo, tmp_path, capsys, chart_by):
    require_module("matplotlib")
    _, _, path = demo
    runs = 2
    trace_path, chart = tmp_path / "trace.json", tmp_path / "time.png"
    cli.main(["profile", str(path), "--trace", str(trace_path), "--runs", str(runs), "--chart",
              str(chart), "--chart-by", chart_by])
    events = json.loads(trace_path.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["cat"] not in ("run", "range")]
    runtime_nodes = qtk.runtime.load(path, profile=True).profile()
    assert len(runtime_nodes) == len(read_qmodel(path).nodes) - 1  # the add runs in its conv
    for run in range(runs):
        assert [(e["name"], e["cat"]) for e in slices if e["args"]["run"] == run] == [
            (n["name"], n["op"]) for n in runtime_nodes]
    assert chart.read_bytes()[:8] == PNG and chart.stat().st_size > 5_000
    assert f"chart: {chart}" in capsys.readouterr().out


def test_profile_chart_has_a_bar_per_node_or_op(demo, monkeypatch):
    """What is drawn: one bar per node in execution order, or per op with the op's total."""
    _, _, path = demo
    drawn = []
    monkeypatch.setattr("qtk.charts.save_bar_chart", lambda panels, out: drawn.append(panels))
    _, nodes = cli.profile(path, runs=2, threads=1)
    cli.profile_chart(nodes, 2, "unused.png", by="node")
    cli.profile_chart(nodes, 2, "unused.png", by="op")
    by_node, by_op = drawn[0][0], drawn[1][0]
    assert by_node.categories == [f"{n['name']} ({n['op']})" for n in nodes]
    factor = 1e6 if by_node.ylabel.startswith("us") else 1e3
    assert by_node.series["time"] == pytest.approx([n["seconds"] / 2 * factor for n in nodes])
    ops = {n["op"] for n in nodes}
    assert sorted(by_op.categories) == sorted(ops)
    totals = by_op.series["time"]
    assert totals == sorted(totals, reverse=True)
    conv = by_op.categories.index("conv2d")
    factor = 1e6 if by_op.ylabel.startswith("us") else 1e3
    assert totals[conv] == pytest.approx(
        sum(n["seconds"] for n in nodes if n["op"] == "conv2d") / 2 * factor)


def test_diff_finds_nothing_on_the_demos_file_and_names_a_tampered_node(demo, tmp_path,
                                                                        capsys):
    _, _, path = demo
    assert cli.main(["diff", DEMO, str(path)]) == 0
    assert "byte for byte" in capsys.readouterr().out

    weight = next(v for v in read_qmodel(path).values if v.name == "9.weight")
    data = bytearray(path.read_bytes())
    data[weight.file_offset + 5] ^= 0x40  # weights are outside the graph's CRC
    bad = tmp_path / "bad.qmodel"
    bad.write_bytes(bytes(data))
    assert cli.main(["diff", DEMO, str(bad)]) == 1
    assert "first divergent node: '9' (conv2d)" in capsys.readouterr().out
