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
        accuracy_study.BIT_WIDTHS)
    assert len(rows) == expected
    assert all(line.endswith("| 100 / 100 |") for line in rows), "a row is not byte-identical"
    assert "| torch.ao PTQ |" in text and "| torch.ao QAT |" in text
    assert "✅ every qtk row byte-identical" in text
