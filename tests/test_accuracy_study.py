"""The accuracy study script (model_zoo/accuracy_study.py, which writes docs/accuracy.md) runs end
to end: every row deploys byte-identical and the acceptance checks are computed."""
from model_zoo import accuracy_study


def test_accuracy_study_smoke_run_writes_every_row(tmp_path):
    out = tmp_path / "accuracy.md"
    accuracy_study.main(["--quick", "--models", "small CNN", "--datasets", "sklearn digits",
                         "--out", str(out)])
    text = out.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| qtk ")]
    expected = (len(accuracy_study.OBSERVERS) + len(accuracy_study.QUANTIZERS)) * len(
        accuracy_study.BIT_WIDTHS) + 1  # + int8 QAT's mean over shuffles
    assert len(rows) == expected
    assert sum(line.endswith("| 100 / 100 |") for line in rows) == expected - 1
    assert "| STE (FakeQuantize), mean of 2 data shuffles | w8a8 |" in text
    assert text.count("| 200 / 200 |") == 1, "a row is not byte-identical"
    assert "| torch.ao PTQ |" in text and "| torch.ao QAT |" in text
    assert "✅ every qtk row byte-identical" in text


def test_a_limited_run_replaces_only_its_own_sections(tmp_path):
    out = tmp_path / "accuracy.md"
    old = "## ShuffleNetV2 x0.5 on MNIST 5k (4,000 training / 1,000 test images)\n\nold table\n"
    out.write_text("# Accuracy study\n\nold intro\n\n" + old)
    accuracy_study.write_document(str(out), [
        "## small CNN on MNIST 5k (10 training / 5 test images)\n\nnew table\n"])
    text = out.read_text()
    assert text.startswith("\n".join(accuracy_study.INTRO))
    assert text.index("## small CNN on MNIST 5k") < text.index("## ShuffleNetV2 x0.5 on MNIST 5k")
    assert "old table" in text and "new table" in text and "old intro" not in text


def test_a_small_test_set_gets_more_shuffles_for_the_int8_qat_comparison():
    args = accuracy_study.argparse.Namespace(seeds=3, min_compared_images=3000)
    shuffles = lambda test_size: accuracy_study.comparison_shuffles((None, [0] * test_size), args)
    assert (shuffles(1000), shuffles(500), shuffles(10000)) == (3, 6, 3)


def _synthetic_section(title, float_acc):
    """A section as the study writes it, with made-up rows (one diverged, one mean of shuffles)."""
    Row = accuracy_study.Row
    rows = [Row("float", "float32", "–", float_acc),
            Row("qtk PTQ", "MinMax", "w8a8", 97.0, 96.5, 100, 100),
            Row("qtk PTQ", "MinMax", "w2a2", 20.0, 20.0, 100, 100),
            Row("qtk QAT", "LSQ", "w8a8", 98.0, 97.5, 100, 100),
            Row("qtk QAT", "LSQ, diverged (non-finite parameters)", "w2a2", None),
            Row("torch.ao PTQ", "default x86 (Histogram, reduce_range)", "w8a8", 95.0),
            Row("qtk QAT", "LSQ", "w8a8", 97.9, 97.8, 300, 300, seeds=3)]
    return f"## {title} (10 training / 5 test images)\n\n" + "\n".join(
        accuracy_study.table_markdown(rows)) + "\n"


def test_the_chart_is_drawn_from_the_documents_tables(tmp_path, monkeypatch):
    out = tmp_path / "accuracy.md"
    accuracy_study.write_document(str(out), [_synthetic_section("small CNN on MNIST 5k", 98.0)])
    accuracy_study.write_document(str(out), [_synthetic_section("small CNN on sklearn digits",
                                                                90.0)])  # the first one is kept
    assert "![Deployed accuracy" in out.read_text() and "](accuracy.png)" in out.read_text()
    drawn = []
    monkeypatch.setattr("qtk.charts.save_bar_chart", lambda panels, path: drawn.append(panels))
    accuracy_study.write_chart(str(out))
    mnist, digits = drawn[0]
    assert (mnist.title, mnist.line, digits.title, digits.line) == (
        "small CNN on MNIST 5k", 98.0, "small CNN on sklearn digits", 90.0)
    assert mnist.categories == ["PTQ MinMax", "QAT LSQ", "torch.ao PTQ"]
    no_bar = None  # the diverged run, and methods not run at a width
    assert dict(mnist.series) == {"w8a8": [96.5, 97.5, 95.0], "w2a2": [20.0, no_bar, no_bar]}

    monkeypatch.undo()
    assert accuracy_study.main(["--chart-only", "--out", str(out)]) is None
    png = (tmp_path / "accuracy.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
