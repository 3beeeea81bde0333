"""Linear trio: float fused container, QAT, Quantized."""
import torch
from torch import nn

from .. import arithmetic
from .base import (QATModule, QModelOp, QuantizedWeightLayer, activation_kind, apply_activation,
                   float_activation_attrs, float_export, refuse_own_input_quantizer)


class LinearReLU(nn.Sequential):
    """Linear followed by ReLU or ReLU6, quantized as one layer."""

    def __init__(self, linear, relu):
        super().__init__(linear, relu)


class QATLinear(nn.Linear, QATModule):
    """Linear (+ fused ReLU/ReLU6) with fake-quantized weight and output.

    Args:
        activation: None, 'relu' or 'relu6'.
        qconfig: the :class:`qtk.QConfig` giving the fake quantizers.
    """
    FLOAT_TYPES = (nn.Linear, LinearReLU)

    def __init__(self, in_features, out_features, bias=True, *, activation=None, qconfig):
        super().__init__(in_features, out_features, bias)
        refuse_own_input_quantizer(qconfig, "Linear")
        self.activation = activation
        self.weight_fake_quant = qconfig.weight()
        self.activation_post_process = qconfig.activation()

    @classmethod
    def from_float(cls, module, qconfig):
        linear, act = (module[0], module[1]) if isinstance(module, LinearReLU) else (module, None)
        qat = cls(linear.in_features, linear.out_features, linear.bias is not None,
                  activation=activation_kind(act), qconfig=qconfig)
        qat.weight = linear.weight
        if linear.bias is not None:
            qat.bias = linear.bias
        return qat.to(linear.weight.device)

    def activate(self, y):
        """The fused activation, if any."""
        return apply_activation(y, self.activation)

    def forward(self, x):
        y = nn.functional.linear(x, self.weight_fake_quant(self.weight), self.bias)
        return self.activation_post_process(self.activate(y))


class QuantizedLinear(QuantizedWeightLayer):
    """int8 linear layer on [N, ..., K] input, as torch's: K the last dimension, every other one
    rows (spec 4, 5)."""
    SOURCE_TYPES = (QATLinear,)

    @classmethod
    def from_module(cls, module, input_qparams, where=""):
        bias = None if module.bias is None else module.bias.detach()
        return cls(module.weight.detach(), bias, module.weight_fake_quant, input_qparams,
                   module.output_qparams(), module.activation, where)

    def forward(self, x):
        if x.dim() < 2 or x.shape[-1] != self.weight_q.shape[1]:
            raise ValueError(f"quantized Linear takes [N, ..., {self.weight_q.shape[1]}] input "
                             f"(features last), got shape {list(x.shape)}")
        acc = arithmetic.linear_accumulate(x, self.input_qparams[0].zero_point, self.weight_q,
                                           self.bias_q.to(torch.int64))
        return self._requantize(acc, (1, -1))

    def qmodel_op(self, input_shapes):
        return self._weight_op("linear", {})


# ---- float32 runtime ops (parts kept in float) ---------------------------------------------------

@float_export(nn.Linear, LinearReLU)
def float_linear(module, input_shapes, where):
    linear, act = (module[0], module[1]) if isinstance(module, nn.Sequential) else (module, None)
    bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
    return QModelOp("linear", [("weight", linear.weight.detach().float()),
                               ("bias", bias.detach().float())],
                    float_activation_attrs({}, activation_kind(act)))

