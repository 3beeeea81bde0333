"""Kernel choice never changes a byte: Fast-Run (search, cache, reuse), the QTK_ISA cap and the
QTK_CONV_ALGO pin, through the Python API and the ``qtk fastrun`` command; and the per-node profile."""
import pytest
import torch
from torch import nn

import qtk
from qtk import cli


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU(),
                          nn.Conv2d(16, 40, 1), nn.ReLU(), nn.Conv2d(40, 24, 3, stride=2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 10))
    prepared = qtk.prepare_ptq(model.eval())
    qtk.calibrate(prepared, [torch.randn(4, 3, 20, 20) for _ in range(4)])
    quantized = qtk.convert(prepared)
    path = tmp_path_factory.mktemp("fast_run") / "model.qmodel"
    qtk.export(quantized, torch.randn(1, 3, 20, 20), path)
    x = torch.randn(3, 3, 20, 20)
    with qtk.int8_outputs(quantized):
        expected = quantized(x)
    return path, x, expected


def _conv_algorithms(session):
    return [a for op, a in zip(session.model.op_names, session.algorithms) if op == "conv2d"]


def test_search_records_and_a_second_session_reuses_the_choice(model_file, tmp_path, capsys):
    path, x, expected = model_file
    cache = tmp_path / "fastrun.cache"
    cli.main(["fastrun", str(path), "--cache", str(cache), "--threads", "2"])
    assert "conv2d_int8_" in capsys.readouterr().out
    searched = qtk.runtime.load(path, threads=2, fast_run="search", fast_run_cache=cache)
    used = qtk.runtime.load(path, threads=2, fast_run="use", fast_run_cache=cache)
    assert used.algorithms == searched.algorithms
    assert all(a.startswith("conv2d_int8_") for a in _conv_algorithms(used))
    for session in (searched, used):
        assert torch.equal(session.run(x, output="int8"), expected)
    # the cache is keyed by thread count: a 1-thread session finds nothing, takes the default
    default = qtk.runtime.load(path, threads=1).algorithms
    assert qtk.runtime.load(path, threads=1, fast_run="use",
                            fast_run_cache=cache).algorithms == default


def test_every_algorithm_and_isa_level_gives_the_same_bytes(model_file, monkeypatch):
    path, x, expected = model_file
    available = set(_conv_algorithms(qtk.runtime.load(path))) | {"conv2d_int8_reference"}
    for isa in ("scalar", "avx2", "avx_vnni", "avx512_vnni", "avx512_vbmi", "amx_int8"):
        monkeypatch.setenv("QTK_ISA", isa)
        session = qtk.runtime.load(path, threads=2)
        if isa == "scalar":
            assert set(_conv_algorithms(session)) == {"conv2d_int8_reference"}
        available |= set(_conv_algorithms(session))
        assert torch.equal(session.run(x, output="int8"), expected), isa
    monkeypatch.delenv("QTK_ISA")
    for algorithm in sorted(available):
        monkeypatch.setenv("QTK_CONV_ALGO", algorithm)
        session = qtk.runtime.load(path, threads=2)
        assert algorithm in _conv_algorithms(session)  # on every layer it fits
        assert torch.equal(session.run(x, output="int8"), expected), algorithm


def test_bad_kernel_choices_are_clear_errors(model_file, monkeypatch, tmp_path):
    path, _, _ = model_file
    with pytest.raises(qtk.QtkError, match="fast_run must be"):
        qtk.runtime.load(path, fast_run="fastest")
    bad_cache = tmp_path / "bad.cache"
    bad_cache.write_text("not a cache line\n")
    with pytest.raises(qtk.QtkError, match="line 1"):
        qtk.runtime.load(path, fast_run="use", fast_run_cache=bad_cache)
    monkeypatch.setenv("QTK_CONV_ALGO", "conv2d_int8_magic")
    with pytest.raises(qtk.QtkError, match="use one of"):
        qtk.runtime.load(path)
    monkeypatch.setenv("QTK_CONV_ALGO", "")
    monkeypatch.setenv("QTK_ISA", "avx1024")
    with pytest.raises(qtk.QtkError, match="QTK_ISA"):
        qtk.runtime.load(path)


def test_runtime_reports_its_version():
    from qtk import _C

    assert _C.version == qtk.__version__


def test_profile_reports_each_node_with_its_kernel_and_work(model_file):
    path, x, _ = model_file
    assert qtk.runtime.load(path).profile() == []
    session = qtk.runtime.load(path, threads=2, profile=True)
    for _ in range(3):
        session.run(x)
    nodes = session.profile()
    assert [n["op"] for n in nodes] == session.model.op_names
    assert [n["algorithm"] for n in nodes] == session.algorithms
    assert all(n["runs"] == 3 and n["seconds"] >= 0 for n in nodes)
    convs = [n for n in nodes if n["op"] == "conv2d"]
    # batch 3: the first conv is 16 x 20 x 20 outputs of 3 x 3 x 3 products each
    assert convs[0]["macs"] == 3 * 16 * 20 * 20 * 27
    assert [n["macs"] for n in nodes if n["op"] == "linear"] == [3 * 10 * 24]
