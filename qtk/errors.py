"""Errors every stage of the pipeline raises (the runtime's own is ``qtk.QtkError``)."""


class UnsupportedOpError(ValueError):
    """An op in the model has no quantized (or, kept in float, no runtime) form in this version
    of qtk."""
