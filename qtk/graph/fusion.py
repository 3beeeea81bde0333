"""Fusion pass: conv-bn(-relu), conv-relu, linear-relu and add-relu become one module each (relu:
ReLU or ReLU6, and after a conv PReLU too).

Fusion runs before QAT starts, so training sees the layer that will be deployed (BatchNorm folded,
activation as the requantization clamp). A chain fuses only when each intermediate result has a
single user; otherwise it stays as it is. A BatchNorm that no conv feeds alone (DenseNet's, after
a concat) is a per-channel affine: it becomes a 1x1 depthwise conv of weight 1, frozen, with the
BatchNorm folded in, so it quantizes and deploys like any conv-bn (spec 4, no arithmetic of its
own).
"""
import torch
from torch import nn

from .. import modules
from .capture import replace_submodule

_ACTIVATIONS = (nn.ReLU, nn.ReLU6)
# A conv's output channels are dim 1, a PReLU's slopes' too: its PReLU fuses (one rounding instead
# of two, spec 22). A linear's features are the last dim, dim 1 only at rank 2: its PReLU stays.
_CONV_ACTIVATIONS = _ACTIVATIONS + (nn.PReLU,)


def _conv_bn_relu(conv_bn, relu):
    fused = modules.ConvBnReLU2d(*conv_bn, relu)
    fused.standalone_batchnorm = getattr(conv_bn, "standalone_batchnorm", False)
    return fused


def _add_relu(add, relu):
    return modules.AddReLU(six=isinstance(relu, nn.ReLU6))


# Longest patterns first: (module types along the chain, builder of the fused module).
PATTERNS = [
    ((nn.Conv2d, nn.BatchNorm2d, _CONV_ACTIVATIONS), modules.ConvBnReLU2d),
    ((nn.Conv2d, nn.BatchNorm2d), modules.ConvBn2d),
    ((nn.Conv2d, _CONV_ACTIVATIONS), modules.ConvReLU2d),
    ((modules.ConvBn2d, _CONV_ACTIVATIONS), _conv_bn_relu),
    ((nn.Linear, _ACTIVATIONS), modules.LinearReLU),
    ((modules.Add, _ACTIVATIONS), _add_relu),
]


def _is_call_of(graph_module, node, types):
    return (node.op == "call_module"
            and type(graph_module.get_submodule(node.target)) in (types if isinstance(types, tuple)
                                                                   else (types,)))


def _foldable(module):
    """A BatchNorm folds into a conv only with running statistics (not track_running_stats=False,
    which normalizes by each batch's statistics even at inference)."""
    return not isinstance(module, nn.BatchNorm2d) or module.running_var is not None


def _match(graph_module, node, pattern, call_counts):
    """The chain of nodes starting at ``node`` that matches ``pattern``, or None."""
    if not _is_call_of(graph_module, node, pattern[0]) or call_counts[node.target] != 1:
        return None
    chain = [node]
    for types in pattern[1:]:
        users = list(chain[-1].users)
        if len(users) != 1 or not _is_call_of(graph_module, users[0], types):
            return None
        if users[0].args != (chain[-1],) or users[0].kwargs:
            return None
        if not _foldable(graph_module.get_submodule(users[0].target)):
            return None
        chain.append(users[0])
    return chain


def _identity_depthwise_conv(bn):
    conv = nn.Conv2d(bn.num_features, bn.num_features, 1, groups=bn.num_features, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    conv.weight.requires_grad_(False)  # the float model has no such weight to train
    return conv.to(device=bn.running_mean.device, dtype=bn.running_mean.dtype)


def _standalone_batchnorms_as_convs(graph_module, call_counts):
    for node in graph_module.graph.nodes:
        if not _is_call_of(graph_module, node, nn.BatchNorm2d):
            continue
        if not _foldable(graph_module.get_submodule(node.target)):
            continue
        producer = node.args[0]
        if _match(graph_module, producer, (nn.Conv2d, nn.BatchNorm2d), call_counts):
            continue  # the conv-bn pattern folds it
        bn = graph_module.get_submodule(node.target)
        fused = modules.ConvBn2d(_identity_depthwise_conv(bn), bn)
        fused.standalone_batchnorm = True  # its qconfig by type is the BatchNorm's
        replace_submodule(graph_module, node.target, fused)


def fuse(graph_module):
    """Fuse every matching chain in place; returns the graph module."""
    call_counts = {}
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            call_counts[node.target] = call_counts.get(node.target, 0) + 1
    _standalone_batchnorms_as_convs(graph_module, call_counts)
    erased = set()
    for node in list(graph_module.graph.nodes):
        if node.op != "call_module" or node in erased:
            continue
        for pattern, build in PATTERNS:
            chain = _match(graph_module, node, pattern, call_counts)
            if chain is None:
                continue
            parts = [graph_module.get_submodule(n.target) for n in chain]
            replace_submodule(graph_module, node.target, build(*parts))
            chain[-1].replace_all_uses_with(node)
            for fused_away in reversed(chain[1:]):
                graph_module.graph.erase_node(fused_away)
                erased.add(fused_away)
            break
    graph_module.graph.lint()
    _delete_uncalled(graph_module, {n.target for n in erased})
    graph_module.recompile()
    return graph_module


def _delete_uncalled(graph_module, targets):
    """Drop fused-away modules (they now live inside the fused module) unless still called."""
    called = {n.target for n in graph_module.graph.nodes if n.op == "call_module"}
    for target in sorted(targets - called, key=len, reverse=True):
        graph_module.delete_submodule(target)
