"""prepare (QAT and PTQ) and convert: the float -> QAT -> Quantized steps of the data flow."""
import copy
import itertools
import warnings

import torch
from torch import fx, nn
from tqdm import tqdm

from . import arithmetic, modules
from .errors import UnsupportedOpError
from .graph.capture import (call_name, capture, module_path, node_inputs, node_path,
                            replace_submodule, unused_name)
from .graph.functional import (FLOAT_CALL, TENSOR_KINDS, classify, normalize, refusal,
                               shape_op_kinds)
from .graph.decompose import decompose
from .graph.fusion import fuse
from .fake_quant import FakeQuantize
from .observers import HistogramObserver, MinMaxObserver
from .qconfig import QConfigMapping, as_mapping, default_ptq_qconfig, default_qat_qconfig
from .quantization_report import (BY_QCONFIG, NO_INT8_FORM, READS_FLOAT, Report, ReportRow,
                                  summary_line)


def _lookup_by_type(table, module):
    for cls in type(module).__mro__:
        if cls in table:
            return table[cls]
    return None


def _insert_stub(graph_module, producer, consumer, stub, stubs):
    """Route ``producer`` -> ``consumer`` through a QAT ``stub`` (one per producer and kind)."""
    key = (producer, type(stub))
    if key not in stubs:
        prefix = "quant" if isinstance(stub, modules.QATQuantStub) else "dequant"
        name = f"{prefix}_{producer.name}"
        graph_module.add_submodule(name, stub)
        with graph_module.graph.inserting_after(producer):
            stubs[key] = graph_module.graph.call_module(name, (producer,))
    consumer.replace_input_with(producer, stubs[key])


def _prepare(model, qconfig, default, strict=False, example_inputs=None):
    """Capture, fuse, decide which parts are int8, put stubs on the borders, swap in QAT modules.

    A module is int8 when it has a QAT form and its qconfig is not None; ops that only move or
    clamp values (pooling, ReLU, reshapes, ...) follow their input, unless their qconfig is None.
    An op qtk has no int8 form for stays float (``strict``: is refused, unless its qconfig is
    None). Graph inputs and outputs are float, so the borders with them get stubs like any other
    border between float and int8. The decisions are kept as the model's ``qtk_report``
    (:func:`qtk.report`).
    """
    mapping = as_mapping(qconfig, default)
    if example_inputs is not None and not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    graph_module = fuse(normalize(capture(decompose(copy.deepcopy(model), example_inputs))))
    kinds = classify(graph_module)
    int8, stubs, rows = set(), {}, []
    originals = {}  # target -> its float module, for a second call of a module swapped to QAT
    per_channel = {}  # node -> its QConfig, where that has a per-channel activation quantizer

    def no_int8_form(refusal_message):
        if strict:
            raise UnsupportedOpError(refusal_message)
        return NO_INT8_FORM

    for node in list(graph_module.graph.nodes):
        inputs = [n for n in node_inputs(node) if kinds.get(n) in TENSOR_KINDS]
        if node.op == "output":
            for producer in [n for n in inputs if n in int8]:
                _insert_stub(graph_module, producer, node, modules.QATDequantStub(), stubs)
            continue
        if node.op in ("call_function", "call_method") and FLOAT_CALL in node.meta:
            if mapping.qconfig_for(node_path(node), _owner_module(graph_module, node)) is None:
                why_float = BY_QCONFIG
            else:
                why_float = f"{no_int8_form(refusal(node))}: {node.meta[FLOAT_CALL]}"
            rows.append(ReportRow(node_path(node), call_name(node), "float", why_float))
        elif node.op != "call_module":
            if node.op in ("call_function", "call_method") and inputs and inputs[0] in int8:
                int8.add(node)  # shape ops follow their input
            continue
        else:
            module = originals.get(node.target, graph_module.get_submodule(node.target))
            module_qconfig = mapping.qconfig_for(node.target, module)
            name = type(module).__name__
            why_float = BY_QCONFIG if module_qconfig is None else READS_FLOAT
            if isinstance(module, modules.QuantStub):  # the user's own borders
                stub_qconfig = module_qconfig or mapping.default or default
                if stub_qconfig is not None:  # None only from prepare_float: a float identity
                    replace_submodule(graph_module, node.target,
                                      modules.QATQuantStub(stub_qconfig))
                    int8.add(node)
            elif isinstance(module, modules.DequantStub):
                if inputs and inputs[0] in int8:
                    replace_submodule(graph_module, node.target, modules.QATDequantStub())
                continue
            elif type(module) in modules.FLOAT_TO_QAT and module_qconfig is not None:
                for producer in [n for n in inputs if n not in int8]:
                    _insert_stub(graph_module, producer, node,
                                 modules.QATQuantStub(module_qconfig), stubs)
                qat = modules.FLOAT_TO_QAT[type(module)].from_float(module, module_qconfig)
                if node.target in originals:  # a second call: its own observers, shared weights
                    node.target = unused_name(graph_module, node.target)
                    graph_module.add_submodule(node.target, qat)
                else:
                    originals[node.target] = module
                    replace_submodule(graph_module, node.target, qat)
                int8.add(node)
                if module_qconfig.channel_activation is not None:
                    per_channel[node] = module_qconfig
            elif isinstance(module, modules.PASS_THROUGH):
                if inputs and inputs[0] in int8 and module_qconfig is not None:
                    int8.add(node)
            elif module_qconfig is not None:
                why_float = no_int8_form(
                    f"{node.target}: {name} has no quantized form in qtk; replace it with a "
                    f"supported module (docs/quantization_spec.md lists them) or keep it in float "
                    f"with a qconfig of None for {node.target!r}")
            rows.append(ReportRow(node.target, name, "int8" if node in int8 else "float",
                                  "" if node in int8 else why_float))
        if node not in int8:  # a float op reads float values
            for producer in [n for n in inputs if n in int8]:
                _insert_stub(graph_module, producer, node, modules.QATDequantStub(), stubs)
    _quantize_per_channel(graph_module, per_channel)
    _bound_by_readers(graph_module)
    graph_module.graph.lint()
    graph_module.recompile()
    graph_module.qtk_report = rows
    if Report(rows).fallbacks:
        warnings.warn(summary_line(Report(rows)), FloatFallbackWarning, stacklevel=3)
    return graph_module


def _quantize_per_channel(graph_module, qconfigs):
    """Spec 25: an output is quantized per channel (its QConfig's ``channel_activation``) where
    a depthwise convolution reads it, directly or through table functions, and its producer
    writes a scale per channel: a convolution without ReLU6 (whose clamp would differ per
    channel) or a table function. A depthwise convolution keeps each channel apart, so each keeps
    its own resolution up to the layer that mixes them. (Per channel before pointwise readers
    too measured worse: PP-LCNet's output SQNR 24.0 -> 21.0 dB on the PTQ study's 40 inputs of
    20 package photos, model_zoo/ptq_study.py.)"""
    def module(node):
        return graph_module.get_submodule(node.target) if node.op == "call_module" else None

    def writes(node):
        m = module(node)
        return isinstance(m, modules.QATTableFunction) or (
            isinstance(m, modules.QATConv2d) and m.activation in (None, "relu"))

    def depthwise(node):
        m = module(node)
        return (isinstance(m, modules.QATConv2d) and m.input_fake_quant is None
                and m.groups == m.in_channels)

    def feeds_depthwise(node):
        return bool(node.users) and all(
            depthwise(reader) or (isinstance(module(reader), modules.QATTableFunction)
                                  and feeds_depthwise(reader))
            for reader in node.users)

    for node, qconfig in qconfigs.items():
        if writes(node) and feeds_depthwise(node):
            module(node).activation_post_process = qconfig.channel_activation()


def _bound_by_readers(graph_module):
    """Where every reader of a quantized output is an activation that saturates (HardSwish
    below -3, HardSigmoid below -3 and above 3, a ReLU below 0, a ReLU6 or Hardtanh outside its
    bounds: :func:`qtk.modules.activation.reader_bounds`), its observer sees the output clamped
    to the widest of their bounds (the observers' ``floor`` and ``ceiling``): the values past
    them read alike, so the range spends no integer levels on them. PP-LCNet's convs before
    HardSwish span down to -47; with their ranges cut at -3 the PTQ study's one call went from
    20.9 to 22.4 dB of output SQNR (``docs/ptq.md``)."""
    for node in graph_module.graph.nodes:
        if node.op != "call_module":
            continue
        quantizer = getattr(graph_module.get_submodule(node.target), "activation_post_process",
                            None)
        bound_observer(quantizer, readers_saturation(graph_module, node))


def bound_observer(quantizer, bounds):
    """``quantizer``'s observer (if it has one) sees its values clamped to ``bounds``, a
    (floor, ceiling) of :func:`readers_saturation`, unless they are None."""
    observer = getattr(quantizer, "observer", None)
    if observer is not None and bounds is not None:
        observer.floor, observer.ceiling = bounds


def readers_saturation(graph_module, node):
    """(floor, ceiling), the widest of the saturation bounds of ``node``'s readers (either None
    where some reader does not saturate on that side), or None where a reader sees every value:
    the range a quantizer of ``node``'s value needs (:func:`_bound_by_readers`)."""
    def reader(user):
        if user.op != "call_module":
            return None
        m = graph_module.get_submodule(user.target)
        return m.module if isinstance(m, modules.QATTableFunction) else m

    bounds = [modules.reader_bounds(reader(user)) for user in node.users]
    if not bounds or any(b is None for b in bounds):
        return None
    floors, ceilings = zip(*bounds)
    return (None if None in floors else min(floors), None if None in ceilings else max(ceilings))


def _owner_module(graph_module, node):
    """The module whose forward() makes a functional call (for its qconfig by type), or None
    where torch.fx names a path the module tree does not hold (maxvit's SwapAxes)."""
    owner = module_path(node)
    if owner == "<top-level forward>":
        return graph_module
    try:
        return graph_module.get_submodule(owner)
    except AttributeError:
        return None


class FloatFallbackWarning(UserWarning):
    """Some ops of the model stay float because qtk has no int8 form for them."""


def prepare_float(model):
    """The float model traced and fused exactly as :func:`prepare_ptq` would, with every module
    kept float (conv-bn(-relu) fused, BatchNorm folded at export): what :func:`qtk.export` writes
    as float32 runtime ops, so a float model and its int8 form run in the same runtime.

    Args:
        model: a float ``nn.Module`` (it is copied, not changed); the result is in eval mode.
    """
    return _prepare(model, QConfigMapping(None), None).eval()


def quantize_qat(model, qconfig=None, strict=False, example_inputs=None):
    """Prepare a float model for quantization-aware training.

    Captures ``forward()``, fuses conv-bn(-relu), conv-relu, linear-relu and add-relu, adds input
    quantization and output dequantization when the model has no QuantStub/DequantStub, and swaps
    in fake-quantized modules. Train the returned model as usual, then call :func:`convert`.

    Args:
        model: a float ``nn.Module`` (it is copied, not changed).
        qconfig: a :class:`qtk.QConfig` for every module, or a :class:`qtk.QConfigMapping` per
            module type or path (``None`` keeps a module float); default
            :data:`qtk.default_qat_qconfig`.
        strict: refuse an op qtk has no int8 form for, instead of keeping it float (the runtime
            then runs it in float32 between a dequantize and a quantize; :func:`qtk.report`).
        example_inputs: an input batch (tensor or tuple), run once through the float model to
            learn feature-map sizes: modules whose int8 decomposition depends on them (Swin's
            shifted-window attention and patch merging) need it, and stay float without it.
    """
    return _prepare(model, qconfig, default_qat_qconfig, strict,
                    example_inputs).train(model.training)


def prepare_ptq(model, qconfig=None, strict=False, example_inputs=None):
    """Prepare a float model for post-training quantization: run calibration batches through
    the returned model (in eval mode), then call :func:`convert`.

    Args:
        model: a trained float ``nn.Module`` (it is copied, not changed).
        qconfig: a :class:`qtk.QConfig` or :class:`qtk.QConfigMapping`; default
            :data:`qtk.default_ptq_qconfig`.
        strict, example_inputs: as for :func:`quantize_qat`.
    """
    return _prepare(model, qconfig, default_ptq_qconfig, strict, example_inputs).eval()


CALIBRATION_METHODS = ("minmax", "percentile", "mse", "kl")


def calibrate(model, data, num_batches=None, method=None, bias_correction=False,
              weight_method=None):
    """Run calibration batches through a model from :func:`prepare_ptq`, with a progress bar.

    Args:
        model: the prepared model.
        data: an iterable of input tensors, or of ``(input, ...)`` tuples (a DataLoader).
        num_batches: stop after this many batches (default: all of ``data``).
        method: how activation ranges are chosen: ``"minmax"``, or a histogram rule
            (``"percentile"``, ``"mse"``, ``"kl"``; see :class:`qtk.observers.HistogramObserver`).
            ``None`` keeps the observers of the model's qconfig.
        bias_correction: after calibration, add to each conv/linear bias the mean output error
            its weight quantization causes on the calibration inputs (Nagel et al. 2019, "Data-
            Free Quantization", empirical bias correction).
        weight_method: how weight ranges are chosen, from the same choices as ``method``, each
            per output channel where the qconfig's weights are (one histogram per channel). The
            qconfig's integer range and symmetry are kept, so weights stay symmetric with zero
            point 0. ``"mse"`` pays off most at low weight bit widths. ``None`` keeps the
            qconfig's weight observers.
    Returns:
        the model, ready for :func:`convert`.
    """
    for chosen in (method, weight_method):
        if chosen is not None and chosen not in CALIBRATION_METHODS:
            raise ValueError(f"unknown calibration method {chosen!r}; choose one of "
                             f"{CALIBRATION_METHODS}")
    weights = {id(m.weight_fake_quant) for m in model.modules() if hasattr(m, "weight_fake_quant")}
    for module in model.modules():
        if isinstance(module, FakeQuantize):
            chosen = weight_method if id(module) in weights else method
            if chosen is not None:
                module.observer = _observer_for(chosen, module.observer)
    model.eval()
    total = num_batches if num_batches is not None else (len(data) if hasattr(data, "__len__")
                                                         else None)
    input_means = _InputMeans(model) if bias_correction else None
    with torch.no_grad():
        for batch in tqdm(itertools.islice(data, num_batches), total=total, desc="calibrating"):
            model(batch[0] if isinstance(batch, (tuple, list)) else batch)
    if input_means is not None:
        input_means.correct_biases()
    return model


def _observer_for(method, old):
    """A fresh observer of calibration ``method`` with ``old``'s integer range, symmetry, channel
    axis, zero point sharing and reader bounds."""
    kwargs = dict(qmin=old.qmin, qmax=old.qmax, symmetric=old.symmetric, ch_axis=old.ch_axis,
                  shared_zero_point=old.shared_zero_point)
    if method == "minmax":
        new = MinMaxObserver(**kwargs)
    else:
        new = HistogramObserver(method=method, **kwargs)
    new.floor, new.ceiling = getattr(old, "floor", None), getattr(old, "ceiling", None)
    return new


class _InputMeans:
    """Per-channel means of every conv/linear layer's input over the calibration batches."""

    def __init__(self, model):
        self.sums, self.counts = {}, {}
        self.hooks = [m.register_forward_pre_hook(self._record) for m in model.modules()
                      if isinstance(m, (modules.QATConv2d, modules.QATLinear))]

    def _record(self, module, inputs):
        x = inputs[0].detach().to(torch.float64)
        channels = x.movedim(1 if x.dim() == 4 else -1, -1).reshape(-1, x.shape[1 if x.dim() == 4
                                                                                else -1])
        self.sums[module] = self.sums.get(module, 0) + channels.sum(0)
        self.counts[module] = self.counts.get(module, 0) + channels.shape[0]

    @torch.no_grad()
    def correct_biases(self):
        for hook in self.hooks:
            hook.remove()
        for module, total in self.sums.items():
            _correct_bias(module, (total / self.counts[module]).to(torch.float32))


def _correct_bias(module, input_mean):
    """bias += (W - Q(W)) E[x]: the quantized layer's mean output then matches the float one."""
    conv = isinstance(module, modules.QATConv2d)
    weight = module.folded_weight_and_bias()[0] if conv else module.weight
    fake_quant = module.weight_fake_quant
    fake_quant.observer(weight)
    scale, zero_point = fake_quant.calculate_qparams()
    q = arithmetic.quantize(weight, scale, zero_point, fake_quant.qmin, fake_quant.qmax, axis=0)
    error = weight - arithmetic.dequantize(q, scale.reshape([-1] + [1] * (weight.dim() - 1)), 0)
    if conv:  # the input channels each output channel's group reads
        groups, out_channels = module.groups, weight.shape[0]
        group_of = torch.arange(out_channels) // (out_channels // groups)
        per_group = input_mean.reshape(groups, -1)[group_of]  # [O, C / groups]
        delta = (error.sum((2, 3)) * per_group).sum(1)
    else:
        delta = error @ input_mean
    shift_bias(module, delta)


def shift_bias(module, delta):
    """Add ``delta`` (one value per output channel) to a conv/linear layer's folded bias: to a
    conv-BatchNorm's beta, which the folded bias carries one to one, else to the layer's bias
    (created where it has none)."""
    target = module.bn if isinstance(module, modules.QATConvBn2d) else module
    if target.bias is None:
        target.bias = nn.Parameter(torch.zeros_like(delta))
    target.bias.add_(delta)


def freeze_bn_stats(model):
    """Stop updating BatchNorm statistics in a QAT model (usually for the last epochs)."""
    for module in model.modules():
        if isinstance(module, modules.QATConvBn2d):
            module.freeze_bn_stats()
    return model


def distillation_loss(student_logits, teacher_logits, temperature=1.0):
    """The loss of a QAT student against a float teacher (Hinton et al. 2015; ReActNet trains its
    binary networks on it alone): KL(softmax(t / T) || softmax(s / T)) T^2 over the last
    dimension, averaged over the batch, the teacher's logits detached. Use it as the task loss or
    add it to one."""
    t = float(temperature)
    teacher = torch.log_softmax(teacher_logits.detach() / t, dim=-1)
    student = torch.log_softmax(student_logits / t, dim=-1)
    return nn.functional.kl_div(student, teacher, reduction="batchmean", log_target=True) * t * t


def convert(model):
    """QAT or calibrated PTQ model -> Quantized model: int8 tensors between integer modules.

    The result is the definition of the right answer: the runtime reproduces its int8 outputs
    byte for byte. Its inputs and outputs are float, like the original model's.
    """
    if not isinstance(model, fx.GraphModule):
        raise TypeError("convert() takes the model returned by qtk.quantize_qat or qtk.prepare_ptq")
    quantized = copy.deepcopy(model)
    qparams = {}  # node -> QParams of its int8 output; float outputs are absent
    shape_ops = shape_op_kinds(quantized)
    originals = {}  # target -> its module before conversion, for the target's other calls
    kept = set()  # targets that a call reads unconverted (a float call of a pass-through module)
    for node in quantized.graph.nodes:
        if node in shape_ops:  # moves bytes: its output keeps its input's qparams
            qparams[node] = qparams.get(node.args[0])
            continue
        if node.op != "call_module":
            continue
        module = originals.get(node.target, quantized.get_submodule(node.target))
        input_qparams = [qparams.get(n) for n in node_inputs(node)]
        is_pass_through = (isinstance(module, modules.PASS_THROUGH) and input_qparams
                           and input_qparams[0] is not None)
        if not (isinstance(module, modules.QATModule) or is_pass_through):  # stays float
            if node.target in originals:  # an earlier call converted it: read the original
                node.target = unused_name(quantized, node.target)
                quantized.add_submodule(node.target, module)
            kept.add(node.target)
            continue
        quantized_class = _lookup_by_type(modules.TO_QUANTIZED, module)
        if quantized_class is not modules.QuantizedQuantStub and None in input_qparams:
            raise UnsupportedOpError(
                f"{node.target}: {type(module).__name__} receives a float tensor; put a "
                f"qtk.modules.QuantStub before it")
        output_quantizer = getattr(module, "activation_post_process", None)
        if not quantized_class.CHANNEL_SCALES and (
                any(q.per_channel for q in input_qparams if q is not None)
                or getattr(output_quantizer, "ch_axis", None) is not None):
            raise UnsupportedOpError(
                f"{node.target}: {type(module).__name__} cannot read or write a tensor quantized "
                f"per channel; only convolutions and table functions can (spec 25). Quantize "
                f"that tensor per tensor (QConfig.channel_activation decides where)")
        with torch.no_grad():
            try:
                new_module = quantized_class.from_module(module, input_qparams, where=node.target)
            except arithmetic.NonFiniteRangeError as error:
                raise arithmetic.NonFiniteRangeError(f"{node.target}: {error}") from None
        if node.target in originals or node.target in kept:  # another call: a module per call
            node.target = unused_name(quantized, node.target)
            quantized.add_submodule(node.target, new_module)
        else:
            originals[node.target] = module
            replace_submodule(quantized, node.target, new_module)
        if new_module.output_qparams is not None:
            qparams[node] = new_module.output_qparams
    quantized.recompile()
    return quantized.eval()


class int8_outputs:
    """Context manager: a Quantized model returns its int8 outputs instead of dequantizing them,
    as ``session.run(x, output='int8')`` does."""

    def __init__(self, model):
        output_stubs = [n for n in model.graph.nodes if n.op == "call_module"
                        and isinstance(model.get_submodule(n.target), modules.QuantizedDequantStub)
                        and all(user.op == "output" for user in n.users)]
        self.stubs = [model.get_submodule(n.target) for n in output_stubs]

    def __enter__(self):
        for stub in self.stubs:
            stub.emit_int8 = True

    def __exit__(self, *exc):
        for stub in self.stubs:
            stub.emit_int8 = False
