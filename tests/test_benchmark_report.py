"""The generated part of benchmarks/README.md keeps one section per CPU: a run of
benchmarks.peers (or benchmarks.winograd) rewrites its own CPU's section and keeps the others'."""
import os

import pytest

from benchmarks import winograd
from benchmarks.peers import (BEGIN, END, binary_peak_name, cpu_description, cpu_info,
                              int8_peak_name, replace_cpu_section)

README = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "README.md")
XEON = "Intel(R) Xeon(R) Processor (AVX-512 VNNI, AVX-VNNI, AMX-INT8), 2 cores"
EPYC = "AMD EPYC (Zen 4, family 25 model 17; AVX-512 VNNI), 2 cores"
BEFORE, AFTER = "# Benchmarks\n\nHand-written.\n\n", "\n\n## Notes\n\nAlso hand-written.\n"


def block(*sections):
    return BEFORE + BEGIN + "\n" + "\n\n".join(sections) + "\n" + END + AFTER


def test_each_cpu_replaces_only_its_own_section():
    empty = BEFORE + BEGIN + "\n" + END + AFTER
    text = replace_cpu_section(empty, XEON, ["### 1 thread(s)", "", "xeon 1"])
    assert text == block(f"## {XEON}\n\n### 1 thread(s)\n\nxeon 1")
    text = replace_cpu_section(text, EPYC, ["epyc 1"])
    assert text == block(f"## {XEON}\n\n### 1 thread(s)\n\nxeon 1", f"## {EPYC}\n\nepyc 1")
    text = replace_cpu_section(text, XEON, ["xeon 2"])
    assert text == block(f"## {XEON}\n\nxeon 2", f"## {EPYC}\n\nepyc 1")
    text = replace_cpu_section(text, EPYC, ["epyc 2", ""])
    assert text == block(f"## {XEON}\n\nxeon 2", f"## {EPYC}\n\nepyc 2")


def test_other_blocks_and_untitled_text_are_kept():
    other = winograd.BEGIN + "\nWinograd tables\n" + winograd.END
    text = (BEGIN + "\nan older run, under no CPU title\n" + END + "\n\n" + other)
    text = replace_cpu_section(text, EPYC, ["epyc"])
    assert text == (BEGIN + f"\nan older run, under no CPU title\n\n## {EPYC}\n\nepyc\n" + END
                    + "\n\n" + other)
    assert replace_cpu_section("# Title\n", XEON, ["xeon"]) == (
        f"# Title\n\n{BEGIN}\n## {XEON}\n\nxeon\n{END}\n")


CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
cpu family\t: {family}
model\t\t: {model}
model name\t: {name}
flags\t\t: fpu avx2 {flags}

processor\t: 1
model name\t: another
"""


def test_zen_4_and_zen_5_get_their_own_sections():
    def epyc(family, model):
        return cpu_description(CPUINFO.format(vendor="AuthenticAMD", family=family, model=model,
                                              name="AMD EPYC", flags="avx512_vnni"))
    assert epyc(25, 17) == "AMD EPYC (Zen 4, family 25 model 17; AVX-512 VNNI)"
    assert epyc(26, 2) == "AMD EPYC (Zen 5, family 26 model 2; AVX-512 VNNI)"
    assert epyc(25, 1) == "AMD EPYC (Zen 3, family 25 model 1; AVX-512 VNNI)"


def test_a_cpu_without_int8_units_is_named_by_its_simd_and_its_int8_peak_by_vpmaddwd():
    zen3 = CPUINFO.format(vendor="AuthenticAMD", family=25, model=1, name="AMD EPYC", flags="fma")
    assert cpu_description(zen3) == "AMD EPYC (Zen 3, family 25 model 1; AVX2, no VNNI)"
    assert int8_peak_name(zen3) == "int8 peak (AVX2 vpmaddwd)"
    zen4 = CPUINFO.format(vendor="AuthenticAMD", family=25, model=17, name="AMD EPYC",
                          flags="avx512f avx512_vnni")
    assert cpu_description(zen4) == "AMD EPYC (Zen 4, family 25 model 17; AVX-512 VNNI)"
    assert int8_peak_name(zen4) == "VNNI peak"


def test_the_binary_peak_is_named_by_the_popcount_the_kernels_use():
    zen3 = CPUINFO.format(vendor="AuthenticAMD", family=25, model=1, name="AMD EPYC", flags="fma")
    assert binary_peak_name(zen3) == "popcount peak (AVX2 nibble table)"
    zen5 = CPUINFO.format(vendor="AuthenticAMD", family=26, model=2, name="AMD EPYC",
                          flags="avx512f avx512_vnni avx512vbmi avx512_vpopcntdq")
    assert binary_peak_name(zen5) == "popcount peak (AVX-512 vpopcntq)"


def test_the_int8_and_binary_peaks_are_measured_wherever_the_cpu_has_avx2():
    from qtk import _C

    if "avx2" not in cpu_info().get("flags", "").split():
        pytest.skip("this CPU has no AVX2: the peaks have no kernel to time")
    assert 1e9 < _C.measure_int8_peak(0.02) < 1e13  # MACs a second on one core
    assert 1e10 < _C.measure_binary_peak(0.02) < 1e14  # binary products a second on one core


def test_the_xeon_section_in_the_readme_is_the_one_its_runs_replace():
    xeon = cpu_description(CPUINFO.format(vendor="GenuineIntel", family=6, model=143,
                                          name="Intel(R) Xeon(R) Processor",
                                          flags="avx512_vnni avx_vnni amx_int8"))
    assert f"{xeon}, 2 cores" == XEON
    with open(README) as f:
        text = f.read()
    generated = text[text.index(BEGIN):text.index(END)]
    assert f"\n## {XEON}\n" in generated


def test_peers_chart_is_drawn_from_a_summary(tmp_path):
    from benchmarks.charts import peers_chart

    engines = {"qtk int8": {"median_ms_1t": 2.0, "median_ms_2t": 1.1},
               "OpenVINO int8": {"median_ms_1t": 2.5, "median_ms_2t": 1.0},
               "ONNX Runtime fp32": {"missing": "pip install onnxruntime"}}
    summary = {"machine": {"cpu": EPYC}, "settings": {"threads": [1, 2]},
               "results": {"resnet18": {"engines": engines}, "mobilenet_v2": {"engines": engines}}}
    out = tmp_path / "peers.png"
    peers_chart(summary, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_two_thread_tables_say_what_reading_the_other_cores_writes_cost():
    from types import SimpleNamespace

    from benchmarks.peers import report_lines
    from qtk import _C

    own, other = _C.measure_core_to_core(0.01)
    assert 0 < own < 1e4 and 0 < other < 1e4
    q = {"median_ms_1t": 2.0, "median_ms_2t": 1.1, "conv_gmacs_1t": 100.0, "conv_gmacs_2t": 190.0,
         "arena_kib": 10.0, "arena_lower_bound_kib": 10.0}
    results = {"resnet18": {"engines": {"qtk int8": q},
                            "core_to_core_2t": [[4.2, 13.4], [4.3, 29.1]]}}
    text = "\n".join(report_lines(results, SimpleNamespace(engines=["qtk int8"], threads=[1, 2],
                                                           runs=50, warmup=5)))
    assert "resnet18 13.4 (4.2) / 29.1 (4.3)" in text
    assert text.index("### 2 thread(s)") < text.index("resnet18 13.4")


def test_the_cuda_report_puts_whole_models_and_their_bytes_first():
    from benchmarks import cuda
    layer = {"model": "resnet18", "layer": "3x3 64@56", "count": 4, "batch": 1, "tops": 5.0}
    results = {
        "gpu": {"gpu": "NVIDIA H200", "compute_capability": "9.0", "multiprocessors": 132},
        "torch": "2.11", "cuda": "13.0", "onnxruntime": None,
        "qtk_layers": [dict(layer, qtk_kernel="conv2d_int8_dp4a", ms=0.05),
                       dict(layer, qtk_kernel="conv2d_int8_mma", ms=0.04)],
        "torch_layers": [{"model": "resnet18", "layer": "3x3 64@56", "batch": 1,
                          "torch_ms": {"float16": 0.01, "float32": 0.02}}],
        "qtk_models": [{"model": "dir/resnet18.qmodel", "batch": 1, "median_ms": 2.5,
                        "fast_run": False, "byte_identical": True, "distinct_output_values": 200},
                       {"model": "dir/resnet18.qmodel", "batch": 1, "median_ms": 2.0,
                        "fast_run": True, "dp4a_layers": 7, "mma_layers": 14,
                        "byte_identical": False, "distinct_output_values": 200}],
        "models": [{"model": "resnet18", "batch": 1, "ms": 1.4, "engine": "PyTorch fp16 eager"},
                   {"model": "resnet18", "batch": 1, "ms": 0.3,
                    "engine": "PyTorch fp16 CUDA graph"}]}
    heading, lines = cuda.render(results)
    assert heading == "NVIDIA H200 (compute capability 9.0, 132 SMs)"
    assert ("| resnet18 | 1 | 2.500 / 2.000 (7 of 21) | NO (200) | 0.160 | 0.040 | 0.080 | 0.300 | "
            "1.400 |" in lines)
    assert lines.index("Conv layers at batch 1:") > 3
    assert "| resnet18 | 3x3 64@56 | 4 | 0.0500 | 0.0400 |  | 5.0 | 0.0100 | 0.0200 | 0.25x |" \
        in lines


def test_targets_of_a_run_of_some_engines_only():
    """A run limited to the float engines (--engines) computes the fp32 targets and no int8 / fp32
    ratio, which needs qtk int8 too."""
    import argparse

    from benchmarks.peers import target_lines

    engines = {"qtk fp32": {"median_ms_1t": 7.5}, "ONNX Runtime fp32": {"median_ms_1t": 7.2}}
    lines = target_lines({"mobilenet_v2": {"engines": engines}}, argparse.Namespace(threads=[1]))
    assert any("1t mobilenet_v2: qtk fp32 / fastest peer fp32 (ONNX Runtime fp32) = 1.04" in line
               for line in lines)
    assert not any("qtk int8 / qtk fp32" in line for line in lines)
