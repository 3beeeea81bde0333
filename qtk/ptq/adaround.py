"""AdaRound: each weight rounds up or down as the layer's output needs, not to the nearest
integer (Nagel et al. 2020, "Up or Down? Adaptive Rounding for Post-Training Quantization").

Nearest rounding minimizes each weight's own error, but a layer's output error is a sum over many
weights, and at 4 bits those errors add up. AdaRound learns, layer by layer on calibration data,
a rounding direction per weight that keeps the layer's (activated) output close to the float
model's.

The chosen integers reach :func:`qtk.convert` through the float weights: each (folded) weight is
written as ``scale * q`` and the weight quantizer's observer is frozen (``observer_enabled =
False``), so convert keeps the calibrated scale and :func:`qtk.arithmetic.quantize` gives back
exactly ``q``: the integers come from the one quantize rule, nothing is stored beside it.
"""
import contextlib
import copy
import itertools
import math
import time
import warnings

import torch
from torch import fx, nn
from tqdm import tqdm

from ..fake_quant import FakeQuantize
from ..modules import QATConv2d, QATConvBn2d, QATLinear
from ..modules.activation import QATPReLU, QATTableFunction
from ..modules.conv import batchnorm_scale

# The rectified sigmoid's stretch (paper eq. 23): h(V) reaches 0 and 1 exactly, so the
# regularizer can push every weight to a hard decision.
ZETA, GAMMA = 1.1, -0.1
SAMPLES_PER_STEP = 32  # calibration samples in each optimization step's loss
# A conv step's loss reads one window of at most this many output rows and columns, at a random
# place in each step: on CRAFT's 256x256 maps a step over whole samples cost 64x more, and a
# 240 s budget reached 4 of its 27 layers.
WINDOW = 32
# Under a time budget a layer times this many steps, then lays its warm-up and annealing over the
# steps its share of the budget affords: cut off before annealing, the soft roundings of the
# warm-up were rounded as they stood (CRAFT: AdaRound below nearest rounding).
TIMED_STEPS = 4


class AdaRoundBudgetWarning(UserWarning):
    """The time budget ran out before some layers took a step: they keep nearest rounding."""


def adaround(model, data, num_batches=None, iterations=1000, time_budget_s=None, progress=True,
             regularization=0.01, learning_rate=1e-3, beta_range=(20.0, 2.0), warm_up=0.2):
    """Learn every conv/linear layer's weight rounding, in forward order, on calibration data.

    Each layer minimizes ``|f(W~ x~ + b) - f(W x + b)|^2 + regularization * sum(1 - |2h - 1|^beta)``
    (f the layer's fused activation, or the element-wise one that alone reads its output, if any)
    over ``W~ = scale * (floor(W / scale) + h(V))``:
    ``x~`` is the layer's input in the model quantized so far (earlier layers' weights rounded,
    activations fake-quantized with their calibrated qparams), the target comes from the float
    model (the paper's asymmetric reconstruction). beta anneals from ``beta_range[0]`` to
    ``beta_range[1]`` after ``warm_up`` of the steps (``iterations``, or under a budget the steps
    it affords), which have no regularizer.

    Args:
        model: from :func:`qtk.prepare_ptq`, calibrated by :func:`qtk.calibrate` (weight and
            activation qparams exist); changed in place and returned, ready for :func:`qtk.convert`.
        data: an iterable of input tensors, or of ``(input, ...)`` tuples (a DataLoader).
        num_batches: use this many batches of ``data`` (default: all); they are held in memory,
            with one layer's inputs and targets and the values that the float and the quantized
            pass through the model still need (a U-Net's skip connections).
        iterations: Adam steps per layer (lr ``learning_rate``).
        time_budget_s: give each layer its share of the remaining budget (the remaining budget
            over the remaining layers, so a fast layer leaves time to later ones): it times its
            first steps and lays warm-up and annealing over the steps its share affords, at most
            ``iterations``; ``None``: no limit.
        progress: show a progress bar over the layers.
    Returns:
        the model, with each layer's chosen integers (by module path) in ``model.qtk_adaround``
        and the Adam steps each layer took in ``model.qtk_adaround_steps``; layers the budget
        left without a step keep nearest rounding, and :class:`AdaRoundBudgetWarning` names them.
        A layer whose calibration data gives fewer output rows (samples times output positions)
        than it has weights per output channel keeps nearest rounding too, listed in
        ``model.qtk_adaround_skipped``: with fewer equations than unknowns the rounding would fit
        those rows, not the layer (MTCNN RNet's 576-input dense layer on 50 faces lowered the
        test SQNR).
    """
    batches = [batch[0] if isinstance(batch, (tuple, list)) else batch
               for batch in itertools.islice(data, num_batches)]
    if not batches:
        raise ValueError("adaround needs at least one calibration batch")
    layers = _weight_layer_calls(model)
    float_model = copy.deepcopy(model)
    _set_fake_quant(float_model, enabled=False)
    model.eval()
    decisions, steps, skipped = {}, {}, []
    deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
    bar = tqdm(layers, desc="adaround", disable=not progress)
    # one pass through each model in step, layer by layer: the rounded layers upstream of a layer
    # are final by the time its inputs are computed
    float_pass, quantized_pass = _GraphPass(float_model, batches), _GraphPass(model, batches)
    with fake_quantized_as_converted(model):  # the deployed rounding, calibrated qparams
        for index, call in enumerate(bar):
            path = call.target
            layer = model.get_submodule(path)
            activation = _activation_after(model, call)
            targets = float_pass.run_to(call if activation is None else activation, output=True)
            inputs = quantized_pass.run_to(call, output=False)
            if targets.numel() // targets.shape[1] < layer.weight[0].numel():
                skipped.append(path)
                continue
            # shared once the layer's data is ready: the passes to a U-Net's full-resolution
            # layers once took whole shares, leaving those layers no step
            layer_deadline = None if deadline is None else (
                time.monotonic() + (deadline - time.monotonic()) / (len(layers) - index))
            decisions[path], loss, steps[path] = _round_layer(
                layer, inputs, targets, iterations, layer_deadline, regularization, learning_rate,
                beta_range, warm_up,
                None if activation is None else model.get_submodule(activation.target).module)
            bar.set_postfix(layer=path, loss=f"{loss:.3g}")
    for path in decisions:  # convert must keep the scales the integers were chosen for
        model.get_submodule(path).weight_fake_quant.observer_enabled = False
    model.qtk_adaround, model.qtk_adaround_steps = decisions, steps
    model.qtk_adaround_skipped = skipped
    starved = [path for path, taken in steps.items() if taken == 0]
    if starved and iterations > 0:
        warnings.warn(
            f"AdaRound's time budget of {time_budget_s} s ran out before {len(starved)} of "
            f"{len(steps)} layers took a step (from {starved[0]}); they keep nearest rounding. "
            f"Give it more time, or fewer or smaller calibration inputs: each step runs "
            f"{SAMPLES_PER_STEP} of them through the layer (a window of at most {WINDOW}x{WINDOW} "
            f"outputs of a convolution), after running all of them through the model up to "
            f"it.", AdaRoundBudgetWarning, stacklevel=2)
    return model


def _weight_layer_calls(model):
    """The graph's calls of conv/linear layers in forward order; a layer that shares its weight
    with an earlier one (a module called twice) is rounded once, at the first."""
    calls, seen = [], set()
    for node in model.graph.nodes:
        if node.op != "call_module":
            continue
        module = model.get_submodule(node.target)
        if isinstance(module, (QATConv2d, QATLinear)) and id(module.weight) not in seen:
            seen.add(id(module.weight))
            calls.append(node)
    return calls


def _activation_after(model, call):
    """The call of the element-wise activation module (PReLU, a table function) that alone reads
    the output of the layer ``call``, if the layer has no fused activation: the paper's target is
    the activated output (rounded for its output before its PReLU, MTCNN RNet's first conv took
    the network's output SQNR on the calibration faces from 31.2 to 30.9 dB; for the PReLU's
    output, to 31.3)."""
    if model.get_submodule(call.target).activation is not None:
        return None
    users = list(call.users)
    if len(users) == 1 and users[0].op == "call_module" and isinstance(
            model.get_submodule(users[0].target), (QATPReLU, QATTableFunction)):
        return users[0]
    return None


def _set_fake_quant(model, enabled):
    """Fake quantization on or off everywhere; observers off, so calibration stays as it was."""
    for module in model.modules():
        if isinstance(module, FakeQuantize):
            module.fake_quant_enabled, module.observer_enabled = enabled, False


@contextlib.contextmanager
def fake_quantized_as_converted(model):
    """Inside the block every quantizer of ``model`` fake-quantizes with the qparams it has now,
    computed once (observers stop): the model convert() would make, but for integer rounding, at
    float speed. Restored after the block."""
    quantizers = [m for m in model.modules() if isinstance(m, FakeQuantize)]
    saved = [(m.fake_quant_enabled, m.observer_enabled, m.observer) for m in quantizers]
    for quantizer in quantizers:
        quantizer.fake_quant_enabled, quantizer.observer_enabled = True, False
        if type(quantizer).forward is FakeQuantize.forward:  # reads its observer at every call
            quantizer.observer = _Settled(quantizer.observer)
    try:
        yield
    finally:
        for quantizer, state in zip(quantizers, saved):
            quantizer.fake_quant_enabled, quantizer.observer_enabled, quantizer.observer = state


class _Settled(nn.Module):
    """An observer's qparams, computed once: a histogram rule (KL) would search again at every
    call, and the forward passes here make many."""

    def __init__(self, observer):
        super().__init__()
        self.qmin, self.qmax, self.ch_axis = observer.qmin, observer.qmax, observer.ch_axis
        self.qparams = observer.calculate_qparams()

    def forward(self, x):
        return x

    def calculate_qparams(self):
        return self.qparams


class _GraphPass:
    """A model's graph run node by node over every batch, paused at a layer and resumed: each
    layer's input or output is reached with one pass in all, not one pass per layer (on CRAFT the
    per-layer passes took most of a 240 s budget). Values are dropped after their last use."""

    def __init__(self, model, batches):
        self.interpreter = fx.Interpreter(model)  # its user_to_last_uses frees values
        self.nodes, self.position = list(model.graph.nodes), 0
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        inputs = [node for node in self.nodes if node.op == "placeholder"]
        self.envs = [{node: batch if i == 0 else (node.args[0] if node.args else None)
                      for i, node in enumerate(inputs)} for batch in batches]

    def run_to(self, call, output):
        """Runs up to the node named as ``call`` (a node of this graph or of a copy's) and returns
        its input (first argument) or, after running it, its output, over all batches."""
        stop = self.index[call.name]
        with torch.no_grad():
            while True:
                node = self.nodes[self.position]
                reached = self.position == stop
                if reached and not output:
                    return torch.cat([self._first_argument(env, node) for env in self.envs])
                if node.op != "placeholder":
                    for env in self.envs:
                        self._run(env, node)
                self.position += 1
                if reached:
                    return torch.cat([env[node] for env in self.envs])

    def _first_argument(self, env, node):
        self.interpreter.env = env
        args, _ = self.interpreter.fetch_args_kwargs_from_env(node)
        return args[0].detach()

    def _run(self, env, node):
        self.interpreter.env = env
        env[node] = self.interpreter.run_node(node)
        for used in self.interpreter.user_to_last_uses.get(node, []):
            del env[used]


def _folded_weight_and_bias(layer):
    if isinstance(layer, QATConv2d):
        weight, bias = layer.folded_weight_and_bias()
    else:
        weight, bias = layer.weight, layer.bias
    return weight.detach(), None if bias is None else bias.detach()


def _rectified_sigmoid(v):
    return torch.clamp(torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def _round_layer(layer, inputs, targets, iterations, deadline, regularization, learning_rate,
                 beta_range, warm_up, activation=None):
    """Optimizes one layer's rounding; writes ``scale * q`` into its weight and returns the
    integers q (int64, with the zero point), the last reconstruction loss and the steps taken."""
    weight, bias = _folded_weight_and_bias(layer)
    fake_quant = layer.weight_fake_quant
    scale, zero_point = fake_quant.calculate_qparams()
    channel_shape = [-1] + [1] * (weight.dim() - 1)
    scale = scale.reshape(-1).expand(weight.shape[0]).reshape(channel_shape)
    zero_point = zero_point.reshape(-1).expand(weight.shape[0]).reshape(channel_shape)
    lowest, highest = fake_quant.qmin - zero_point, fake_quant.qmax - zero_point
    scaled = weight * (1.0 / scale)  # as arithmetic.quantize scales
    floor = torch.floor(scaled)
    # h(V) starts at the fractional part: the soft weight starts as the float weight
    rest = (scaled - floor).clamp(1e-4, 1 - 1e-4)
    v = nn.Parameter(-torch.log((ZETA - GAMMA) / (rest - GAMMA) - 1))
    optimizer = torch.optim.Adam([v], lr=learning_rate)

    convolution = isinstance(layer, QATConv2d)
    if convolution:  # padded once, so that any window of it is a convolution without padding
        pad_h, pad_w = layer.padding
        inputs = nn.functional.pad(inputs, (pad_w, pad_w, pad_h, pad_h))

    def layer_output(x, rounded):
        w = torch.clamp(floor + rounded, lowest, highest) * scale
        y = (nn.functional.conv2d(x, w, bias, layer.stride, 0, layer.dilation, layer.groups)
             if convolution else nn.functional.linear(x, w, bias))
        return activation(y) if activation is not None else layer.activate(y)

    samples = torch.Generator().manual_seed(0)
    reconstruction = torch.zeros(())
    start, end = beta_range
    schedule = iterations  # the steps that warm-up and annealing are laid over
    step, timed_from = 0, None
    while step < schedule:
        if deadline is not None:  # fit the schedule to the steps the layer's time affords
            now = time.monotonic()
            if now > deadline:
                break
            if step == 1:  # the first step pays one-off costs: time the next ones
                timed_from = now
            elif step == 1 + TIMED_STEPS:
                per_step = max(now - timed_from, 1e-9) / TIMED_STEPS
                # 90 %: annealing steps also differentiate the regularizer, so cost a bit more
                schedule = min(iterations, step + int(0.9 * (deadline - now) / per_step))
        pick = torch.randint(len(inputs), (min(SAMPLES_PER_STEP, len(inputs)),),
                             generator=samples)
        x, target = inputs, targets
        if convolution:  # views: only the window of the picked samples is copied
            x, target = _window(layer, x, target, samples)
        x, target = x[pick], target[pick]
        h = _rectified_sigmoid(v)
        reconstruction = (layer_output(x, h) - target).pow(2).sum(1).mean()
        loss = reconstruction
        if step >= warm_up * schedule:
            progress = (step - warm_up * schedule) / max(1.0, (1 - warm_up) * schedule)
            beta = end + 0.5 * (start - end) * (1 + math.cos(math.pi * progress))
            loss = loss + regularization * (1 - (2 * h - 1).abs().pow(beta)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
    with torch.no_grad():
        integers = torch.clamp(floor + (v >= 0).float(), lowest, highest)
        _write_folded_weight(layer, integers * scale)
    return (integers + zero_point).to(torch.int64), reconstruction.item(), step


def _window(layer, padded_input, target, generator):
    """A random window of at most WINDOW x WINDOW outputs of ``target`` and the part of the
    padded input that the convolution reads for it."""
    span = []
    for axis, out_size in enumerate(target.shape[2:]):
        size = min(WINDOW, out_size)
        start = (int(torch.randint(out_size - size + 1, (), generator=generator))
                 if out_size > size else 0)
        stride, dilation, kernel = (layer.stride[axis], layer.dilation[axis],
                                    layer.kernel_size[axis])
        reads = (size - 1) * stride + dilation * (kernel - 1) + 1
        span.append((start, size, start * stride, reads))
    (oy, oh, iy, ih), (ox, ow, ix, iw) = span
    return (padded_input[:, :, iy:iy + ih, ix:ix + iw], target[:, :, oy:oy + oh, ox:ox + ow])


def _write_folded_weight(layer, folded):
    """Sets the layer's weight so that its folded weight is ``folded`` (to a few ulps, far inside
    the rounding interval); a channel whose BatchNorm scale is 0 folds to 0 whatever it holds."""
    if isinstance(layer, QATConvBn2d):
        bn_scale = batchnorm_scale(layer.bn).reshape(-1, 1, 1, 1)
        folded = torch.where(bn_scale == 0, layer.weight, folded / torch.where(bn_scale == 0, 1.0,
                                                                                bn_scale))
    layer.weight.copy_(folded)
