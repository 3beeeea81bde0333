"""AdaRound (qtk.ptq.adaround): convert deploys exactly the chosen integers, the runtime matches
the Quantized reference byte for byte, and on MNIST at 4-bit weights the rounding it learns beats
nearest rounding."""
import importlib
import itertools
import types

import pytest
import torch

import qtk
from conftest import assert_not_degenerate, reference_and_runtime
from model_zoo.data import mnist_5k
from model_zoo.mnist import small_cnn
from model_zoo.training import train

W4A8_PTQ = qtk.bits_qconfig(4, 8, qtk.default_ptq_qconfig)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def mnist_model():
    """The small residual CNN after two float epochs on MNIST 5k (about 96 %), with its data."""
    torch.manual_seed(0)
    train_data, test_data = mnist_5k()
    return train(small_cnn(), train_data, 2, 3e-3, "float"), train_data, test_data


def _calibrated(model, batches):
    return qtk.calibrate(qtk.prepare_ptq(model, W4A8_PTQ), batches)


def test_convert_deploys_the_chosen_integers_byte_identical(mnist_model):
    model, train_data, test_data = mnist_model
    batches = list(train_data[0][:256].split(64))
    equalized = qtk.ptq.equalize(model, batches[0])
    prepared = qtk.ptq.adaround(_calibrated(equalized, batches), batches, iterations=30,
                                progress=False)
    assert set(prepared.qtk_adaround_steps.values()) == {30}
    nearest = qtk.convert(_calibrated(equalized, batches))
    quantized = qtk.convert(prepared)
    assert len(prepared.qtk_adaround) == 6  # every conv and the linear layer
    flipped = 0
    for path, integers in prepared.qtk_adaround.items():
        layer = quantized.get_submodule(path)
        assert torch.equal(layer.weight_q.to(torch.int64), integers), path
        # the scale the integers were chosen for is the one deployed
        assert torch.equal(layer.weight_scale, nearest.get_submodule(path).weight_scale), path
        flipped += int((layer.weight_q != nearest.get_submodule(path).weight_q).sum())
    assert flipped > 0
    x = test_data[0][:32]
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=20)


def test_a_spent_time_budget_leaves_nearest_rounding(mnist_model):
    """h(V) starts at each weight's fractional part, so a layer that gets no step rounds to
    nearest: the budget stops the steps, not the layers, and a warning says which layers it
    left without a step."""
    model, train_data, _ = mnist_model
    batches = list(train_data[0][:128].split(64))
    with pytest.warns(qtk.ptq.AdaRoundBudgetWarning, match="6 of 6 layers"):
        prepared = qtk.ptq.adaround(_calibrated(model, batches), batches, time_budget_s=0,
                                    progress=False)
    nearest = qtk.convert(_calibrated(model, batches))
    assert len(prepared.qtk_adaround) == 6
    assert set(prepared.qtk_adaround_steps.values()) == {0}
    for path, integers in prepared.qtk_adaround.items():
        assert torch.equal(integers, nearest.get_submodule(path).weight_q.to(torch.int64)), path


def test_a_time_budget_fits_the_whole_schedule_into_the_steps_it_affords(mnist_model,
                                                                         monkeypatch):
    """Under a budget each layer times its first steps, then lays warm-up and annealing over the
    steps its share affords: its rounding is that of asking for that many iterations, not of a
    long schedule cut off in its warm-up (whose soft roundings were rounded as they stood). A
    clock that ticks once per reading makes the steps exact."""
    model, train_data, _ = mnist_model
    batches = list(train_data[0][:128].split(64))
    ticks = itertools.count()
    monkeypatch.setattr(importlib.import_module("qtk.ptq.adaround"), "time",
                        types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    budgeted = qtk.ptq.adaround(_calibrated(model, batches), batches, iterations=10**6,
                                time_budget_s=600, progress=False)
    first = next(iter(budgeted.qtk_adaround))
    steps = budgeted.qtk_adaround_steps[first]
    assert 10 < steps < 10**6, budgeted.qtk_adaround_steps
    monkeypatch.undo()
    asked = qtk.ptq.adaround(_calibrated(model, batches), batches, iterations=steps,
                             progress=False)
    assert asked.qtk_adaround_steps[first] == steps
    assert torch.equal(budgeted.qtk_adaround[first], asked.qtk_adaround[first])


def _sqnr_db(output, target):
    return float(10 * torch.log10(target.pow(2).sum() / (output - target).pow(2).sum()))


def _accuracy(logits, labels):
    return float((logits.argmax(1) == labels).float().mean()) * 100


def test_adaround_beats_nearest_rounding_on_mnist_at_4_bits(mnist_model):
    model, train_data, (images, labels) = mnist_model
    batches = list(train_data[0][:256].split(64))
    nearest = qtk.convert(_calibrated(model, batches))
    adarounded = qtk.convert(qtk.ptq.adaround(_calibrated(model, batches), batches,
                                              iterations=100, progress=False))
    with torch.no_grad():  # the Quantized reference is slow: each model runs once
        target, nearest_out, adaround_out = model(images), nearest(images), adarounded(images)
    nearest_sqnr, adaround_sqnr = _sqnr_db(nearest_out, target), _sqnr_db(adaround_out, target)
    assert adaround_sqnr > nearest_sqnr + 3, (nearest_sqnr, adaround_sqnr)
    assert _accuracy(target, labels) > 90
    assert _accuracy(adaround_out, labels) >= _accuracy(nearest_out, labels)


@pytest.mark.parametrize("stride, dilation, padding", [(1, 1, 1), (2, 2, 1), (3, 1, 0)])
def test_a_step_window_is_the_convolution_of_its_input_window(stride, dilation, padding):
    """A step reads a window of a large output map: that window of the full convolution equals
    the convolution, without padding, of the input part the window says it reads."""
    from qtk.ptq.adaround import WINDOW, _window

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, stride, padding, dilation)
    x = torch.randn(2, 3, 101, 77)
    full = conv(x)
    padded = torch.nn.functional.pad(x, (padding,) * 4)
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        x_window, y_window = _window(conv, padded, full, generator)
        assert y_window.shape[2:] == (min(WINDOW, full.shape[2]), min(WINDOW, full.shape[3]))
        windowed = torch.nn.functional.conv2d(x_window, conv.weight, conv.bias, stride, 0,
                                              dilation)
        assert torch.allclose(windowed, y_window, atol=1e-5)


def test_a_layer_with_fewer_rows_than_weights_keeps_nearest_rounding():
    """8 samples cannot decide the rounding of 144 weights per output: the linear layer is
    skipped, the conv (8 x 36 rows for 27 weights) is rounded."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 10)).eval()
    batches = [torch.randn(8, 3, 8, 8)]
    prepared = qtk.ptq.adaround(qtk.calibrate(qtk.prepare_ptq(model), batches), batches,
                                iterations=5, progress=False)
    assert list(prepared.qtk_adaround) == ["0"] and prepared.qtk_adaround_skipped == ["2"]


def test_one_pass_gives_each_layer_what_a_forward_gives_it(mnist_model):
    """The layers' inputs (in the model quantized so far) and float targets come from one pass
    through each model, paused at every layer: they equal what a fresh forward records, through
    the residual block too."""
    from qtk.ptq.adaround import _GraphPass, _weight_layer_calls

    model, train_data, _ = mnist_model
    batches = list(train_data[0][:96].split(48))
    prepared = _calibrated(model, batches)
    one_pass = _GraphPass(prepared, batches)
    for call in _weight_layer_calls(prepared):
        path = call.target
        recorded = []
        hook = prepared.get_submodule(path).register_forward_pre_hook(
            lambda module, inputs: recorded.append(inputs[0]))
        with torch.no_grad():
            for batch in batches:
                prepared(batch)
        hook.remove()
        assert torch.equal(one_pass.run_to(call, output=False), torch.cat(recorded)), path


def test_a_layer_is_rounded_for_its_activated_output():
    """The target is the output of the element-wise activation module that alone reads the layer:
    a conv before a PReLU of slope 0 rounds exactly as the same conv with a fused ReLU, and not
    as the conv alone."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3)
    prelu = torch.nn.PReLU(8, init=0.0)
    batches = [torch.randn(16, 3, 12, 12)]
    rounded = {}
    for name, activation in (("prelu", prelu), ("relu", torch.nn.ReLU()),
                             ("none", torch.nn.Identity())):
        model = torch.nn.Sequential(conv, activation).eval()
        prepared = qtk.calibrate(qtk.prepare_ptq(model, W4A8_PTQ), batches, method="minmax")
        rounded[name] = qtk.ptq.adaround(prepared, batches, iterations=200, learning_rate=1e-2,
                                         progress=False).qtk_adaround["0"]
    assert torch.equal(rounded["prelu"], rounded["relu"])
    assert not torch.equal(rounded["prelu"], rounded["none"])
