"""Every op qtk registers, in each of its forms (the family files' Float / QAT / Quantized trios
and float32 runtime ops): one small model per registered float module type.

A new op adds one line to EXAMPLES; the first test fails until it does. For each example: QAT with
fake quantization off equals float (1e-5); the Quantized model is within one output step of the
QAT model; PTQ, convert, export and the runtime are byte-identical to the Quantized reference; its
float export runs in the runtime within the float tolerance of test_float_export.py.
"""
import pytest
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime
from qtk import modules
from torchvision.ops import StochasticDepth
from test_float_export import assert_runtime_matches_torch

# every example is int8: a fallback to float here is a failure, not a warning
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("error::qtk.FloatFallbackWarning")]

SIZE = 12


def _conv(c_in=3, c_out=6, **kwargs):
    return nn.Conv2d(c_in, c_out, 3, padding=1, **kwargs)


def _bn(channels):
    bn = nn.BatchNorm2d(channels)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


def _after_conv(*layers):
    return nn.Sequential(_conv(), *layers)


class Functional(nn.Module):
    """A functional call on the input and its sigmoid (both exact in int8, so the Quantized op is
    within one step of its QAT form): ``a + b``, ``relu(a + b)``, ``a * b``, ``cat``."""

    def __init__(self, call):
        super().__init__()
        self.call = call

    def forward(self, x):
        return self.call(x, torch.sigmoid(x))


class UserStubs(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = modules.QuantStub(), modules.DequantStub()
        self.conv = _conv()

    def forward(self, x):
        return self.dequant(self.conv(self.quant(x)))


class ChannelsLast(nn.Module):
    """conv, then ``norm`` over the channels of [N, H, W, C] (ConvNeXt's block)."""

    def __init__(self, norm):
        super().__init__()
        self.conv, self.norm = _conv(), norm

    def forward(self, x):
        return self.norm(self.conv(x).permute(0, 2, 3, 1))


class Normalized(nn.Module):
    """``1 - (conv(x) - mean) / 2 * exp(log_scale)``: a learned mean, a scale computed from a
    learned tensor (folded as an expression of it), a number on either side."""

    def __init__(self):
        super().__init__()
        self.conv = _conv()
        self.mean = nn.Parameter(torch.linspace(-0.3, 0.3, 6).reshape(6, 1, 1))
        self.log_scale = nn.Parameter(torch.linspace(-0.5, 0.5, 6).reshape(1, 6, 1, 1))

    def forward(self, x):
        return 1 - (self.conv(x) - self.mean) / 2 * self.log_scale.exp()


class ClassToken(nn.Module):
    """ViT's input: patches as tokens, a learned class token before them, a position embedding."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 4, stride=4)
        self.token = nn.Parameter(torch.randn(1, 1, 8))
        self.position = nn.Parameter(torch.randn(1, 10, 8) * 0.1)

    def forward(self, x):
        tokens = self.conv(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.token.expand(x.shape[0], -1, -1), tokens], dim=1)
        return (tokens + self.position)[:, :2]  # two tokens: the class token alone is 8 values


class WindowScores(nn.Module):
    """Swin's scores [N, windows, heads, T, T] plus its relative position bias and shift mask."""

    def __init__(self):
        super().__init__()
        from torchvision.models.swin_transformer import ShiftedWindowAttention
        self.conv = nn.Conv2d(3, 12, 1)
        swin = ShiftedWindowAttention(12, [3, 4], [1, 2], num_heads=3)
        mask = modules.attention._shift_mask(6, 8, [3, 4], [1, 2])  # 4 windows of 12 tokens
        self.bias = modules.attention.WindowAttentionBias(swin, 12, mask)

    def forward(self, x):
        scores = self.conv(x).reshape(x.shape[0], 4, 3, 12, 12)
        return self.bias(scores)


class ResizeBack(nn.Module):
    """A segmentation head: back to the input's size, read from its shape at each call."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.nn.functional.interpolate(self.conv(x), size=x.shape[-2:], mode="bilinear",
                                               align_corners=False)


class L2Normalized(nn.Module):
    """SSD's VGG backbone: ``F.normalize`` over the channels, as a functional call."""

    def __init__(self):
        super().__init__()
        self.conv = _conv()

    def forward(self, x):
        return torch.nn.functional.normalize(self.conv(x), dim=1)


def PerChannelPReLU():
    """nn.PReLU with one slope per channel: positive, zero and negative ones."""
    prelu = nn.PReLU(6)
    with torch.no_grad():
        prelu.weight.copy_(torch.tensor([0.25, -0.5, 0.0, 1.5, 0.1, -0.05]))
    return prelu


def ShiftedPReLU():
    """ReActNet's RPReLU with shifts and slopes of either sign per channel."""
    rprelu = modules.RPReLU(6)
    with torch.no_grad():
        rprelu.shift_in.copy_(torch.tensor([0.3, -0.2, 0.0, 0.5, -0.6, 0.1]))
        rprelu.weight.copy_(torch.tensor([0.25, -0.5, 0.0, 1.5, 0.1, -0.05]))
        rprelu.shift_out.copy_(torch.tensor([-0.1, 0.4, 0.2, 0.0, -0.3, 0.6]))
    return rprelu


EXAMPLES = {
    nn.Conv2d: lambda: nn.Sequential(_conv(groups=3)),
    modules.ConvReLU2d: lambda: nn.Sequential(nn.Conv2d(3, 5, 3, stride=2), nn.ReLU()),
    modules.ConvBn2d: lambda: nn.Sequential(_conv(groups=3), _bn(6)),
    modules.ConvBnReLU2d: lambda: nn.Sequential(nn.Conv2d(3, 5, 3, dilation=2, bias=False), _bn(5),
                                                nn.ReLU6()),
    nn.ConvTranspose2d: lambda: _after_conv(nn.ConvTranspose2d(
        6, 6, (3, 4), stride=(2, 3), padding=(1, 2), output_padding=(1, 0), dilation=(1, 2),
        groups=2)),
    nn.Linear: lambda: nn.Sequential(nn.Flatten(), nn.Linear(3 * SIZE * SIZE, 7)),
    modules.LinearReLU: lambda: nn.Sequential(nn.Flatten(), nn.Linear(3 * SIZE * SIZE, 9),
                                              nn.ReLU()),
    modules.Add: lambda: Functional(lambda a, b: a + b),
    modules.AddReLU: lambda: Functional(lambda a, b: torch.relu(a + b)),
    modules.Mul: lambda: Functional(lambda a, b: a * b),
    modules.WithConstant: lambda: Normalized(),
    modules.Concat: lambda: Functional(lambda a, b: torch.cat([a, b], 1)),
    modules.MatMul: lambda: Functional(lambda a, b: a @ b.transpose(2, 3)),
    nn.LayerNorm: lambda: ChannelsLast(nn.LayerNorm(6)),
    nn.GroupNorm: lambda: _after_conv(nn.GroupNorm(2, 6)),
    nn.Softmax: lambda: _after_conv(nn.Softmax(1)),
    modules.L2Normalize: lambda: L2Normalized(),
    modules.SpatialMean: lambda: _after_conv(modules.SpatialMean()),
    nn.ReLU: lambda: _after_conv(nn.MaxPool2d(2), nn.ReLU()),
    nn.ReLU6: lambda: _after_conv(nn.MaxPool2d(2), nn.ReLU6()),
    nn.Hardtanh: lambda: _after_conv(nn.MaxPool2d(2), nn.Hardtanh(-0.5, 0.75)),
    nn.Hardswish: lambda: _after_conv(nn.Hardswish()),
    nn.Hardsigmoid: lambda: _after_conv(nn.Hardsigmoid()),
    nn.Sigmoid: lambda: _after_conv(nn.Sigmoid()),
    nn.Tanh: lambda: _after_conv(nn.Tanh()),
    nn.SiLU: lambda: _after_conv(nn.SiLU()),
    nn.Mish: lambda: _after_conv(nn.Mish()),
    nn.GELU: lambda: _after_conv(nn.GELU(approximate="tanh")),
    nn.LeakyReLU: lambda: _after_conv(nn.LeakyReLU(0.2)),
    nn.PReLU: lambda: _after_conv(nn.MaxPool2d(2), PerChannelPReLU()),  # after a conv: fused
    modules.RPReLU: lambda: _after_conv(ShiftedPReLU()),
    nn.ELU: lambda: _after_conv(nn.ELU(0.7)),
    nn.Softplus: lambda: _after_conv(nn.Softplus(beta=2.0, threshold=1.5)),
    nn.MaxPool2d: lambda: _after_conv(nn.MaxPool2d(3, 2, 1)),
    nn.AvgPool2d: lambda: _after_conv(nn.AvgPool2d(3, 2, 1, count_include_pad=False)),
    nn.AdaptiveAvgPool2d: lambda: _after_conv(nn.AdaptiveAvgPool2d(1)),
    nn.AdaptiveMaxPool2d: lambda: _after_conv(nn.AdaptiveMaxPool2d((4, 3))),
    nn.Upsample: lambda: _after_conv(nn.Upsample(scale_factor=2, mode="nearest")),
    modules.QATResizeBilinear: lambda: _after_conv(nn.Upsample(size=(7, 17), mode="bilinear")),
    modules.UpsampleTo: lambda: ResizeBack(),
    nn.ConstantPad2d: lambda: _after_conv(nn.ConstantPad2d((1, 0, 2, 1), 0.25)),
    nn.ReflectionPad2d: lambda: _after_conv(nn.ReflectionPad2d((2, 0, 3, 1))),
    nn.ReplicationPad2d: lambda: _after_conv(nn.ReplicationPad2d((0, 3, 1, 2))),
    nn.Flatten: lambda: _after_conv(nn.Flatten()),
    nn.Identity: lambda: _after_conv(nn.Identity()),
    nn.Dropout: lambda: _after_conv(nn.Dropout(0.5)),
    StochasticDepth: lambda: _after_conv(StochasticDepth(0.2, "row")),
    modules.QuantStub: UserStubs,
    modules.DequantStub: UserStubs,
}

# Ops with a float32 runtime op and no int8 form yet: float export, and PTQ with them left float.
FLOAT_ONLY_EXAMPLES = {
    modules.Sub: lambda: Functional(lambda a, b: a - b),
    modules.Div: lambda: Functional(lambda a, b: a / (b + 0.5)),
    modules.ExpandBatch: lambda: ClassToken(),
    modules.attention.WindowAttentionBias: lambda: WindowScores(),
}


def _registered_types():
    """Every float module type some family file gives a form, and the QAT classes that stand for
    a mode of one (bilinear resizing)."""
    types = set(modules.FLOAT_TO_QAT) | set(modules.PASS_THROUGH) | set(modules.FLOAT_EXPORTS)
    return types | {m for m in modules.QAT_MODULES if nn.Upsample in m.FLOAT_TYPES}


def test_every_registered_op_has_an_example():
    missing = sorted(t.__name__ for t in _registered_types() - set(EXAMPLES)
                     - set(FLOAT_ONLY_EXAMPLES))
    assert not missing, f"add an example to EXAMPLES or FLOAT_ONLY_EXAMPLES for {missing}"


def _ids():
    return [t.__name__ for t in EXAMPLES]


def _set_fake_quant(model, enabled):
    for m in model.modules():
        if isinstance(m, qtk.fake_quant.FakeQuantize):
            m.fake_quant_enabled = enabled


@pytest.mark.parametrize("op", EXAMPLES, ids=_ids())
def test_qat_without_fake_quant_equals_float(op):
    float_model = EXAMPLES[op]().eval()
    qat = qtk.quantize_qat(float_model).eval()
    _set_fake_quant(qat, False)
    x = torch.randn(2, 3, SIZE, SIZE)
    torch.testing.assert_close(qat(x), float_model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op", EXAMPLES, ids=_ids())
def test_quantized_is_within_one_step_of_qat(op):
    qat = qtk.quantize_qat(EXAMPLES[op]().eval())
    x = torch.randn(4, 3, SIZE, SIZE)
    with torch.no_grad():
        for _ in range(3):
            qat.train()(x)  # settle the moving averages on this input
    qat.eval()
    quantized = qtk.convert(qat)
    dequant = next(m for m in quantized.modules() if isinstance(m, modules.QuantizedDequantStub))
    out_scale = dequant.input_qparams[0].scale
    with torch.no_grad():
        difference = (quantized(x) - qat(x)).abs().max().item()
    assert difference <= 1.01 * out_scale, f"{difference} > one step ({out_scale})"


@pytest.mark.parametrize("op", EXAMPLES, ids=_ids())
def test_int8_is_byte_identical(op):
    model = EXAMPLES[op]().eval()
    x = torch.randn(3, 3, SIZE, SIZE)
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE) for _ in range(2)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)


@pytest.mark.parametrize("op", sorted({**EXAMPLES, **FLOAT_ONLY_EXAMPLES}, key=lambda t: t.__name__),
                         ids=lambda t: t.__name__)
def test_float_export_matches_torch(op):
    """A mixing conv after a spatial output, whose values ReLU and nearest resizing repeat."""
    model = {**EXAMPLES, **FLOAT_ONLY_EXAMPLES}[op]().eval()
    with torch.no_grad():
        out = model(torch.zeros(1, 3, SIZE, SIZE))
    if out.dim() == 4 and min(out.shape[2:]) >= 3:
        model = nn.Sequential(model, nn.Conv2d(out.shape[1], 5, 3)).eval()
    assert_runtime_matches_torch(model, SIZE, batch=2)


@pytest.mark.parametrize("op", FLOAT_ONLY_EXAMPLES, ids=lambda t: t.__name__)
def test_float_fallback_runs_within_the_float_tolerance(op):
    """PTQ keeps the op float between a dequantize and a quantize; the runtime's float32 kernel
    then matches the Quantized model within spec 15's float tolerance."""
    model = FLOAT_ONLY_EXAMPLES[op]().eval()
    with pytest.warns(qtk.FloatFallbackWarning, match=op.__name__):
        prepared = qtk.prepare_ptq(model)
    assert any(row.op == op.__name__ and row.precision == "float"
               for row in qtk.report(prepared).rows)
    with torch.no_grad():
        for _ in range(2):
            prepared(torch.randn(4, 3, SIZE, SIZE))
    quantized = qtk.convert(prepared)
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, SIZE, SIZE)), threads=2)
    x = torch.randn(3, 3, SIZE, SIZE)
    with torch.no_grad():
        expected = quantized(x)
    actual = session.run(x)
    assert actual.shape == expected.shape
    assert_not_degenerate(expected, min_distinct=8)
    assert torch.all((actual - expected).abs() <= 1e-4 * (1 + expected.abs())), \
        f"max difference {(actual - expected).abs().max():.3g}"


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float_export_has_both_forms(approximate):
    """GELU's two forms are two float32 runtime ops (gelu, gelu_tanh); one example covers int8."""
    assert_runtime_matches_torch(_after_conv(nn.GELU(approximate=approximate)).eval(), SIZE)


@pytest.mark.parametrize("output_size", [(3, 2), (None, 4), 6, 12])
def test_adaptive_avg_pool_to_a_dividing_size(output_size):
    """VGG's and AlexNet's AdaptiveAvgPool2d(7 or 6): an average pool of in / out windows."""
    model = _after_conv(nn.AdaptiveAvgPool2d(output_size)).eval()
    x = torch.randn(2, 3, SIZE, SIZE)
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)
    assert_runtime_matches_torch(model, SIZE)


def test_adaptive_avg_pool_of_unequal_windows_is_refused_by_name():
    quantized = calibrated(_after_conv(nn.AdaptiveAvgPool2d(5)).eval(), [torch.randn(2, 3, SIZE,
                                                                                      SIZE)])
    with pytest.raises(qtk.UnsupportedOpError, match=r"^1: AdaptiveAvgPool2d\(5\) of a 12x12 "
                                                     r"plane has windows of unequal size"):
        qtk.export(quantized, torch.randn(1, 3, SIZE, SIZE))


def test_adaptive_max_pool_of_unequal_windows_is_refused_by_name():
    quantized = calibrated(_after_conv(nn.AdaptiveMaxPool2d(5)).eval(), [torch.randn(2, 3, SIZE,
                                                                                      SIZE)])
    with pytest.raises(qtk.UnsupportedOpError, match=r"^1: AdaptiveMaxPool2d\(5\) of a 12x12 "
                                                     r"plane has windows of unequal size"):
        qtk.export(quantized, torch.randn(1, 3, SIZE, SIZE))


class FunctionalPReLU(nn.Module):
    """``F.prelu`` with the model's own slopes (one per channel): an nn.PReLU sharing them."""

    def __init__(self):
        super().__init__()
        self.conv = _conv()
        self.slopes = nn.Parameter(torch.tensor([0.3, -0.2, 0.0, 0.9, 0.05, -1.2]))

    def forward(self, x):
        return torch.nn.functional.prelu(self.conv(x), self.slopes)


def test_functional_prelu_is_int8_and_byte_identical():
    model = FunctionalPReLU().eval()
    x = torch.randn(3, 3, SIZE, SIZE)
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE) for _ in range(2)])
    # captured as an nn.PReLU with those slopes, then fused into the conv
    assert any(getattr(m, "activation", None) == "prelu" for m in quantized.modules())
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)
    assert_runtime_matches_torch(model, SIZE)


FUSED_PRELU = {
    "conv": lambda: _after_conv(PerChannelPReLU()),
    "conv_bn_one_slope": lambda: nn.Sequential(nn.Conv2d(3, 5, 3, stride=2, bias=False), _bn(5),
                                               nn.PReLU(init=-0.3)),
    "depthwise": lambda: nn.Sequential(_conv(), nn.Conv2d(6, 6, 3, padding=1, groups=6),
                                       PerChannelPReLU()),
}


@pytest.mark.parametrize("name", FUSED_PRELU)
def test_prelu_after_a_conv_is_fused_and_byte_identical(name):
    """Spec 22 fused: the conv's sums requantized by sign, its output never rounded alone."""
    model = FUSED_PRELU[name]().eval()
    x = torch.randn(3, 3, SIZE, SIZE)
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE) for _ in range(2)])
    assert not any(isinstance(m, modules.activation.QuantizedPReLU) for m in quantized.modules())
    fused = [m for m in quantized.modules() if getattr(m, "activation", None) == "prelu"]
    assert len(fused) == 1 and fused[0].negative is not None
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=8)
    assert_runtime_matches_torch(model, SIZE)  # the float export: conv, then prelu


class SharedPool(nn.Module):
    """One AvgPool2d module called on two tensors of different quantization."""

    def __init__(self):
        super().__init__()
        self.a, self.b = _conv(), _conv()
        self.pool = nn.AvgPool2d(3, 2, 1, count_include_pad=False)

    def forward(self, x):
        return torch.cat([self.pool(self.a(x)), self.pool(self.b(x))], 1)


class SharedTwice(nn.Module):
    """One module called on two tensors of different ranges."""

    def __init__(self, shared):
        super().__init__()
        self.a, self.b, self.shared = _conv(), _conv(6, 6), shared

    def forward(self, x):
        a = self.a(x)
        return torch.cat([self.shared(a), self.shared(self.b(a))], 1)


@pytest.mark.parametrize("shared", [nn.SiLU(), _conv(6, 6)], ids=["SiLU", "Conv2d"])
def test_a_module_with_a_qat_form_called_twice_quantizes_per_call(shared):
    """Each call gets its own observers (its own input range); a conv keeps one weight."""
    prepared = qtk.prepare_ptq(SharedTwice(shared).eval())
    qat = [m for m in prepared.modules() if isinstance(m, modules.QATModule)
           and not isinstance(m, (modules.QATQuantStub, modules.QATDequantStub, modules.QATConcat))]
    assert len(qat) == 4  # a, b and the shared module twice
    if isinstance(shared, nn.Conv2d):
        assert prepared.shared.weight is prepared.shared_1.weight
    quantized = calibrated(SharedTwice(shared).eval(), [torch.randn(4, 3, SIZE, SIZE)])
    x = torch.randn(2, 3, SIZE, SIZE)
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=32)


def test_a_pass_through_module_called_on_int8_and_float_data():
    """The float call (its input kept float by the qconfig) reads the float module, not the
    Quantized one the int8 call converted."""
    mapping = qtk.QConfigMapping(qtk.default_ptq_qconfig, by_name={"b": None})
    model = SharedTwice(nn.MaxPool2d(3, 1, 1)).eval()
    prepared = qtk.prepare_ptq(model, mapping)
    prepared(torch.randn(4, 3, SIZE, SIZE))
    quantized = qtk.convert(prepared)
    calls = [quantized.get_submodule(n.target) for n in quantized.graph.nodes
             if n.op == "call_module" and n.target.startswith("shared")]
    assert [type(m).__name__ for m in calls] == ["QuantizedMaxPool2d", "MaxPool2d"]
    x = torch.randn(2, 3, SIZE, SIZE)
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.allclose(reference, runtime, atol=1e-5)
    assert_not_degenerate(reference, min_distinct=32)


def test_a_module_called_twice_converts_per_call():
    quantized = calibrated(SharedPool().eval(), [torch.randn(4, 3, SIZE, SIZE)])
    pools = [m for m in quantized.modules() if isinstance(m, modules.QuantizedAvgPool2d)]
    assert len(pools) == 2 and pools[0].input_qparams != pools[1].input_qparams
    x = torch.randn(2, 3, SIZE, SIZE)
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=32)


class FunctionalBesideModule(nn.Module):
    """``F.relu`` in a forward that also owns a ``self.relu``, and an in-place ``x.relu_()``
    whose input is read again after it."""

    def __init__(self):
        super().__init__()
        self.conv, self.conv2, self.relu = _conv(), _conv(6, 6), nn.ReLU6()

    def forward(self, x):
        y = self.conv(x)
        y.relu_()
        z = torch.nn.functional.relu(self.conv2(y))
        return self.relu(z) + y


def test_functional_calls_keep_the_modules_and_in_place_semantics():
    model = FunctionalBesideModule().eval()
    prepared = qtk.prepare_ptq(model)
    assert isinstance(prepared.relu, nn.ReLU6)  # F.relu's module took another name
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE)])
    x = torch.randn(2, 3, SIZE, SIZE)
    with torch.no_grad():
        expected = model(x)
        assert (quantized(x) - expected).abs().max() < 0.05 * expected.abs().max()


class Sequence1d(nn.Module):
    """Conv1d over a sequence (audio, text): decomposed as a Conv2d of height 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 6, 5, stride=2, padding=2, dilation=1)
        self.conv2 = nn.Conv1d(6, 6, 3, groups=3, dilation=2, bias=False)

    def forward(self, x):
        return self.conv2(torch.relu(self.conv(x.flatten(2)))).unsqueeze(1)


def test_conv1d_deploys_as_a_conv2d_of_height_one():
    model = Sequence1d().eval()
    x = torch.randn(3, 3, SIZE, SIZE)
    prepared = qtk.prepare_ptq(model)
    with torch.no_grad():
        torch.testing.assert_close(prepared(x), model(x), atol=1e-5, rtol=1e-5)  # observing
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE)])
    assert sum(isinstance(m, modules.QuantizedConv2d) for m in quantized.modules()) == 2
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=16)


class FunctionalSpellings(nn.Module):
    """F.leaky_relu, F.elu, F.softplus and F.pad(mode="reflect" / "replicate") in a forward."""

    def __init__(self):
        super().__init__()
        self.conv = _conv()

    def forward(self, x):
        F = torch.nn.functional
        y = F.pad(self.conv(x), (1, 2, 2, 0), mode="reflect")
        y = F.leaky_relu(y, 0.1) + F.elu(y, alpha=0.5)
        return F.softplus(F.pad(y, (0, 1, 1, 1), mode="replicate"), beta=1.5, threshold=2.0)


def test_functional_spellings_of_parameterized_functions_and_padding_modes():
    model = FunctionalSpellings().eval()
    prepared = qtk.prepare_ptq(model)
    types = {type(m) for m in prepared.modules()}
    assert {nn.ReflectionPad2d, nn.ReplicationPad2d} <= types
    assert sum(isinstance(m, modules.QATTableFunction) for m in prepared.modules()) == 3
    x = torch.randn(3, 3, SIZE, SIZE)
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE) for _ in range(2)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x, threads=2)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=16)
    assert_runtime_matches_torch(model, SIZE, batch=2)


@pytest.mark.parametrize("kwargs", [dict(stride=2, padding=1, output_padding=1),
                                    dict(stride=3, padding=2, dilation=2, groups=2),
                                    dict(stride=(1, 2), padding=(0, 3), output_padding=(0, 1)),
                                    dict(kernel_size=2, stride=2, bias=False)],
                         ids=["s2p1op1", "s3p2d2g2", "asymmetric", "2x2s2"])
def test_conv_transpose2d_geometries_and_macs(kwargs):
    """Byte-identical over strides, paddings, output paddings, dilations and groups; the report
    counts input numel x O/g x kh x kw MACs: with all-ones input and weight and no padding every
    product lands in the output, so the output's sum counts them."""
    kwargs = {"kernel_size": 3, **kwargs}
    conv = nn.ConvTranspose2d(6, 4, **kwargs)
    model = nn.Sequential(_conv(), conv).eval()
    x = torch.randn(2, 3, SIZE, SIZE)
    quantized = calibrated(model, [torch.randn(4, 3, SIZE, SIZE)])
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert_not_degenerate(reference, min_distinct=16)
    assert_runtime_matches_torch(model, SIZE)

    rows = {row.node: row for row in qtk.report(qtk.prepare_ptq(model), x).rows}
    unpadded = nn.ConvTranspose2d(6, 4, **{**kwargs, "padding": 0, "bias": False})
    torch.nn.init.ones_(unpadded.weight)
    with torch.no_grad():
        products = unpadded(torch.ones(2, 6, SIZE, SIZE)).sum().item()
    assert rows["1"].macs == products == 2 * 6 * SIZE * SIZE * (4 // conv.groups) * \
        conv.kernel_size[0] * conv.kernel_size[1]

