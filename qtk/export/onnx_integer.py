"""The integer form of :func:`qtk.export_onnx`: qtk's arithmetic (docs/quantization_spec.md) in
ONNX integer ops, so that ONNX Runtime's output is byte-identical to qtk's.

Activations stay int8 tensors from op to op. Convolution and linear are ``ConvInteger`` and
``MatMulInteger`` (activations and weights as uint8 ``+ 128``, with their zero points ``+ 128``:
the exact int32 sums of spec 4 on every CPU), plus the int32 bias. Every requantization is
spec 2 in int64 with the multipliers and shifts qtk's export computed: ``Mul`` by ``M``, ``Add`` of
``2^(n-1)``, the flooring shift (below), ``Add`` of the zero point, ``Clip``, ``Cast`` to int8. Add
and concat are spec 3's rescaled sums, average pooling spec 6's integer window sums
(``ConvInteger`` with a kernel of ones per channel, ``ReduceSum``) and rounding division, softmax
spec 18's table and division; tables and nearest resize are the ``Gather`` the QDQ form uses too.
The graph input is quantized by spec 1 in float32 (``Mul`` by ``f32(1/s)``, ``Round`` half to
even).

Spec 2's ``>>`` floors a signed value; ONNX's ``BitShift`` shifts unsigned integers only and its
integer ``Div`` truncates toward zero. So the shift is done on ``v + 2^63`` in uint64 (reached by
``Cast``, which wraps int64 to uint64 modulo ``2^64`` in ONNX Runtime as in ONNX's reference
implementation) and the offset, shifted, is taken off after. Every ``Div`` here has a
non-negative dividend and a positive divisor, where truncation is the floor.
"""
import numpy as np

from .. import arithmetic
from ..errors import UnsupportedOpError
from ..modules.pooling import average_pool_divisors
from .onnx_graph import OnnxGraph


class IntegerGraph(OnnxGraph):
    """The integer form: every op reads and writes int8 tensors and computes in ONNX integer
    ops."""

    FORM = "integer"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.unsigned_of = {}  # int8 tensor -> its uint8 q + 128 (_unsigned)

    def _translate(self, node, handler):
        handler(node, [self._name(v) for v in self._activation_inputs(node)],
                [self._name(v) for v in node["outputs"]])

    def _i64(self, name, value):
        return self._const(name, np.asarray(value, np.int64))

    def _widened(self, int_name, where):
        """An integer tensor as int64, where the spec's sums and products are exact."""
        return self._step("Cast", [int_name], f"{where}.int64", to=self.TensorProto.INT64)

    def _centered(self, vid, name, where):
        """``q - z`` of int8 value ``vid`` (tensor ``name``) in int64."""
        z = self._qparams(vid).zero_point
        return self._step("Sub", [self._widened(name, where), self._i64(f"{where}.z", z)],
                          f"{where}.centered")

    # ---- spec 1 and 2: quantize, requantize -----------------------------------------------------

    def _quantize_float(self, float_name, vid):
        """Spec 1: ``clamp(nearbyint(f32(x * f32(1/s))), qmin - z, qmax - z) + z``, NaN as 0."""
        qparams = self._qparams(vid)
        s, z, out = qparams.scale, qparams.zero_point, self._name(vid)
        inverse = self._const(f"{out}.inverse_scale",
                              arithmetic.inverse_scale(s).numpy().astype(np.float32))
        scaled = self._step("Round", [self._step("Mul", [float_name, inverse], f"{out}.scaled")],
                            f"{out}.rounded")
        is_nan = self._step("IsNaN", [scaled], f"{out}.is_nan")
        zero = self._const(f"{out}.zero", np.float32(0))
        finite = self._step("Where", [is_nan, zero, scaled], f"{out}.not_nan")
        low = self._const(f"{out}.lo", np.float32(qparams.qmin - z))
        high = self._const(f"{out}.hi", np.float32(qparams.qmax - z))
        clipped = self._step("Clip", [finite, low, high], f"{out}.clipped")
        wide = self._step("Cast", [clipped], f"{out}.int32", to=self.TensorProto.INT32)
        biased = self._step("Add", [wide, self._const(f"{out}.z", np.int32(z))], f"{out}.biased")
        self._step("Cast", [biased], out, to=self.TensorProto.INT8)

    def _op_quantize(self, node, inputs, outputs):
        self._quantize_float(inputs[0], node["outputs"][0])

    def _requantize(self, node, acc, multiplier, shift, out, lo=-128, hi=127, shape=()):
        """Spec 2 of int64 ``acc`` into int8 ``out``; ``multiplier``, ``shift`` per element of
        ``shape`` (which broadcasts against ``acc``)."""
        product = self._step("Mul", [acc, self._i64(f"{out}.M", np.reshape(multiplier, shape))],
                             f"{out}.product")
        self._rounding_shift_to_int8(node, product, shift, out, lo, hi, shape)

    def _rounding_shift_to_int8(self, node, value, shift, out, lo, hi, shape=()):
        """``clamp(((v + 2^(n-1)) >> n) + z_y, lo, hi)`` as int8 ``out``, ``n`` per element of
        ``shape``; ``[lo, hi]`` narrowed to the output's range. ``>>`` floors and ONNX's
        ``BitShift`` takes unsigned integers only, so ``v + 2^(n-1)`` (below ``2^63`` in
        magnitude: spec 2) is moved into uint64 with ``2^63`` added, shifted, and the shifted
        offset ``2^(63-n)`` taken off again in int64: exact, as ``2^63`` is a multiple of
        ``2^n``."""
        qparams = self._qparams(node["outputs"][0])
        shift = np.reshape(np.asarray(shift, np.int64), shape)
        offset = np.left_shift(1, shift - 1).astype(np.uint64) + np.uint64(1 << 63)
        unsigned = self._step("Cast", [value], f"{out}.uint64", to=self.TensorProto.UINT64)
        offset_added = self._step("Add", [unsigned, self._const(f"{out}.offset", offset)],
                                  f"{out}.offset_added")  # uint64 sums wrap, as the Cast did
        shifted = self._step("BitShift", [offset_added,
                                          self._const(f"{out}.n", shift.astype(np.uint64))],
                             f"{out}.shifted", direction="RIGHT")
        signed = self._step("Cast", [shifted], f"{out}.shifted.int64", to=self.TensorProto.INT64)
        floored = self._step("Sub", [signed, self._i64(f"{out}.2^(63-n)",
                                                       np.left_shift(1, 63 - shift))],
                             f"{out}.floored")
        self._to_int8(floored, qparams, out, lo, hi)

    def _to_int8(self, value, qparams, out, lo=-128, hi=127):
        """``clamp(v + z, lo, hi)`` of int64 ``value`` as int8 ``out``."""
        lo, hi = max(lo, qparams.qmin), min(hi, qparams.qmax)
        biased = self._step("Add", [value, self._i64(f"{out}.z_y", qparams.zero_point)],
                            f"{out}.biased")
        clipped = self._step("Clip", [biased, self._i64(f"{out}.lo", lo),
                                      self._i64(f"{out}.hi", hi)], f"{out}.clipped")
        self._step("Cast", [clipped], out, to=self.TensorProto.INT8)

    # ---- spec 4: convolution and linear ---------------------------------------------------------

    def _unsigned(self, x):
        """uint8 ``q + 128`` of int8 tensor ``x`` (``Cast`` to int32, ``Add``, ``Cast``), made
        once per tensor."""
        if x not in self.unsigned_of:
            widened = self._step("Cast", [x], f"{x}.u8.int32", to=self.TensorProto.INT32)
            shifted = self._step("Add", [widened, self._const(f"{x}.u8.128", np.int32(128))],
                                 f"{x}.u8.plus128")
            self.unsigned_of[x] = self._step("Cast", [shifted], f"{x}.u8",
                                             to=self.TensorProto.UINT8)
        return self.unsigned_of[x]

    def _products(self, op, node, x, weight, out, **attrs):
        """``ConvInteger`` or ``MatMulInteger``: the exact int32 sums of ``(q - z_x) w`` for int8
        ``x`` and int8 ``weight``, both operands uint8 ``+ 128`` with their zero points ``+ 128``
        (the same products). ONNX Runtime's CPU kernels multiply uint8 by uint8 exactly on every
        CPU; an int8 operand takes its uint8 x int8 kernels, which on x86 without VNNI add pairs
        of products in int16 with saturation (``vpmaddubsw``: 255 * 128 * 2 > 32767), and with
        int8 weights ran about 16 times slower (its ConvInteger, 64 channels at 56x56)."""
        z_x = self._qparams(node["inputs"][0]).zero_point
        shifted = (np.asarray(weight, np.int16) + 128).astype(np.uint8)
        return self._step(op, [self._unsigned(x), self._const(f"{out}.weight", shifted),
                               self._const(f"{out}.z_x", np.uint8(z_x + 128)),
                               self._const(f"{out}.z_w", np.uint8(128))],
                          f"{out}.products", **attrs)

    def _layer_sum(self, op, node, inputs, weight, out, **attrs):
        """The layer's products plus its int32 bias, widened to int64 for the requantization."""
        products = self._products(op, node, inputs[0], weight, out, **attrs)
        bias = self._constant_input(node, 2).astype(np.int32)
        bias_shape = (-1, 1, 1) if op == "ConvInteger" else (-1,)
        acc = self._step("Add", [products, self._const(f"{out}.bias", bias.reshape(bias_shape))],
                         f"{out}.acc")
        return self._widened(acc, out)

    def _op_conv2d(self, node, inputs, outputs):
        a, out = node["attrs"], outputs[0]
        if "layout" in a or len(node["inputs"]) != 3:
            raise UnsupportedOpError(f"{node['name']}: a fused or channels-last conv2d")
        ph, pw = a["padding"]
        acc = self._layer_sum("ConvInteger", node, inputs,
                              self._constant_input(node, 1).astype(np.int8), out,
                              strides=a["stride"], pads=[ph, pw, ph, pw],
                              dilations=a["dilation"], group=a["groups"][0])
        if "negative_multiplier" not in a:
            self._requantize(node, acc, a["multiplier"], a["shift"], out, *a["clamp"],
                             shape=(-1, 1, 1))
            return
        # spec 22 fused: both sides requantized, each sum takes its sign's
        for side, prefix in ((f"{out}.above", ""), (f"{out}.below", "negative_")):
            self._requantize(node, acc, a[prefix + "multiplier"], a[prefix + "shift"], side,
                             *a["clamp"], shape=(-1, 1, 1))
        at_or_above = self._step("GreaterOrEqual", [acc, self._i64(f"{out}.zero", 0)],
                                 f"{out}.at_or_above")
        self._step("Where", [at_or_above, f"{out}.above", f"{out}.below"], out)

    def _op_linear(self, node, inputs, outputs):
        a, out = node["attrs"], outputs[0]
        weight_t = self._constant_input(node, 1).astype(np.int8).T  # [K, O] for x @ W^T
        acc = self._layer_sum("MatMulInteger", node, inputs, weight_t, out)
        self._requantize(node, acc, a["multiplier"], a["shift"], out, *a["clamp"], shape=(-1,))

    # ---- spec 3, 9, 21: sums and products of activations and constants --------------------------

    def _op_add(self, node, inputs, outputs):
        """Spec 3: ``sum (q_i - z_i) M_i``, one shared rounding shift."""
        a, out = node["attrs"], outputs[0]
        terms = [self._step("Mul", [self._centered(vid, name, f"{out}.{i}"),
                                    self._i64(f"{out}.{i}.M", m)], f"{out}.{i}.term")
                 for i, (vid, name, m) in enumerate(zip(node["inputs"], inputs, a["multiplier"]))]
        total = self._step("Add", terms, f"{out}.sum")
        self._rounding_shift_to_int8(node, total, a["shift"][0], out, *a["clamp"])

    def _op_concat(self, node, inputs, outputs):
        """Spec 3 with one input per sum: each input rescaled on its own, then concatenated."""
        a, out = node["attrs"], outputs[0]
        parts = []
        for i, (vid, name) in enumerate(zip(node["inputs"], inputs)):
            part = f"{out}.{i}.rescaled"
            self._requantize(node, self._centered(vid, name, f"{out}.{i}"), a["multiplier"][i],
                             a["shift"][i], part)
            parts.append(part)
        self._step("Concat", parts, out, axis=a["axis"][0])

    def _op_mul(self, node, inputs, outputs):
        """Spec 9: ``requantize((a - z_a) (b - z_b))``, broadcast."""
        a, out = node["attrs"], outputs[0]
        centered = [self._centered(vid, name, f"{out}.{i}")
                    for i, (vid, name) in enumerate(zip(node["inputs"], inputs))]
        product = self._step("Mul", centered, f"{out}.acc")
        self._requantize(node, product, a["multiplier"][0], a["shift"][0], out, *a["clamp"])

    def _op_mul_constant(self, node, inputs, outputs):
        """Spec 21: ``requantize(q - z, M_e, n_e)``, a signed ``M_e`` per element of ``c``."""
        out = outputs[0]
        multiplier, shift = self._constant_input(node, 1), self._constant_input(node, 2)
        x = self._centered(node["inputs"][0], inputs[0], out)
        self._requantize(node, x, multiplier, shift, out, *node["attrs"]["clamp"],
                         shape=multiplier.shape)

    def _op_add_constant(self, node, inputs, outputs):
        """Spec 21: ``requantize(+-(q - z) 2^k + B_e, M, n)``."""
        a, out = node["attrs"], outputs[0]
        scale = -(1 << a["input_shift"][0]) if a["negate"][0] else 1 << a["input_shift"][0]
        scaled = self._step("Mul", [self._centered(node["inputs"][0], inputs[0], out),
                                    self._i64(f"{out}.2^k", scale)], f"{out}.scaled")
        bias = self._constant_input(node, 1).astype(np.int64)
        acc = self._step("Add", [scaled, self._i64(f"{out}.B", bias)], f"{out}.acc")
        self._requantize(node, acc, a["multiplier"][0], a["shift"][0], out, *a["clamp"])

    def _op_clamp(self, node, inputs, outputs):
        """Spec 5, 11, 16: a clamp of the int8 values."""
        qparams, (lo, hi) = self._qparams(node["outputs"][0]), node["attrs"]["clamp"]
        lo, hi = max(lo, qparams.qmin), min(hi, qparams.qmax)
        out = outputs[0]
        self._step("Clip", [inputs[0], self._const(f"{out}.lo", np.int8(lo)),
                            self._const(f"{out}.hi", np.int8(hi))], out)

    # ---- spec 6: average pooling ----------------------------------------------------------------

    def _rounded_average(self, node, total, divisor, out):
        """Spec 6: ``z + sign(S) floor((2|S| + d) / (2d))`` as int8 ``out``, ``S`` int64."""
        divisor = np.asarray(divisor, np.int64)
        doubled = self._step("Mul", [self._step("Abs", [total], f"{out}.abs"),
                                     self._i64(f"{out}.2", 2)], f"{out}.doubled")
        numerator = self._step("Add", [doubled, self._i64(f"{out}.d", divisor)],
                               f"{out}.numerator")
        magnitude = self._step("Div", [numerator, self._i64(f"{out}.2d", 2 * divisor)],
                               f"{out}.magnitude")
        signed = self._step("Mul", [self._step("Sign", [total], f"{out}.sign"), magnitude],
                            f"{out}.average")
        self._to_int8(signed, self._qparams(node["outputs"][0]), out)

    def _op_avg_pool2d(self, node, inputs, outputs):
        """Window sums of ``q - z`` by ``ConvInteger`` with a kernel of ones per channel (padding
        reads the zero point, which adds nothing), then spec 6's division by each window's
        divisor. Ceil mode's last windows reach past the padding: extra padding there adds
        nothing either, and the divisors count what the spec counts."""
        a, out = node["attrs"], outputs[0]
        _, channels, height, width = self._shape(node["inputs"][0])
        out_h, out_w = self._shape(node["outputs"][0])[2:]
        (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]
        extra_h = max(0, (out_h - 1) * sh + kh - (height + 2 * ph))
        extra_w = max(0, (out_w - 1) * sw + kw - (width + 2 * pw))
        sums = self._products("ConvInteger", node, inputs[0], np.ones((channels, 1, kh, kw)), out,
                              strides=a["stride"], group=channels,
                              pads=[ph, pw, ph + extra_h, pw + extra_w])
        divisors = average_pool_divisors(height, width, a["kernel"], a["stride"], a["padding"],
                                         bool(a["count_include_pad"][0]),
                                         bool(a.get("ceil_mode", [0])[0]),
                                         a.get("divisor_override", [None])[0])
        self._rounded_average(node, self._widened(sums, out), np.asarray(divisors), out)

    def _op_global_avg_pool2d(self, node, inputs, outputs):
        out, (height, width) = outputs[0], self._shape(node["inputs"][0])[2:]
        total = self._step("ReduceSum", [self._centered(node["inputs"][0], inputs[0], out),
                                         self._i64(f"{out}.axes", [2, 3])], f"{out}.sum",
                           keepdims=node["attrs"].get("keepdim", [1])[0])
        self._rounded_average(node, total, height * width, out)

    # ---- spec 18: softmax -----------------------------------------------------------------------

    def _op_softmax(self, node, inputs, outputs):
        """Spec 18: ``T[max(q) - q]``, its row sum ``S``, and
        ``z_y + floor((2 T A + S 2^16) / (S 2^17))`` (non-negative: ``Div`` is that floor)."""
        a, out = node["attrs"], outputs[0]
        axis = a["axis"][0]
        row_max = self._step("ReduceMax", [inputs[0]], f"{out}.max", axes=[axis], keepdims=1)
        distance = self._step("Sub", [self._widened(row_max, f"{out}.max"),
                                      self._widened(inputs[0], out)], f"{out}.distance")
        table = self._const(f"{out}.table", self._constant_input(node, 1).astype(np.int64))
        terms = self._step("Gather", [table, distance], f"{out}.terms", axis=0)
        total = self._step("ReduceSum", [terms, self._i64(f"{out}.axes", [axis])],
                           f"{out}.total", keepdims=1)
        scaled = self._step("Mul", [terms, self._i64(f"{out}.2A", 2 * a["multiplier"][0])],
                            f"{out}.scaled")
        half = self._step("Mul", [total, self._i64(f"{out}.2^16", 1 << 16)], f"{out}.half")
        numerator = self._step("Add", [scaled, half], f"{out}.numerator")
        denominator = self._step("Mul", [total, self._i64(f"{out}.2^17", 1 << 17)],
                                 f"{out}.denominator")
        quotient = self._step("Div", [numerator, denominator], f"{out}.quotient")
        self._to_int8(quotient, self._qparams(node["outputs"][0]), out, *a["clamp"])
