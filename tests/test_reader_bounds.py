"""Observer ranges that stop where every reader saturates (docs/quantizers.md, "Ranges that stop
where the readers saturate"): which tensors get bounds, that the readers' outputs do not change,
and that the freed levels go to the values that matter."""
import pytest
import torch
from torch import nn

import qtk


class ConvThen(nn.Module):
    """A conv whose output (wide on both sides) goes to `readers`, then a conv over their sum."""

    def __init__(self, *readers):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.mul_(8.0)  # outputs far past -3 and 6
        self.readers = nn.ModuleList(readers)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        outs = [reader(y) for reader in self.readers]
        return self.head(sum(outs[1:], outs[0]))


def _conv_observer(prepared):
    return prepared.conv.activation_post_process.observer


@pytest.mark.parametrize("readers, bounds", [
    ((nn.Hardswish(),), (-3.0, None)),
    ((nn.Hardsigmoid(),), (-3.0, 3.0)),
    ((nn.ReLU6(), nn.Hardsigmoid()), (-3.0, 6.0)),  # a ReLU6 alone fuses into the conv
    ((nn.Hardtanh(-2.0, 1.5),), (-2.0, 1.5)),
    ((nn.Hardswish(), nn.Hardsigmoid()), (-3.0, None)),  # the widest of the readers'
    ((nn.Hardsigmoid(), nn.ReLU6()), (-3.0, 6.0)),
    ((nn.Hardswish(), nn.Sigmoid()), (None, None)),  # Sigmoid never saturates exactly
    ((nn.Hardswish(), nn.Identity()), (None, None)),  # another reader sees every value
])
def test_bounds_follow_the_readers(readers, bounds):
    prepared = qtk.prepare_ptq(ConvThen(*readers))
    observer = _conv_observer(prepared)
    assert (observer.floor, observer.ceiling) == bounds


def test_calibration_keeps_bounds_and_graph_outputs_are_not_bounded():
    class Out(nn.Module):  # the conv output is also the model's output
        def __init__(self):
            super().__init__()
            self.conv, self.act = nn.Conv2d(3, 8, 3), nn.Hardswish()

        def forward(self, x):
            y = self.conv(x)
            return y, self.act(y)

    assert _conv_observer(qtk.prepare_ptq(Out())).floor is None
    prepared = qtk.prepare_ptq(ConvThen(nn.Hardswish()))
    qtk.calibrate(prepared, [torch.randn(4, 3, 16, 16)], method="percentile")
    observer = _conv_observer(prepared)
    assert type(observer).__name__ == "HistogramObserver" and observer.floor == -3.0
    assert float(observer.min_val.min()) >= -3.0


@pytest.mark.parametrize("method", ["minmax", "percentile"])
def test_bounded_range_reads_alike_and_resolves_finer(method):
    torch.manual_seed(0)
    model = ConvThen(nn.Hardswish()).eval()
    data = [torch.randn(8, 3, 16, 16) for _ in range(2)]
    bounded = qtk.calibrate(qtk.prepare_ptq(model), data, method=method)
    unbounded = qtk.prepare_ptq(model)
    _conv_observer(unbounded).floor = None
    qtk.calibrate(unbounded, data, method=method)
    assert float(_conv_observer(unbounded).min_val.min()) < -6.0  # a wide negative side
    scale_b = qtk.convert(bounded).conv.output_qparams.scale
    scale_u = qtk.convert(unbounded).conv.output_qparams.scale
    assert scale_b < 0.75 * scale_u
    # and the Quantized model comes closer to the float one
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        float_out, q_b, q_u = model(x), qtk.convert(bounded)(x), qtk.convert(unbounded)(x)
    error_b, error_u = (q_b - float_out).pow(2).mean(), (q_u - float_out).pow(2).mean()
    assert error_b < error_u


def test_bounded_model_deploys_byte_identical():
    torch.manual_seed(1)
    model = ConvThen(nn.Hardswish(), nn.Hardsigmoid()).eval()
    quantized = qtk.convert(qtk.calibrate(qtk.prepare_ptq(model), [torch.randn(8, 3, 16, 16)]))
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 16, 16)))
    x = torch.randn(6, 3, 16, 16)
    with qtk.int8_outputs(quantized):
        assert torch.equal(quantized(x), session.run(x, output="int8"))


@pytest.mark.parametrize("readers, floor", [
    ((nn.Hardswish(),), -3.0),
    ((nn.Hardswish(), nn.Sigmoid()), None),  # an int8 reader that sees every value
])
def test_mixed_precision_search_bounds_its_stand_in_stubs_as_prepare_does(readers, floor):
    """The search's input quantizers (qtk/ptq/layer_switch.py) stand for the stubs prepare puts
    after a float layer: before a HardSwish they see the same range as prepare's stub, bounded
    only where every reader saturates."""
    from qtk.ptq.layer_switch import LayerSwitch
    torch.manual_seed(0)
    model = ConvThen(*readers).eval()
    data = [torch.randn(8, 3, 16, 16) for _ in range(2)]
    switch = LayerSwitch(model, qtk.default_ptq_qconfig, data)
    stand_in = switch.inputs["readers.0"].quantizers[0].observer
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_name={"conv": None})
    prepared = qtk.calibrate(qtk.prepare_ptq(model, mapping), data)
    stub = prepared.quant_conv.activation_post_process.observer
    assert stand_in.floor == stub.floor == floor
    assert (float(stand_in.min_val), float(stand_in.max_val)) == (float(stub.min_val),
                                                                  float(stub.max_val))
