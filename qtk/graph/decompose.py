"""Before capture: modules that qtk runs as several simpler ones are swapped for a traceable
equivalent (nn.MultiheadAttention, torchvision's Swin window attention and patch merging, Conv1d
as a Conv2d of height 1), so each step gets its own precision: the projections in int8, what has
no int8 form yet in float.

Swin's modules depend on the feature map's size (padding, whether the window shifts), so they are
decomposed only when prepare is given ``example_inputs``; the sizes are recorded on one run."""
import warnings

import torch
from torch import nn

from ..modules.attention import (DecomposedMultiheadAttention, DecomposedPatchMerging,
                                 DecomposedWindowAttention, decomposable)
from ..modules.conv import Conv1dAs2d
from .capture import replace_submodule

try:  # torchvision is optional
    from torchvision.models.swin_transformer import (PatchMerging, PatchMergingV2,
                                                     ShiftedWindowAttention,
                                                     ShiftedWindowAttentionV2)
    MERGING_TYPES = (PatchMerging, PatchMergingV2)
    SIZED_TYPES = (ShiftedWindowAttention, ShiftedWindowAttentionV2) + MERGING_TYPES
except ImportError:
    MERGING_TYPES = SIZED_TYPES = ()


def _input_sizes(model, example_inputs):
    """{module: (H, W)} of every sized module's [N, H, W, C] input, from one eval-mode run."""
    sizes, hooks = {}, []

    def record(module, inputs):
        sizes.setdefault(module, tuple(inputs[0].shape[1:3]))

    for module in model.modules():
        if type(module) in SIZED_TYPES:
            hooks.append(module.register_forward_pre_hook(record))
    if hooks:
        training = model.training
        with torch.no_grad():
            model.eval()(*example_inputs)
        model.train(training)
    for hook in hooks:
        hook.remove()
    return sizes


def _sized_form(module, size):
    """The decomposition of a sized module, or None where its size is not supported."""
    height, width = size
    if isinstance(module, MERGING_TYPES):
        if height % 2 or width % 2:
            return None  # torchvision pads odd maps: not decomposed yet
        return DecomposedPatchMerging(module, norm_last=isinstance(module, PatchMergingV2))
    return DecomposedWindowAttention(module, height, width)


class NeedsExampleInputsWarning(UserWarning):
    """A module's int8 decomposition depends on sizes that only ``example_inputs`` tell."""


def decompose(model, example_inputs=None):
    """Swap in place; a module that cannot be decomposed stays (and stays float)."""
    sizes = _input_sizes(model, example_inputs) if example_inputs is not None else {}
    sized = sorted({type(m).__name__ for m in model.modules() if type(m) in SIZED_TYPES})
    if sized and example_inputs is None:
        warnings.warn(f"{', '.join(sized)} can be quantized only when prepare is given "
                      f"example_inputs= (a batch of the input's shape), which tells their "
                      f"feature-map sizes; without it they stay float and the model will not "
                      f"export", NeedsExampleInputsWarning, stacklevel=4)
    for name, module in list(model.named_modules()):
        if not name:
            continue
        if isinstance(module, nn.MultiheadAttention) and decomposable(module) is None:
            replace_submodule(model, name, DecomposedMultiheadAttention(module))
        elif type(module) is nn.Conv1d and module.padding_mode == "zeros":
            replace_submodule(model, name, Conv1dAs2d(module))
        elif module in sizes:
            replacement = _sized_form(module, sizes[module])
            if replacement is not None:
                replace_submodule(model, name, replacement)
    return model
