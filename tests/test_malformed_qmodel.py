"""Contract 4 of docs/contracts.md: the loader treats a .qmodel as untrusted bytes.

Each malformed variant must raise qtk.QtkError whose message names what is wrong; a short fuzz run
mutates a real model thousands of times and only ever sees clean errors (or a model that runs).
"""
import random
import struct

import numpy as np
import pytest
import torch
from torch import nn

import qtk
from qtk.export.exporter import build_writer
from conftest import calibrated

HEADER = struct.Struct("<8sIIQQQQQII")


@pytest.fixture(scope="module")
def quantized():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(4 * 3 * 3, 5))
    return calibrated(model.eval(), [torch.randn(2, 3, 6, 6)])


@pytest.fixture(scope="module")
def example():
    return torch.randn(1, 3, 6, 6)


@pytest.fixture(scope="module")
def valid(quantized, example):
    return qtk.export(quantized, example)


def _header(data):
    return list(HEADER.unpack_from(data))


def _with_header(data, **fields):
    names = ["magic", "version", "header_size", "file_size", "graph_offset", "graph_size",
             "blob_offset", "blob_size", "crc", "reserved"]
    values = _header(data)
    for key, value in fields.items():
        values[names.index(key)] = value
    return HEADER.pack(*values) + data[HEADER.size:]


def _load(data):
    return qtk.runtime.load(bytes(data))


def test_valid_model_loads(valid, example):
    assert _load(valid).run(example).shape == (1, 5)


HEADER_CASES = {
    "empty file": (lambda d: b"", "header"),
    "truncated header": (lambda d: d[:20], "header"),
    "bad magic": (lambda d: b"NOTQTKMD" + d[8:], "magic"),
    "future version": (lambda d: _with_header(d, version=99), "version 99"),
    "bad header size": (lambda d: _with_header(d, header_size=32), "header_size"),
    "file size mismatch": (lambda d: _with_header(d, file_size=len(d) + 64), "file_size"),
    "truncated blob section": (lambda d: d[:-8], "file_size"),
    "graph offset past the end": (lambda d: _with_header(d, graph_offset=1 << 40), "graph"),
    "graph size past the end": (lambda d: _with_header(d, graph_size=1 << 40), "graph"),
    "graph offset inside the header": (lambda d: _with_header(d, graph_offset=8), "graph_offset"),
    "unaligned blob offset": (lambda d: _with_header(d, blob_offset=_header(d)[6] + 1), "blob_offset"),
    "blob size past the end": (lambda d: _with_header(d, blob_size=1 << 50), "blob"),
    "graph checksum mismatch": (lambda d: d[:70] + bytes([d[70] ^ 0xFF]) + d[71:], "crc"),
    "nonzero reserved field": (lambda d: _with_header(d, reserved=7), "reserved"),
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_malformed_header_is_named(valid, case):
    corrupt, expected = HEADER_CASES[case]
    with pytest.raises(qtk.QtkError, match=f"(?i){expected}"):
        _load(corrupt(valid))


def _writer_case(mutate):
    def build(quantized, example):
        writer = build_writer(quantized, example)
        mutate(writer)
        return writer.to_bytes()
    return build


def _value(writer, suffix):
    return next(v for v in writer.values if v["name"].endswith(suffix))


def _node(writer, op):
    return next(n for n in writer.nodes if n["op"] == op)


def _set(target, key, value):
    if isinstance(target, dict):
        target[key] = value
    else:
        setattr(target, key, value)


GRAPH_CASES = {
    "unknown op": (lambda w: _set(_node(w, "max_pool2d"), "op", "frobnicate"), "frobnicate"),
    "missing attribute": (lambda w: _node(w, "conv2d")["attrs"].pop("stride"), "stride"),
    "attribute of wrong length": (lambda w: _set(_node(w, "conv2d")["attrs"], "padding", [1, 1, 1]),
                                  "padding"),
    "negative stride": (lambda w: _set(_node(w, "conv2d")["attrs"], "stride", [0, -1]), "stride"),
    "value id out of range": (lambda w: _set(_node(w, "linear"), "inputs", [10**6, 1, 2]), "1000000"),
    "rank too large": (lambda w: _set(w.values[0], "shape", [1] * 9), "rank"),
    "zero dimension": (lambda w: _set(w.values[0], "shape", [1, 0, 6, 6]), "dim"),
    "absurd dimension": (lambda w: _set(w.values[0], "shape", [1, 3, 1 << 40, 6]), "dim"),
    "weight of wrong dtype": (lambda w: _set(_value(w, "0.weight"), "data",
                                             _value(w, "0.weight")["data"].float()), "weight"),
    "weight of wrong shape": (lambda w: _set(_value(w, "0.weight"), "data",
                                             _value(w, "0.weight")["data"][:2]), "weight"),
    "per-channel attribute of wrong length": (
        lambda w: _set(_node(w, "conv2d")["attrs"], "multiplier", [1 << 30]), "multiplier"),
    "shift out of range": (lambda w: _set(_node(w, "linear")["attrs"], "shift", [99] * 5), "shift"),
    "fused PReLU of wrong length": (
        lambda w: _node(w, "conv2d")["attrs"].update(negative_multiplier=[-(1 << 30)],
                                                     negative_shift=[31]), "negative_multiplier"),
    "fused PReLU shift out of range": (
        lambda w: _node(w, "conv2d")["attrs"].update(
            negative_multiplier=[1 << 30] * len(_node(w, "conv2d")["attrs"]["multiplier"]),
            negative_shift=[0] * len(_node(w, "conv2d")["attrs"]["multiplier"])),
        "negative_shift"),
    "fused PReLU multiplier without its shift": (
        lambda w: _node(w, "conv2d")["attrs"].update(
            negative_multiplier=[1 << 30] * len(_node(w, "conv2d")["attrs"]["multiplier"])),
        "negative_shift"),
    "activation produced twice": (lambda w: _set(_node(w, "linear"), "outputs",
                                                 _node(w, "conv2d")["outputs"]), "produced"),
    "use before definition": (lambda w: w.nodes.reverse(), "before"),
    "graph output is a constant": (lambda w: _set(w, "outputs", [_node(w, "conv2d")["inputs"][1]]),
                                   "output"),
    "zero scale": (lambda w: _set(w.values[0], "scale", 0.0), "scale"),
    "NaN scale": (lambda w: _set(w.values[0], "scale", float("nan")), "scale"),
    "zero point out of range": (lambda w: _set(w.values[0], "zero_point", 300), "zero_point"),
    "no outputs": (lambda w: _set(w, "outputs", []), "output"),
    "packed activation": (lambda w: _set(w.values[0], "packed_bits", 4), "constants only"),
    "packed bias": (lambda w: _set(_value(w, "0.bias"), "packed_bits", 4), "bias"),
    "pooling changes qparams": (
        lambda w: _set(w.values[w.nodes[1]["outputs"][0]], "zero_point",
                       w.values[w.nodes[1]["outputs"][0]]["zero_point"] + 1), "zero_point"),
}


@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
def test_malformed_graph_is_named(quantized, example, case):
    mutate, expected = GRAPH_CASES[case]
    data = _writer_case(mutate)(quantized, example)
    with pytest.raises(qtk.QtkError, match=f"(?i){expected}"):
        _load(data)


def test_trailing_bytes_in_graph_section(valid):
    magic, version, hsize, fsize, goff, gsize, boff, bsize, crc, res = _header(valid)
    import zlib
    graph = valid[goff:goff + gsize] + b"\0\0\0\0"
    assert goff + len(graph) <= boff
    data = _with_header(valid, graph_size=len(graph), crc=zlib.crc32(graph))
    data = data[:goff] + graph + data[goff + len(graph):]
    with pytest.raises(qtk.QtkError, match="(?i)trailing"):
        _load(data)


def test_truncation_anywhere_is_a_clean_error(valid):
    for cut in range(0, len(valid), max(1, len(valid) // 97)):
        with pytest.raises(qtk.QtkError):
            _load(valid[:cut])


def test_short_fuzz_run_never_crashes(valid, example):
    """Random mutations of a real model: every outcome is a QtkError or a model that runs."""
    rng = random.Random(1234)
    loaded = 0
    for _ in range(1500):
        data = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(data))
            kind = rng.random()
            if kind < 0.5:
                data[position] ^= 1 << rng.randrange(8)
            elif kind < 0.8:
                data[position] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
            else:
                width = rng.choice([4, 8])
                struct.pack_into("<Q" if width == 8 else "<I", data,
                                 min(position, len(data) - width),
                                 rng.choice([0, 1, (1 << (8 * width)) - 1, 1 << (8 * width - 1)]))
        try:
            session = _load(data)
        except qtk.QtkError:
            continue
        loaded += 1
        session.run(np.zeros((1, 3, 6, 6), dtype=np.int8), output="int8")
    assert loaded < 1500  # the mutations did reach the validation


class _ConstantArithmetic(nn.Module):
    """mul_constant and add_constant nodes: a learned per-channel scale and offset."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.scale = nn.Parameter(torch.linspace(0.5, 2.0, 4).reshape(1, 4, 1, 1))
        self.offset = nn.Parameter(torch.linspace(-1.0, 1.0, 4).reshape(1, 4, 1, 1))

    def forward(self, x):
        return self.conv(x) * self.scale + self.offset


@pytest.fixture(scope="module")
def constant_arithmetic():
    torch.manual_seed(0)
    return calibrated(_ConstantArithmetic().eval(), [torch.randn(2, 3, 6, 6)])


def _constant_of(writer, op, index):
    return writer.values[_node(writer, op)["inputs"][index]]


CONSTANT_CASES = {
    "mul_constant shift out of range": (
        lambda w: _set(_constant_of(w, "mul_constant", 2), "data",
                       torch.full_like(_constant_of(w, "mul_constant", 2)["data"], 99)), "shift"),
    "mul_constant constant of wrong shape": (
        lambda w: _set(_constant_of(w, "mul_constant", 1), "data",
                       _constant_of(w, "mul_constant", 1)["data"].reshape(-1)[:3]), "shape"),
    "add_constant bias beyond 2^30": (
        lambda w: _set(_constant_of(w, "add_constant", 1), "data",
                       torch.full_like(_constant_of(w, "add_constant", 1)["data"], 2**31 - 1)),
        "bias"),
    "add_constant without negate": (
        lambda w: _node(w, "add_constant")["attrs"].pop("negate"), "negate"),
    "add_constant input shift out of range": (
        lambda w: _set(_node(w, "add_constant")["attrs"], "input_shift", [40]), "input_shift"),
}


def test_constant_arithmetic_model_loads(constant_arithmetic, example):
    ops = _load(qtk.export(constant_arithmetic, example)).model.op_names
    assert "mul_constant" in ops and "add_constant" in ops


@pytest.mark.parametrize("case", sorted(CONSTANT_CASES))
def test_malformed_constant_arithmetic_is_named(constant_arithmetic, example, case):
    mutate, expected = CONSTANT_CASES[case]
    data = _writer_case(mutate)(constant_arithmetic, example)
    with pytest.raises(qtk.QtkError, match=f"(?i){expected}"):
        _load(data)
