"""Contract 5 of docs/contracts.md: bad input at the edges gets a clear error naming the thing and the fix."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import qtk
from conftest import calibrated


@pytest.fixture(scope="module")
def session():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    quantized = calibrated(model.eval(), [torch.randn(2, 3, 8, 8)])
    return qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 8, 8)))


def test_other_batch_sizes_run(session):
    for batch in (1, 3, 8):
        assert session.run(torch.randn(batch, 3, 8, 8)).shape == (batch, 5)


@pytest.mark.parametrize("dtype", [np.int8, np.float32])  # float32: quantized inside the run
@pytest.mark.parametrize("shape", [(3, 8, 8), (1, 4, 8, 8), (1, 3, 9, 8), (1, 3, 8, 8, 1), (0, 3, 8, 8)])
def test_wrong_input_shape_is_named(session, shape, dtype):
    with pytest.raises(qtk.QtkError, match=r"input 0 .*shape"):
        session.run(np.zeros(shape, dtype=dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.bool_])
def test_wrong_input_dtype_is_named(session, dtype):
    with pytest.raises(qtk.QtkError, match=r"input 0 .*(float32 or int8|int8)"):
        session.run(np.zeros((1, 3, 8, 8), dtype=dtype))


def test_wrong_input_count(session):
    with pytest.raises(qtk.QtkError, match="1 input"):
        session.run(np.zeros((1, 3, 8, 8), np.float32), np.zeros((1, 3, 8, 8), np.float32))


def test_unknown_module_names_path_and_type():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Sequential(nn.Softsign()))
    with pytest.raises(qtk.UnsupportedOpError, match=r"1\.0: Softsign has no quantized form"):
        qtk.quantize_qat(model, strict=True)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)

    def forward(self, x):
        return F.softsign(self.conv(x))


def test_unsupported_functional_call_names_op_path_and_way_out():
    model = nn.Sequential(nn.Conv2d(1, 1, 1), _Block())
    with pytest.raises(qtk.UnsupportedOpError,
                       match=r"^1: 'softsign' .* no quantized form.*qconfig of None"):
        qtk.quantize_qat(model, strict=True)


def test_a_float_only_op_is_named_by_strict():
    """Scalar arithmetic has an int8 form (spec 21); a difference of two activations not yet."""
    class Scaled(nn.Module):
        def forward(self, x):
            return x * 0.5 - torch.relu(x)

    with pytest.raises(qtk.UnsupportedOpError, match="^sub: Sub has no quantized form"):
        qtk.quantize_qat(Scaled(), strict=True)


def test_unsupported_pooling_mode_is_explained():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.AvgPool2d(2, divisor_override=-1))
    with pytest.raises(ValueError, match=r"AvgPool2d\(divisor_override=-1\) is not supported"):
        calibrated(model.eval(), [torch.randn(1, 1, 9, 9)])


def test_convert_before_calibration_is_explained():
    prepared = qtk.prepare_ptq(nn.Sequential(nn.Conv2d(1, 2, 3)).eval())
    with pytest.raises(RuntimeError, match="observed nothing"):
        qtk.convert(prepared)


def test_non_finite_learned_scale_is_named_at_convert():
    """A learned scale that went to NaN names the quantizer's module and says what it saw."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    lsq = qtk.bits_qconfig(4, 4, base=qtk.qconfig.QAT_QUANTIZERS["lsq"])
    qat = qtk.quantize_qat(model, lsq).train()
    qat(torch.randn(2, 3, 8, 8))
    with torch.no_grad():
        for name, p in qat.named_parameters():
            if "scale" in name:
                p.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"^quant_input_1: the output scale is \[nan\], not "
                                         r"finite: .* held NaN or inf$"):
        qtk.convert(qat.eval())


@pytest.mark.parametrize("poisoned", ["data", "weight"])
def test_non_finite_calibration_is_named_at_convert(poisoned):
    """NaN or inf in what an observer saw is reported as such, with the module, and nothing
    else is guessed."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    x = torch.randn(2, 3, 8, 8)
    if poisoned == "data":
        x[1, 2, 3, 4] = float("inf")
    prepared = qtk.prepare_ptq(model)
    prepared(x)
    if poisoned == "weight":
        with torch.no_grad():
            prepared.get_submodule("0").weight[1, 0, 0, 0] = float("nan")
    where, what = ("quant_input_1", "output") if poisoned == "data" else ("0", "weight")
    with pytest.raises(ValueError, match=rf"^{where}: the {what} scale is .*not finite: .* held "
                                         rf"NaN or inf$"):
        qtk.convert(prepared)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(qtk.QtkError, match="missing.qmodel"):
        qtk.runtime.load(tmp_path / "missing.qmodel")


def test_accumulator_overflow_names_the_channel_and_its_bias():
    model = nn.Sequential(nn.Linear(4, 3)).eval()
    with torch.no_grad():
        model[0].bias[2] = 1e7  # at s_x * s_w ~ 1e-4 that is ~1e11, far beyond int32
    with pytest.raises(ValueError, match=r"^0: the int32 accumulator of output channel 2 could "
                                         r"overflow: 4 products .* a bias of 1e\+07"):
        calibrated(model, [torch.randn(8, 4)])
