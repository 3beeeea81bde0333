"""Cross-layer equalization with bias absorption (Nagel et al. 2019, "Data-Free Quantization
Through Weight Equalization and Bias Correction", sections 4.1 and 4.2).

After BatchNorm folding, the output channels of a conv can differ in weight range by orders of
magnitude (depthwise convs most), and one scale per tensor, or coarse weights per channel, lose the
small channels. For conv1 -> ReLU -> conv2, ``ReLU(x / s) = ReLU(x) / s`` for s > 0, so dividing
conv1's output channel i by s_i and multiplying conv2's input channel i by s_i computes the same
function; s_i = sqrt(r1_i r2_i) / r2_i gives both channels the range sqrt(r1_i r2_i).
"""
import copy
import warnings

import torch
from torch import nn

from ..graph.capture import capture, replace_submodule
from ..graph.functional import normalize
from ..modules.conv import fold_batchnorm
from ..modules.shape import INFERENCE_IDENTITIES

WEIGHT_LAYERS = (nn.Conv2d, nn.Linear)


class EqualizationWarning(UserWarning):
    """The equalized model's output moved on the example inputs more than equalization should
    move it (a ReLU6 that clipped, pre-activations below the 3-sigma range of bias absorption)."""


def equalize(model, example_inputs, relu6_to_relu=True, bias_absorption=True, max_rounds=20,
             tolerance=1e-2):
    """An equalized float copy of ``model``: BatchNorms folded, weight ranges balanced across
    every conv -> [ReLU | ReLU6 | PReLU | LeakyReLU | max pool ...] -> conv (or linear -> linear)
    pair, and, with
    ``bias_absorption``, part of the bias that ReLU passes unchanged moved to the next layer.

    Args:
        model: a float ``nn.Module`` (copied, not changed); BatchNorm folds with its running
            statistics, as in eval mode.
        example_inputs: an input batch (tensor or tuple) on which the copy's output is compared
            with the model's; a relative change above 1e-3 warns (:class:`EqualizationWarning`).
        relu6_to_relu: ReLU6 does not commute with scaling, so it becomes ReLU wherever it sits
            between a pair (as in the paper and AIMET); ``False`` keeps it and skips those pairs.
        bias_absorption: move c = max(0, beta - 3 |gamma|) of each folded BatchNorm from conv1's
            bias to conv2's, where ReLU sits between them and conv2 has no zero padding (the move
            is exact for pre-activations above c, and padding would read zeros where it expects
            -c).
        max_rounds, tolerance: rescale every pair in turn, up to ``max_rounds`` times, until no
            scale of a round moves by more than ``tolerance`` (relative).
    Returns:
        a :class:`torch.fx.GraphModule` in eval mode, ready for :func:`qtk.prepare_ptq`.
    """
    example_inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    graph_module = normalize(capture(copy.deepcopy(model).eval()))
    with torch.no_grad():
        batchnorm_moments = _fold_batchnorms(graph_module)
        pairs = _pairs(graph_module, relu6_to_relu)
        output_scales = _equalize_pairs(pairs, max_rounds, tolerance)
        if bias_absorption:
            for first, activation, second in pairs:
                if activation == "relu" and first in batchnorm_moments:
                    mean, std = batchnorm_moments[first]
                    _absorb_bias(first, second, mean / output_scales[first],
                                 std / output_scales[first])
    graph_module.delete_all_unused_submodules()
    graph_module.eval()
    _check_output(model, graph_module, example_inputs)
    return graph_module


def _called_once(graph_module):
    """{module: node} of the modules that exactly one node calls (a shared module's weights
    cannot be rescaled for one call alone)."""
    calls = {}
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            calls.setdefault(graph_module.get_submodule(node.target), []).append(node)
    return {module: nodes[0] for module, nodes in calls.items() if len(nodes) == 1}


def _single_reader(node):
    users = list(node.users)
    return users[0] if len(users) == 1 and users[0].args[:1] == (node,) else None


def _module_at(graph_module, node, types):
    if node is None or node.op != "call_module":
        return None
    module = graph_module.get_submodule(node.target)
    return module if isinstance(module, types) else None


def _fold_batchnorms(graph_module):
    """Folds each BatchNorm2d that is the only reader of a Conv2d into it and drops it from the
    graph. Returns {conv: (beta, |gamma|)}: the per-channel mean and standard deviation of the
    conv's folded output, as the BatchNorm made it, for bias absorption."""
    once = _called_once(graph_module)
    moments = {}
    for node in list(graph_module.graph.nodes):
        conv = _module_at(graph_module, node, nn.Conv2d)
        reader = _single_reader(node)
        bn = _module_at(graph_module, reader, nn.BatchNorm2d)
        if conv is None or bn is None or once.get(conv) is not node or once.get(bn) is not reader \
                or bn.running_var is None:
            continue
        bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        weight, bias = fold_batchnorm(conv.weight, bias, bn)
        conv.weight, conv.bias = nn.Parameter(weight), nn.Parameter(bias)
        gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_var)
        beta = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
        moments[conv] = (beta.detach().clone(), gamma.detach().abs())
        reader.replace_all_uses_with(node)
        graph_module.graph.erase_node(reader)
    graph_module.recompile()
    return moments


def _skip_identities(graph_module, node):
    while _module_at(graph_module, node, INFERENCE_IDENTITIES) is not None:
        node = _single_reader(node)
    return node


# Between a pair, layers that commute with a positive per-channel scale s: f(x / s) = f(x) / s.
# ReLU6 does not (its clip point would move) and is handled apart.
SCALE_COMMUTING = (nn.ReLU, nn.PReLU, nn.LeakyReLU, nn.MaxPool2d)


def _pairs(graph_module, relu6_to_relu):
    """[(first, activation, second)]: layers where ``first``'s output reaches only ``second``'s
    input, through layers that commute with positive per-channel scaling (ReLU, PReLU, LeakyReLU,
    max pooling), ReLU6 (made ReLU) and inference identities (Dropout). ``activation`` is "relu"
    where the path is a ReLU alone (the case bias absorption handles), else None."""
    once = _called_once(graph_module)
    pairs = []
    for node in graph_module.graph.nodes:
        first = _module_at(graph_module, node, WEIGHT_LAYERS)
        if first is None or once.get(first) is not node:
            continue
        reader, between = _skip_identities(graph_module, _single_reader(node)), []
        while True:
            layer = _module_at(graph_module, reader, SCALE_COMMUTING + (nn.ReLU6,))
            if layer is None:
                break
            between.append((reader, layer))
            reader = _skip_identities(graph_module, _single_reader(reader))
        second = _module_at(graph_module, reader, WEIGHT_LAYERS)
        if (second is None or once.get(second) is not reader
                or isinstance(first, nn.Conv2d) != isinstance(second, nn.Conv2d)):
            continue
        relu6 = [(at, layer) for at, layer in between if isinstance(layer, nn.ReLU6)]
        # a ReLU6 called elsewhere too cannot become ReLU here alone
        if relu6 and (not relu6_to_relu or any(once.get(layer) is not at for at, layer in relu6)):
            continue
        for at, _ in relu6:
            replace_submodule(graph_module, at.target, nn.ReLU())
        kinds = [type(layer) for _, layer in between]
        pairs.append((first, "relu" if kinds in ([nn.ReLU], [nn.ReLU6]) else None, second))
    graph_module.recompile()
    return pairs


def _input_channel_rows(weight, groups):
    """A layer's weight [O, C / groups, ...] as [C, O / groups * ...]: row c holds every weight
    that reads input channel c (a linear weight [O, C] is the case groups = 1)."""
    out_channels, group_width = weight.shape[:2]
    return (weight.reshape(groups, out_channels // groups, group_width, -1).transpose(1, 2)
            .reshape(groups * group_width, -1))


def _scale_input_channels(layer, scale):
    groups = getattr(layer, "groups", 1)
    out_channels, group_width = layer.weight.shape[:2]
    scaled = layer.weight.reshape(groups, out_channels // groups, group_width, -1) \
        * scale.reshape(groups, 1, group_width, 1)
    layer.weight.copy_(scaled.reshape(layer.weight.shape))


def _equalize_pairs(pairs, max_rounds, tolerance):
    """Rescales each pair in turn until the scales settle (a depthwise conv between two pairs is
    rescaled from both sides). Returns {first: the product of its output channels' scales}."""
    output_scales = {first: first.weight.new_ones(first.weight.shape[0]) for first, _, _ in pairs}
    for _ in range(max_rounds):
        largest_move = 0.0
        for first, _, second in pairs:
            r1 = first.weight.abs().flatten(1).amax(1)
            r2 = _input_channel_rows(second.weight.abs(), getattr(second, "groups", 1)).amax(1)
            usable = (r1 > 0) & (r2 > 0)  # a dead channel keeps its weights
            scale = torch.where(usable, torch.sqrt(r1 * r2) / torch.where(usable, r2, 1.0), 1.0)
            first.weight.div_(scale.reshape([-1] + [1] * (first.weight.dim() - 1)))
            if first.bias is not None:
                first.bias.div_(scale)
            _scale_input_channels(second, scale)
            output_scales[first] *= scale
            largest_move = max(largest_move, float((scale - 1).abs().max()))
        if largest_move < tolerance:
            break
    return output_scales


def _absorb_bias(first, second, mean, std):
    """first.bias -= c, second.bias += (second's weights summed over the kernel) c, with
    c = max(0, mean - 3 std): ReLU(x - c) = ReLU(x) - c wherever x >= c."""
    shift = torch.clamp(mean - 3 * std, min=0)
    if isinstance(second, nn.Conv2d):
        if second.padding != "valid" and any(second.padding):
            return
        kernel_sums = second.weight.sum((2, 3), keepdim=True)
        moved = nn.functional.conv2d(shift.reshape(1, -1, 1, 1), kernel_sums,
                                     groups=second.groups).flatten()
    else:
        moved = second.weight @ shift
    first.bias.sub_(shift)
    if second.bias is None:
        second.bias = nn.Parameter(torch.zeros_like(moved))
    second.bias.add_(moved)


def _check_output(model, equalized, example_inputs):
    reference = copy.deepcopy(model).eval()
    with torch.no_grad():
        expected, actual = reference(*example_inputs), equalized(*example_inputs)
    if not isinstance(expected, torch.Tensor):
        return
    change = float((actual - expected).abs().max() / expected.abs().max().clamp(min=1e-12))
    if change > 1e-3:
        warnings.warn(f"equalization changed the model's output on the example inputs by "
                      f"{change:.2g} of its largest value: a ReLU6 that clipped became ReLU, or "
                      f"bias absorption met pre-activations below the 3-sigma range",
                      EqualizationWarning, stacklevel=2)
