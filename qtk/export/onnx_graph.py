"""What both ONNX forms of :func:`qtk.export_onnx` share: the graph under construction (names,
initializers, inputs and outputs), the dispatch of qtk's nodes to ``_op_<name>`` translations,
and the translations of ops that only move int8 values (reshapes, pooling by maximum, padding,
gathers), which are one ONNX node on the int8 tensor or on its dequantized float alike.

A form (:mod:`.onnx_qdq`, :mod:`.onnx_integer`) subclasses :class:`OnnxGraph` with the ops that
compute new values, and says which tensors an op reads and writes (``_translate``).
"""
import numpy as np

from ..errors import UnsupportedOpError

OPSET = 17


class OnnxGraph:
    """The ONNX nodes and initializers of one writer graph; int8 values keep their writer names
    (``name#id``)."""

    FORM = None  # the form's name in messages

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
                self._quantize_float(source, vid)

    @classmethod
    def mapped_ops(cls):
        return sorted(name[4:] for name in dir(cls) if name.startswith("_op_"))

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

    def _step(self, op, inputs, out, **attrs):
        """One node with one output named ``out`` (the node takes its name); returns ``out``."""
        self._node(op, inputs, [out], out, **attrs)
        return out

    def _qparams(self, vid):
        return self.writer.values[vid]["qparams"]

    def _shape(self, vid):
        return self.writer.values[vid]["shape"]

    def _constant_input(self, node, index):
        return self.writer.values[node["inputs"][index]]["data"].numpy()

    def _dequantized(self, vid):
        """The float value of activation ``vid`` (a DequantizeLinear, made once)."""
        qparams = self._qparams(vid)
        if qparams is None:
            return self._name(vid)
        if vid not in self.float_of:
            out = f"{self._name(vid)}.dq"
            self._node("DequantizeLinear", [self._name(vid), *self._scale_zp(qparams, out)], [out],
                       out, **self._axis(qparams))
            self.float_of[vid] = out
        return self.float_of[vid]

    def _scale_zp(self, qparams, where):
        """QuantizeLinear's and DequantizeLinear's scale and zero point: one, or one per channel
        (spec 25: the zero point repeated) along ``_axis``."""
        scale = np.array(qparams.scale, np.float32)
        return (self._const(f"{where}.scale", scale),
                self._const(f"{where}.zero_point",
                            np.full(scale.shape, qparams.zero_point, np.int8)))

    @staticmethod
    def _axis(qparams):
        return {"axis": 1} if qparams.per_channel else {}

    # ---- dispatch -------------------------------------------------------------------------------

    def add(self, node):
        op, outputs = node["op"], node["outputs"]
        if op == "dequantize":  # a float output of the graph
            self.names[outputs[0]] = self._dequantized(node["inputs"][0])
            return
        if any(self._qparams(v) is None for v in outputs):
            raise UnsupportedOpError(
                f"{node['name']}: {op!r} is kept in float; export_onnx maps int8 ops only. "
                f"Quantize that part (give it a qconfig) or deploy the mixed model with qtk.export")
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise UnsupportedOpError(
                f"{node['name']}: qtk op {op!r} has no ONNX {self.FORM} mapping in export_onnx "
                f"(mapped: {', '.join(self.mapped_ops())}); deploy this model with qtk.export and "
                f"the qtk runtime, which runs every qtk op, or replace that module with one of "
                f"the mapped ops")
        self._translate(node, handler)

    def _translate(self, node, handler):
        """Calls ``handler(node, inputs, outputs)`` with the names of the tensors it reads (the
        activations, not the constants) and writes, and finishes its outputs."""
        raise NotImplementedError

    def _activation_inputs(self, node):
        return [v for v in node["inputs"] if self.writer.values[v]["data"] is None]

    # ---- ops that move values: one ONNX node on int8 or float alike -----------------------------

    def _op_flatten(self, node, inputs, outputs):
        self._step("Flatten", inputs, outputs[0], axis=1)

    def _op_reshape(self, node, inputs, outputs):
        shape = self._const(f"{outputs[0]}.shape",
                            np.array([0] + node["attrs"]["shape"], np.int64))
        self._step("Reshape", [inputs[0], shape], outputs[0])

    def _op_permute(self, node, inputs, outputs):
        self._step("Transpose", inputs, outputs[0], perm=node["attrs"]["perm"])

    def _op_split(self, node, inputs, outputs):
        sizes = self._const(f"{node['name']}.sizes", np.array(node["attrs"]["sizes"], np.int64))
        self._node("Split", [inputs[0], sizes], outputs, node["name"],
                   axis=node["attrs"]["axis"][0])

    def _op_slice(self, node, inputs, outputs):
        a, out = node["attrs"], outputs[0]
        axes = list(range(1, len(a["starts"]) + 1))
        arrays = [np.array(v, np.int64) for v in (a["starts"], a["ends"], axes, a["steps"])]
        names = [self._const(f"{out}.{k}", v) for k, v in zip(("starts", "ends", "axes", "steps"),
                                                             arrays)]
        self._step("Slice", [inputs[0], *names], out)

    def _pool_attrs(self, a):
        ph, pw = a["padding"]
        return dict(kernel_shape=a["kernel"], strides=a["stride"], pads=[ph, pw, ph, pw],
                    ceil_mode=a.get("ceil_mode", [0])[0])

    def _op_max_pool2d(self, node, inputs, outputs):
        a = node["attrs"]
        if "layout" in a:
            raise UnsupportedOpError(f"{node['name']}: a channels-last max_pool2d")
        self._step("MaxPool", inputs, outputs[0], dilations=a["dilation"],
                   **self._pool_attrs(a))

    def _op_resize_nearest(self, node, inputs, outputs):
        """Nearest resize as two Gathers of the source rows and columns qtk computed (exact)."""
        a, out = node["attrs"], outputs[0]
        index_h = self._const(f"{out}.index_h", np.array(a["index_h"], np.int64))
        index_w = self._const(f"{out}.index_w", np.array(a["index_w"], np.int64))
        rows = self._step("Gather", [inputs[0], index_h], f"{out}.rows", axis=2)
        self._step("Gather", [rows, index_w], out, axis=3)

    # ---- int8 in, int8 out in both forms --------------------------------------------------------

    INT8_OPS = ("lut", "pad")

    def _op_pad(self, node, inputs, outputs):
        """Padding on the int8 values themselves (spec 13: they keep ``(s, z)``), exact."""
        a, out = node["attrs"], outputs[0]
        left, right, top, bottom = a["pads"]
        mode = ["constant", "reflect", "edge"][a.get("mode", [0])[0]]
        pads = self._const(f"{out}.pads",
                           np.array([0, 0, top, left, 0, 0, bottom, right], np.int64))
        extra = []
        if mode == "constant":
            value = a.get("value", [self._qparams(node["inputs"][0]).zero_point])[0]
            extra = [self._const(f"{out}.value", np.int8(value))]
        self._step("Pad", [inputs[0], pads, *extra], out, mode=mode)

    def _op_lut(self, node, inputs, outputs):
        """A table function (HardSwish, Sigmoid, ...: spec 10) as the exact table qtk computed:
        ``y = table[x + 128]``, a Gather of int8 (ONNX has no op with qtk's table rounding). A
        table per channel (spec 25) is one flat table, channel c's row at ``256 c``."""
        out = outputs[0]
        tables = self._constant_input(node, 1)
        table = self._const(f"{node['name']}.table", tables.reshape(-1))
        index = self._int32_index(inputs[0], out)
        if tables.ndim == 2:
            rank = len(self._shape(node["inputs"][0]))
            rows = 256 * np.arange(len(tables), dtype=np.int32).reshape([1, -1] + [1] * (rank - 2))
            index = self._step("Add", [index, self._const(f"{out}.rows", rows)], f"{out}.row_index")
        self._step("Gather", [table, index], out, axis=0)

    def _int32_index(self, int8_name, where):
        """``q + 128`` as int32: the row of a 256-entry table for int8 ``q``."""
        wide = self._step("Cast", [int8_name], f"{where}.int32", to=self.TensorProto.INT32)
        return self._step("Add", [wide, self._const(f"{where}.offset", np.array(128, np.int32))],
                          f"{where}.index")

    # ---- the model ------------------------------------------------------------------------------

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

