"""QAT-ready model definitions and training recipes.

``MODELS`` maps each zoo name to its family's builder with the family arguments filled in;
``create_model(name, **kwargs)`` passes ``num_classes``, ``in_channels``, ``width_mult`` and
``small_input`` on to it.
"""
from functools import partial

from .mobilenet_v2 import mobilenet_v2
from .resnet import resnet
from .shufflenet import shufflenet_v1, shufflenet_v2

MODELS = {
    "resnet18": partial(resnet, 18),
    "resnet50": partial(resnet, 50),
    "mobilenet_v2": mobilenet_v2,
    "shufflenet_v1": partial(shufflenet_v1, 3),
    "shufflenet_v2": shufflenet_v2,
}


def create_model(name, **kwargs):
    """Build the zoo model ``name`` (a key of :data:`MODELS`); keyword arguments go to its
    builder (``num_classes``, ``in_channels``, ``width_mult``, ``small_input``)."""
    if name not in MODELS:
        raise ValueError(f"unknown zoo model {name!r}; choose from {', '.join(MODELS)}")
    return MODELS[name](**kwargs)


__all__ = ["MODELS", "create_model", "resnet", "mobilenet_v2", "shufflenet_v1", "shufflenet_v2"]
