"""The QDQ form of :func:`qtk.export_onnx`: a Quantized model as an ONNX QDQ graph, the form other
ONNX tools and accelerators understand.

Every int8 activation is an int8 tensor made by ``QuantizeLinear`` with its ``(s, z)`` (a scale
per channel, ``axis=1``, where it is quantized per channel: spec 25); each op
reads its inputs through ``DequantizeLinear`` and computes in float (``Conv``, ``Gemm``, ``Add``,
...), weights are int8 initializers dequantized per output channel (``axis=0``, zero point 0),
biases int32 initializers dequantized with scale ``s_x * s_w[c]`` (``s_y`` for a channel whose int8
weights are all zero: spec 4), and fused ReLU/ReLU6 clamps are ``Relu``/``Clip`` before the
``QuantizeLinear``. A table function (``lut``) and nearest resize are ``Gather`` of exact integers.

ONNX Runtime fuses these patterns into its QLinear kernels, which requantize with float scales
and round half to even; qtk's spec uses an integer multiplier and a shift, rounding half up. The
two agree within one step per op (docs/onnx.md measures how often they differ, and how far apart
a network ends up); the integer form (:mod:`.onnx_integer`) is byte-identical instead.
"""
import numpy as np
import torch

from ..errors import UnsupportedOpError
from .onnx_graph import OnnxGraph


class QdqGraph(OnnxGraph):
    """The QDQ form: each op reads ``DequantizeLinear`` of its int8 inputs, computes in float and
    ends in ``QuantizeLinear``; padding and tables work on the int8 values (exact)."""

    FORM = "QDQ"

    def _translate(self, node, handler):
        """Float in, float out, then ``QuantizeLinear`` with the node's clamp; a handler that makes
        no node of its own (``clamp``, ``quantize``) returns its input instead."""
        op, outputs = node["op"], node["outputs"]
        if op in self.INT8_OPS:
            handler(node, [self._name(v) for v in self._activation_inputs(node)],
                    [self._name(v) for v in outputs])
            return
        float_out = self._float_out(node)
        names = [f"{float_out}.{i}" for i in range(len(outputs))] if op == "split" else [float_out]
        produced = handler(node, [self._dequantized(v) for v in self._activation_inputs(node)],
                           names) or names
        lo, hi = node["attrs"].get("clamp", [-128, 127])
        for name, vid in zip(produced, outputs):
            self._quantize(name, vid, lo, hi)

    def _float_out(self, node):
        # ":" is in no value name, so a float tensor never takes an int8 value's name
        return f"{node['name']}:{node['op']}#{node['outputs'][0]}"

    # ---- quantize -------------------------------------------------------------------------------

    def _quantize_float(self, float_name, vid):
        self._quantize(float_name, vid, -128, 127)

    def _quantize(self, float_name, vid, lo, hi):
        """QuantizeLinear of ``float_name`` into value ``vid``, clamped to [lo, hi] in int8 steps
        first (quantize is monotonic, so a float clip at the dequantized bounds is that clamp)."""
        qparams = self._qparams(vid)
        lo, hi = max(lo, qparams.qmin), min(hi, qparams.qmax)
        z = qparams.zero_point
        where = self._name(vid)
        if (lo, hi) != (-128, 127):
            clipped = f"{where}.clip"
            if hi == 127 and lo == z:
                self._step("Relu", [float_name], clipped)
            elif qparams.per_channel:  # spec 25: bounds per channel, which Clip cannot take
                s = np.array(qparams.scale, np.float32).reshape(
                    [1, -1] + [1] * (len(self._shape(vid)) - 2))
                low = self._const(f"{where}.lo", s * np.float32(lo - z) if lo > -128 else
                                  np.full(s.shape, -np.inf, np.float32))
                high = self._const(f"{where}.hi", s * np.float32(hi - z) if hi < 127 else
                                   np.full(s.shape, np.inf, np.float32))
                above = self._step("Max", [float_name, low], f"{where}.above_lo")
                self._step("Min", [above, high], clipped)
            else:
                s = qparams.scale
                low = self._const(f"{where}.lo", np.float32(s * (lo - z)) if lo > -128 else
                                  np.float32(-np.inf))
                high = self._const(f"{where}.hi", np.float32(s * (hi - z)) if hi < 127 else
                                   np.float32(np.inf))
                self._step("Clip", [float_name, low, high], clipped)
            float_name = clipped
        self._step("QuantizeLinear", [float_name, *self._scale_zp(qparams, where)], where,
                   **self._axis(qparams))

    # ---- ops that compute in float --------------------------------------------------------------

    def _weight_and_bias(self, node):
        """DequantizeLinear of the int8 weight (per output channel) and of the int32 bias."""
        layer = self.model.get_submodule(node["name"])
        weight, bias = self._constant_input(node, 1), self._constant_input(node, 2)
        s_w = layer.weight_scale.to(torch.float32).numpy()
        s_b = layer.bias_scale.to(torch.float32).numpy()
        name = node["name"]
        w_float, b_float = f"{name}.weight.dq", f"{name}.bias.dq"
        for tensor, scale, zero_point, out in (
                (weight, s_w, np.zeros(len(s_w), np.int8), w_float),
                (bias, s_b, np.zeros(len(s_b), np.int32), b_float)):
            self._step("DequantizeLinear", [self._const(out, tensor),
                                            self._const(f"{out}.scale", scale),
                                            self._const(f"{out}.zero_point", zero_point)],
                       out, axis=0)
        return w_float, b_float

    def _op_quantize(self, node, inputs, outputs):
        return inputs  # the QuantizeLinear after it is the op

    def _op_clamp(self, node, inputs, outputs):
        return inputs  # the clamp attribute becomes the Clip/Relu before QuantizeLinear

    def _op_conv2d(self, node, inputs, outputs):
        a = node["attrs"]
        if "layout" in a or len(node["inputs"]) != 3:
            raise UnsupportedOpError(f"{node['name']}: a fused or channels-last conv2d")
        w, b = self._weight_and_bias(node)
        ph, pw = a["padding"]
        prelu = "negative_multiplier" in a
        conv = self._step("Conv", [inputs[0], w, b], f"{outputs[0]}.conv" if prelu else outputs[0],
                          strides=a["stride"], pads=[ph, pw, ph, pw], dilations=a["dilation"],
                          group=a["groups"][0])
        if prelu:  # spec 22 fused: each channel's slope is its two multipliers' ratio
            def real(multiplier, shift):
                return np.ldexp(np.asarray(multiplier, np.float64), -np.asarray(shift))
            slopes = (real(a["negative_multiplier"], a["negative_shift"])
                      / real(a["multiplier"], a["shift"]))
            self._step("PRelu", [conv, self._const(f"{outputs[0]}.slopes",
                                                   slopes.astype(np.float32).reshape(-1, 1, 1))],
                       outputs[0])

    def _op_linear(self, node, inputs, outputs):
        w, b = self._weight_and_bias(node)
        out = outputs[0]
        if len(self._shape(node["inputs"][0])) == 2:
            self._step("Gemm", [inputs[0], w, b], out, transB=1)
            return
        wt = self._step("Transpose", [w], f"{out}.wT", perm=[1, 0])
        product = self._step("MatMul", [inputs[0], wt], f"{out}.matmul")
        self._step("Add", [product, b], out)

    def _op_add(self, node, inputs, outputs):
        self._step("Add", inputs, outputs[0])

    def _op_mul(self, node, inputs, outputs):
        self._step("Mul", inputs, outputs[0])

    def _op_concat(self, node, inputs, outputs):
        self._step("Concat", inputs, outputs[0], axis=node["attrs"]["axis"][0])

    def _op_mul_constant(self, node, inputs, outputs):
        """``x * c``: spec 21's signed ``(M_e, n_e)`` of ``s_x c_e / s_y`` gives back
        ``c_e = M_e 2^-n_e s_y / s_x`` (within 2^-31 relative), a float Mul."""
        multiplier = self._constant_input(node, 1).astype(np.float64)
        shift = self._constant_input(node, 2).astype(np.float64)
        s_x = self._qparams(node["inputs"][0]).scale
        s_y = self._qparams(node["outputs"][0]).scale
        c = (multiplier * np.exp2(-shift) * s_y / s_x).astype(np.float32)
        self._step("Mul", [inputs[0], self._const(f"{node['name']}.c", c)], outputs[0])

    def _op_add_constant(self, node, inputs, outputs):
        """``+-x + c``: spec 21's ``B_e = round(c_e 2^k / s_x)`` gives back ``c_e = B_e s_x 2^-k``
        (the constant qtk adds, within 2^-(k+1) input steps), a float Add."""
        a = node["attrs"]
        s_x = self._qparams(node["inputs"][0]).scale
        c = (self._constant_input(node, 1).astype(np.float64) * s_x
             * 2.0 ** -a["input_shift"][0]).astype(np.float32)
        x = inputs[0]
        if a["negate"][0]:
            x = self._step("Neg", [inputs[0]], f"{outputs[0]}.neg")
        self._step("Add", [x, self._const(f"{node['name']}.c", c)], outputs[0])

    def _op_softmax(self, node, inputs, outputs):
        self._step("Softmax", inputs, outputs[0], axis=node["attrs"]["axis"][0])

    def _op_avg_pool2d(self, node, inputs, outputs):
        a = node["attrs"]
        if "divisor_override" in a:
            raise UnsupportedOpError(f"{node['name']}: avg_pool2d with divisor_override has no "
                                     f"ONNX AveragePool form; deploy it with qtk.export")
        self._step("AveragePool", inputs, outputs[0],
                   count_include_pad=a["count_include_pad"][0], **self._pool_attrs(a))

    def _op_global_avg_pool2d(self, node, inputs, outputs):
        out = outputs[0]
        if node["attrs"].get("keepdim", [1])[0]:
            self._step("GlobalAveragePool", inputs, out)
            return
        pooled = self._step("GlobalAveragePool", inputs, f"{out}.keepdim")
        self._step("Flatten", [pooled], out, axis=1)
