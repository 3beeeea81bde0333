"""Where float becomes int8 and back: QuantStub / DequantStub trios."""
from torch import nn

from .. import arithmetic
from .base import QATModule, QuantizedModule, float_export, to_int8


class QuantStub(nn.Module):
    """Marks where a float tensor enters the quantized part of a model (identity in float)."""

    def forward(self, x):
        return x


class DequantStub(nn.Module):
    """Marks where an int8 tensor leaves the quantized part of a model (identity in float)."""

    def forward(self, x):
        return x


class QATQuantStub(QATModule):
    """Fake-quantizes the model input; its observer sets the input's scale and zero point."""
    FLOAT_TYPES = (QuantStub,)

    def forward(self, x):
        return self.activation_post_process(x)


class QATDequantStub(QATModule):
    FLOAT_TYPES = (DequantStub,)

    @classmethod
    def from_float(cls, module, qconfig):
        return cls()  # nothing to observe: the value keeps its producer's quantization

    def forward(self, x):
        return x


class QuantizedQuantStub(QuantizedModule):
    """float -> int8 with the quantize rule of spec 1 (the runtime does this at its input)."""
    SOURCE_TYPES = (QATQuantStub,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        return cls([], module.output_qparams())

    def forward(self, x):
        return to_int8(arithmetic.quantize(x, *self.output_qparams))


class QuantizedDequantStub(QuantizedModule):
    """int8 -> float (spec 1). With ``emit_int8`` set it returns the int8 values unchanged, which is
    what the runtime returns when asked for raw output (see :func:`qtk.int8_outputs`)."""
    SOURCE_TYPES = (QATDequantStub,)

    def __init__(self, input_qparams, output_qparams):
        super().__init__(input_qparams, output_qparams)
        self.emit_int8 = False

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        return cls(input_qparams, None)

    def forward(self, x):
        if self.emit_int8:
            return x
        return arithmetic.dequantize(x, self.input_qparams[0].scale,
                                     self.input_qparams[0].zero_point)


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(QuantStub, DequantStub)
def float_stub(module, input_shapes, where):
    return None  # a float model's own stubs are identities
