"""qtk.export_onnx: a Quantized model as an ONNX QDQ graph, for ONNX Runtime and other ONNX tools.

The graph is the ``.qmodel`` export translated node by node (the same capture, fusion and shape
handling as :func:`qtk.export`): every int8 activation is an int8 tensor made by
``QuantizeLinear`` with its ``(s, z)``; each op reads its inputs through ``DequantizeLinear`` and
computes in float (``Conv``, ``Gemm``, ``Add``, ...), weights are int8 initializers dequantized per
output channel (``axis=0``, zero point 0), biases int32 initializers dequantized with scale
``s_x * s_w[c]`` (``s_y`` for a channel whose int8 weights are all zero: spec 4), and fused
ReLU/ReLU6 clamps are ``Relu``/``Clip`` before the ``QuantizeLinear``. A table function (``lut``)
and nearest resize are ``Gather`` of exact integers. The graph ends in ``QuantizeLinear``: its
outputs are the int8 values the qtk runtime returns with ``output="int8"``.

ONNX Runtime fuses these patterns into its QLinear kernels, which requantize with float scales
and round half to even; qtk's spec uses an integer multiplier and a shift, rounding half up. The
two agree within one step (docs/onnx.md measures how often they differ).
"""
import numpy as np
import torch

from .. import modules
from ..errors import UnsupportedOpError
from .exporter import _as_tuple, _graph_to_export, build_writer

OPSET = 17

_NUMPY = {torch.int8: np.int8, torch.int32: np.int32, torch.float32: np.float32}


def export_onnx(model, example_inputs, path=None, dynamic_batch=True):
    """Write a Quantized model (from :func:`qtk.convert`) as an ONNX QDQ model.

    Args:
        model: the converted model; every op must be int8 (a part kept in float is refused).
        example_inputs: a float tensor (or tuple of them) of the input shape.
        path: file to write; when ``None`` only the ``onnx.ModelProto`` is returned.
        dynamic_batch: make dim 0 of inputs and outputs a symbolic batch size.
    Returns:
        the ``onnx.ModelProto``. Its outputs are int8 (the last op is ``QuantizeLinear``).
    Raises:
        UnsupportedOpError: for an op with no ONNX mapping here, naming it and the way out.
    """
    import onnx

    if not any(isinstance(m, modules.QuantizedModule) for m in model.modules()):
        raise TypeError("export_onnx() takes the model returned by qtk.convert; to run a float "
                        "model in ONNX, use torch.onnx.export")
    model = _graph_to_export(model)
    writer = build_writer(model, _as_tuple(example_inputs))
    graph = _OnnxGraph(writer, model, dynamic_batch)
    for node in writer.nodes:
        graph.add(node)
    proto = graph.to_model()
    onnx.checker.check_model(proto)
    if path is not None:
        onnx.save(proto, path)
    return proto


class _OnnxGraph:
    """The ONNX nodes and initializers of one writer graph; int8 values keep their writer names."""

    def __init__(self, writer, model, dynamic_batch):
        from onnx import TensorProto, helper

        self.helper, self.TensorProto = helper, TensorProto
        self.writer, self.model = writer, model
        self.nodes, self.initializers, self.float_of = [], [], {}
        self.names = {}  # value id -> ONNX tensor name
        self.batch = "N" if dynamic_batch else None
        self.inputs = []
        for vid in writer.inputs:
            value = writer.values[vid]
            name = self._name(vid)
            if value["qparams"] is None:
                self.inputs.append(self._info(name, TensorProto.FLOAT, value["shape"]))
            else:  # the session quantizes a float input (spec 1)
                source = value["name"]
                self.names[vid] = f"{source}.q"
                self.inputs.append(self._info(source, TensorProto.FLOAT, value["shape"]))
                self._quantize(source, vid, -128, 127)

    # ---- names, initializers, infos -------------------------------------------------------------

    def _name(self, vid):
        if vid not in self.names:
            self.names[vid] = f"{self.writer.values[vid]['name']}#{vid}"
        return self.names[vid]

    def _info(self, name, elem_type, shape):
        dims = [self.batch if (i == 0 and self.batch) else d for i, d in enumerate(shape)]
        return self.helper.make_tensor_value_info(name, elem_type, dims)

    def _const(self, name, array):
        from onnx import numpy_helper

        name = f"{name}#c{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def _node(self, op, inputs, outputs, name, **attrs):
        self.nodes.append(self.helper.make_node(op, inputs, outputs, name=name, **attrs))

    # ---- quantize / dequantize ------------------------------------------------------------------

    def _qparams(self, vid):
        return self.writer.values[vid]["qparams"]

    def _dequantized(self, vid):
        """The float value of activation ``vid`` (a DequantizeLinear, made once)."""
        qparams = self._qparams(vid)
        if qparams is None:
            return self._name(vid)
        if vid not in self.float_of:
            out = f"{self._name(vid)}.dq"
            self._node("DequantizeLinear", [self._name(vid), *self._scale_zp(qparams, out)], [out],
                       out)
            self.float_of[vid] = out
        return self.float_of[vid]

    def _scale_zp(self, qparams, where):
        return (self._const(f"{where}.scale", np.float32(qparams.scale)),
                self._const(f"{where}.zero_point", np.int8(qparams.zero_point)))

    def _quantize(self, float_name, vid, lo, hi):
        """QuantizeLinear of ``float_name`` into value ``vid``, clamped to [lo, hi] in int8 steps
        first (quantize is monotonic, so a float clip at the dequantized bounds is that clamp)."""
        qparams = self._qparams(vid)
        lo, hi = max(lo, qparams.qmin), min(hi, qparams.qmax)
        s, z = qparams.scale, qparams.zero_point
        where = self._name(vid)
        if (lo, hi) != (-128, 127):
            clipped = f"{where}.clip"
            if hi == 127 and lo == z:
                self._node("Relu", [float_name], [clipped], clipped)
            else:
                low = self._const(f"{where}.lo", np.float32(s * (lo - z)) if lo > -128 else
                                  np.float32(-np.inf))
                high = self._const(f"{where}.hi", np.float32(s * (hi - z)) if hi < 127 else
                                   np.float32(np.inf))
                self._node("Clip", [float_name, low, high], [clipped], clipped)
            float_name = clipped
        self._node("QuantizeLinear", [float_name, *self._scale_zp(qparams, where)], [where], where)

    # ---- nodes ----------------------------------------------------------------------------------

    def add(self, node):
        op, attrs = node["op"], node["attrs"]
        outputs = node["outputs"]
        if any(self._qparams(v) is None for v in outputs) and op != "dequantize":
            raise UnsupportedOpError(
                f"{node['name']}: {op!r} is kept in float; export_onnx maps int8 ops only. "
                f"Quantize that part (give it a qconfig) or deploy the mixed model with qtk.export")
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise UnsupportedOpError(
                f"{node['name']}: qtk op {op!r} has no ONNX QDQ mapping in export_onnx (mapped: "
                f"{', '.join(sorted(_MAPPED))}); deploy this model with qtk.export and the qtk "
                f"runtime, which runs every qtk op, or replace that module with one of the mapped "
                f"ops")
        if op in ("lut", "pad"):  # int8 in, int8 out, exact
            handler(node, None)
            return
        lo, hi = attrs.get("clamp", [-128, 127])
        result = handler(node, [self._dequantized(v) for v in node["inputs"]
                                if self.writer.values[v]["data"] is None])
        if op == "split":
            for out_name, vid in zip(result, outputs):
                self._quantize(out_name, vid, lo, hi)
        elif op == "dequantize":
            self.names[outputs[0]] = result
        else:
            self._quantize(result, outputs[0], lo, hi)

    def _float_out(self, node, suffix=""):
        # ":" is in no value name, so a float tensor never takes an int8 value's name
        return f"{node['name']}:{node['op']}{suffix}#{node['outputs'][0]}"

    def _constant_input(self, node, index):
        value = self.writer.values[node["inputs"][index]]
        return value["data"].numpy()

    def _weight_and_bias(self, node):
        """DequantizeLinear of the int8 weight (per output channel) and of the int32 bias."""
        layer = self.model.get_submodule(node["name"])
        weight, bias = self._constant_input(node, 1), self._constant_input(node, 2)
        s_w = layer.weight_scale.to(torch.float32).numpy()
        s_x = np.float32(layer.input_qparams[0].scale)
        zero_channel = ~weight.reshape(weight.shape[0], -1).any(axis=1)
        s_b = np.where(zero_channel, np.float32(layer.output_qparams.scale),
                       (np.float64(s_x) * s_w.astype(np.float64))).astype(np.float32)
        name = node["name"]
        w_float, b_float = f"{name}.weight.dq", f"{name}.bias.dq"
        for tensor, scale, zero_point, out in (
                (weight, s_w, np.zeros(len(s_w), np.int8), w_float),
                (bias, s_b, np.zeros(len(s_b), np.int32), b_float)):
            self._node("DequantizeLinear", [self._const(out, tensor),
                                            self._const(f"{out}.scale", scale),
                                            self._const(f"{out}.zero_point", zero_point)],
                       [out], out, axis=0)
        return w_float, b_float

    def _op_quantize(self, node, inputs):
        return inputs[0]

    def _op_dequantize(self, node, inputs):
        return inputs[0]

    def _op_conv2d(self, node, inputs):
        a = node["attrs"]
        if "layout" in a or len(node["inputs"]) != 3:
            raise UnsupportedOpError(f"{node['name']}: a fused or channels-last conv2d")
        w, b = self._weight_and_bias(node)
        out = self._float_out(node)
        ph, pw = a["padding"]
        self._node("Conv", [inputs[0], w, b], [out], out, strides=a["stride"],
                   pads=[ph, pw, ph, pw], dilations=a["dilation"], group=a["groups"][0])
        return out

    def _op_linear(self, node, inputs):
        w, b = self._weight_and_bias(node)
        out = self._float_out(node)
        rank = len(self.writer.values[node["inputs"][0]]["shape"])
        if rank == 2:
            self._node("Gemm", [inputs[0], w, b], [out], out, transB=1)
            return out
        wt, product = f"{out}.wT", f"{out}.matmul"
        self._node("Transpose", [w], [wt], wt, perm=[1, 0])
        self._node("MatMul", [inputs[0], wt], [product], product)
        self._node("Add", [product, b], [out], out)
        return out

    def _binary(self, onnx_op, node, inputs):
        out = self._float_out(node)
        self._node(onnx_op, inputs, [out], out)
        return out

    def _op_add(self, node, inputs):
        return self._binary("Add", node, inputs)

    def _op_mul(self, node, inputs):
        return self._binary("Mul", node, inputs)

    def _op_concat(self, node, inputs):
        out = self._float_out(node)
        self._node("Concat", inputs, [out], out, axis=node["attrs"]["axis"][0])
        return out

    def _op_mul_constant(self, node, inputs):
        """``x * c``: spec 21's signed ``(M_e, n_e)`` of ``s_x c_e / s_y`` gives back
        ``c_e = M_e 2^-n_e s_y / s_x`` (within 2^-31 relative), a float Mul."""
        multiplier = self._constant_input(node, 1).astype(np.float64)
        shift = self._constant_input(node, 2).astype(np.float64)
        s_x = self._qparams(node["inputs"][0]).scale
        s_y = self._qparams(node["outputs"][0]).scale
        c = (multiplier * np.exp2(-shift) * s_y / s_x).astype(np.float32)
        return self._binary("Mul", node, [inputs[0], self._const(f"{node['name']}.c", c)])

    def _op_add_constant(self, node, inputs):
        """``+-x + c``: spec 21's ``B_e = round(c_e 2^k / s_x)`` gives back ``c_e = B_e s_x 2^-k``
        (the constant qtk adds, within 2^-(k+1) input steps), a float Add."""
        a = node["attrs"]
        s_x = self._qparams(node["inputs"][0]).scale
        c = (self._constant_input(node, 1).astype(np.float64) * s_x
             * 2.0 ** -a["input_shift"][0]).astype(np.float32)
        x = inputs[0]
        if a["negate"][0]:
            x = f"{self._float_out(node)}.neg"
            self._node("Neg", [inputs[0]], [x], x)
        return self._binary("Add", node, [x, self._const(f"{node['name']}.c", c)])

    def _op_softmax(self, node, inputs):
        out = self._float_out(node)
        self._node("Softmax", inputs, [out], out, axis=node["attrs"]["axis"][0])
        return out

    def _op_clamp(self, node, inputs):
        return inputs[0]  # the clamp attribute becomes the Clip/Relu before QuantizeLinear

    def _pool_attrs(self, a):
        ph, pw = a["padding"]
        return dict(kernel_shape=a["kernel"], strides=a["stride"], pads=[ph, pw, ph, pw],
                    ceil_mode=a.get("ceil_mode", [0])[0])

    def _op_max_pool2d(self, node, inputs):
        a, out = node["attrs"], self._float_out(node)
        if "layout" in a:
            raise UnsupportedOpError(f"{node['name']}: a channels-last max_pool2d")
        self._node("MaxPool", inputs, [out], out, dilations=a["dilation"], **self._pool_attrs(a))
        return out

    def _op_avg_pool2d(self, node, inputs):
        a, out = node["attrs"], self._float_out(node)
        if "divisor_override" in a:
            raise UnsupportedOpError(f"{node['name']}: avg_pool2d with divisor_override has no "
                                     f"ONNX AveragePool form; deploy it with qtk.export")
        self._node("AveragePool", inputs, [out], out,
                   count_include_pad=a["count_include_pad"][0], **self._pool_attrs(a))
        return out

    def _op_global_avg_pool2d(self, node, inputs):
        out = self._float_out(node)
        if node["attrs"].get("keepdim", [1])[0]:
            self._node("GlobalAveragePool", inputs, [out], out)
            return out
        pooled = f"{out}.keepdim"
        self._node("GlobalAveragePool", inputs, [pooled], pooled)
        self._node("Flatten", [pooled], [out], out, axis=1)
        return out

    def _op_flatten(self, node, inputs):
        out = self._float_out(node)
        self._node("Flatten", inputs, [out], out, axis=1)
        return out

    def _op_reshape(self, node, inputs):
        out = self._float_out(node)
        shape = self._const(f"{out}.shape", np.array([0] + node["attrs"]["shape"], np.int64))
        self._node("Reshape", [inputs[0], shape], [out], out)
        return out

    def _op_permute(self, node, inputs):
        out = self._float_out(node)
        self._node("Transpose", inputs, [out], out, perm=node["attrs"]["perm"])
        return out

    def _op_split(self, node, inputs):
        outs = [f"{self._float_out(node)}.{i}" for i in range(len(node["outputs"]))]
        sizes = self._const(f"{node['name']}.sizes", np.array(node["attrs"]["sizes"], np.int64))
        self._node("Split", [inputs[0], sizes], outs, node["name"], axis=node["attrs"]["axis"][0])
        return outs

    def _op_slice(self, node, inputs):
        a, out = node["attrs"], self._float_out(node)
        axes = list(range(1, len(a["starts"]) + 1))
        arrays = [np.array(v, np.int64) for v in (a["starts"], a["ends"], axes, a["steps"])]
        names = [self._const(f"{out}.{k}", v) for k, v in zip(("starts", "ends", "axes", "steps"),
                                                             arrays)]
        self._node("Slice", [inputs[0], *names], [out], out)
        return out

    def _op_pad(self, node, inputs):
        """Padding on the int8 values themselves (spec 13: they keep ``(s, z)``), exact."""
        a = node["attrs"]
        x, out = self._name(node["inputs"][0]), self._name(node["outputs"][0])
        left, right, top, bottom = a["pads"]
        mode = ["constant", "reflect", "edge"][a.get("mode", [0])[0]]
        pads = self._const(f"{out}.pads",
                           np.array([0, 0, top, left, 0, 0, bottom, right], np.int64))
        extra = []
        if mode == "constant":
            value = a.get("value", [self._qparams(node["inputs"][0]).zero_point])[0]
            extra = [self._const(f"{out}.value", np.int8(value))]
        self._node("Pad", [x, pads, *extra], [out], out, mode=mode)

    def _op_resize_nearest(self, node, inputs):
        """Nearest resize as two Gathers of the source rows and columns qtk computed (exact)."""
        a, out = node["attrs"], self._float_out(node)
        rows, cols = f"{out}.rows", out
        index_h = self._const(f"{out}.index_h", np.array(a["index_h"], np.int64))
        index_w = self._const(f"{out}.index_w", np.array(a["index_w"], np.int64))
        self._node("Gather", [inputs[0], index_h], [rows], rows, axis=2)
        self._node("Gather", [rows, index_w], [cols], cols, axis=3)
        return out

    def _op_lut(self, node, inputs):
        """A table function (HardSwish, Sigmoid, ...: spec 10) as the exact table qtk computed:
        ``y = table[x + 128]``, a Gather of int8 (ONNX has no op with qtk's table rounding)."""
        x, out = self._name(node["inputs"][0]), self._name(node["outputs"][0])
        table = self._const(f"{node['name']}.table", self._constant_input(node, 1))
        wide, index = f"{out}.int32", f"{out}.index"
        self._node("Cast", [x], [wide], wide, to=self.TensorProto.INT32)
        self._node("Add", [wide, self._const(f"{out}.offset", np.array(128, np.int32))], [index],
                   index)
        self._node("Gather", [table, index], [out], out, axis=0)
        return out

    def to_model(self):
        helper, TensorProto = self.helper, self.TensorProto
        outputs = []
        for vid in self.writer.outputs:
            value = self.writer.values[vid]
            elem = TensorProto.FLOAT if value["qparams"] is None else TensorProto.INT8
            outputs.append(self._info(self._name(vid), elem, value["shape"]))
        graph = helper.make_graph(self.nodes, "qtk", self.inputs, outputs, self.initializers)
        from ..version import __version__
        return helper.make_model(graph, producer_name="qtk", producer_version=__version__,
                                 opset_imports=[helper.make_opsetid("", OPSET)])


_MAPPED = [name[4:] for name in dir(_OnnxGraph) if name.startswith("_op_")]
