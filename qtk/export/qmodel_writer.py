"""Writes the .qmodel format of docs/qmodel_format.md (version 1)."""
import struct
import zlib

import torch

MAGIC = b"QTKMODL\0"
FORMAT_VERSION = 1
HEADER_SIZE = 64
ALIGNMENT = 64

DTYPE_CODES = {torch.int8: 1, torch.int32: 2, torch.float32: 3, torch.uint8: 6}  # uint8: images
PACKED_CODES = {4: 4, 2: 5, 1: 7}  # storage bits -> code: packed low bits first
ATTR_INTS, ATTR_FLOATS = 1, 2


def pack_signed(values, bits):
    """int8 tensor -> bytes with 8 // bits fields per byte, low bits first: two's complement, or
    at 1 bit a binary weight's sign (1 for -1, 0 for +1; spec 24)."""
    per_byte = 8 // bits
    values = values.reshape(-1).to(torch.int64)
    if bits == 1:
        if not bool((values.abs() == 1).all()):
            raise ValueError("a 1-bit constant holds values other than -1 and +1")
        fields = (values < 0).to(torch.int64)
    else:
        fields = values & ((1 << bits) - 1)
    fields = torch.nn.functional.pad(fields, (0, (-fields.numel()) % per_byte))
    shifts = torch.arange(per_byte, dtype=torch.int64) * bits
    return (fields.reshape(-1, per_byte) << shifts).sum(dim=1).to(torch.uint8).numpy().tobytes()


def _align(n):
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


class _Encoder:
    def __init__(self):
        self.parts = []

    def pack(self, fmt, *values):
        self.parts.append(struct.pack("<" + fmt, *values))

    def string(self, text):
        data = text.encode("utf-8")
        self.pack("I", len(data))
        self.parts.append(data)

    def ids(self, ids):
        self.pack("I", len(ids))
        self.parts.append(struct.pack(f"<{len(ids)}I", *ids))

    def bytes(self):
        return b"".join(self.parts)


class QModelWriter:
    """Collects values and nodes, then serializes them with aligned weight blobs."""

    def __init__(self, producer):
        self.producer = producer
        self.values = []  # dicts: name, dtype, shape, scale, zero_point, data
        self.nodes = []
        self.inputs, self.outputs = [], []

    def add_activation(self, name, shape, qparams):
        """An int8 activation with ``qparams``, or a float32 one when ``qparams`` is None."""
        if qparams is None:
            return self._add(name, torch.float32, shape, None, None)
        return self._add(name, torch.int8, shape, qparams, None)

    def add_like(self, name, shape, like):
        """An activation with the dtype and qparams of value ``like`` (for ops that move bytes)."""
        source = self.values[like]
        return self._add(name, source["dtype"], shape, source["qparams"], None)

    def add_image_input(self, name, shape):
        """A uint8 activation: an image graph input [N, H, W, C] that an image_to_int8 reads."""
        index = self._add(name, torch.uint8, shape, None, None)
        self.inputs.append(index)
        return index

    def add_constant(self, name, tensor, bits=8):
        """A constant; an int8 one with ``bits`` 1, 2 or 4 is stored packed (the runtime widens
        it)."""
        tensor = tensor.detach().contiguous().cpu()
        if tensor.dtype not in DTYPE_CODES or tensor.dtype == torch.uint8:
            raise TypeError(f"{name}: cannot store dtype {tensor.dtype} in a .qmodel")
        index = self._add(name, tensor.dtype, tuple(tensor.shape), None, tensor)
        if bits in PACKED_CODES and tensor.dtype == torch.int8:
            self.values[index]["packed_bits"] = bits
        return index

    def _add(self, name, dtype, shape, qparams, data):
        """``qparams``: an int8 activation's QParams (its range is the writer's business only:
        the file stores scale and zero point, and clamps enforce the range). A tensor quantized
        per channel records its largest channel scale: its readers' attributes hold the scales
        (spec 25)."""
        scale, zero_point = (max(qparams.scale) if qparams.per_channel else qparams.scale,
                             qparams.zero_point) if qparams else (0.0, 0)
        self.values.append(dict(name=name, dtype=dtype, shape=[int(d) for d in shape],
                                scale=float(scale), zero_point=int(zero_point), qparams=qparams,
                                data=data))
        return len(self.values) - 1

    def add_node(self, op, name, inputs, outputs, attrs):
        self.nodes.append(dict(op=op, name=name, inputs=list(inputs), outputs=list(outputs),
                               attrs=dict(attrs)))

    def to_bytes(self):
        blob, offsets = bytearray(), {}
        for index, value in enumerate(self.values):
            if value["data"] is not None:
                blob.extend(b"\0" * (_align(len(blob)) - len(blob)))
                offsets[index] = len(blob)
                blob.extend(self._data_bytes(value))
        graph = self._encode_graph(offsets)
        graph_offset = HEADER_SIZE
        blob_offset = _align(graph_offset + len(graph))
        file_size = blob_offset + len(blob)
        header = MAGIC + struct.pack("<IIQQQQQII", FORMAT_VERSION, HEADER_SIZE, file_size,
                                     graph_offset, len(graph), blob_offset, len(blob),
                                     zlib.crc32(graph), 0)
        assert len(header) == HEADER_SIZE
        padding = b"\0" * (blob_offset - graph_offset - len(graph))
        return header + graph + padding + bytes(blob)

    @staticmethod
    def _data_bytes(value):
        if "packed_bits" in value:
            return pack_signed(value["data"], value["packed_bits"])
        return value["data"].numpy().tobytes()

    def _encode_graph(self, offsets):
        enc = _Encoder()
        enc.string(self.producer)
        enc.pack("I", len(self.values))
        for index, value in enumerate(self.values):
            enc.string(value["name"])
            code = (PACKED_CODES[value["packed_bits"]] if "packed_bits" in value
                    else DTYPE_CODES[value["dtype"]])
            enc.pack("BB", code, len(value["shape"]))
            enc.pack(f"{len(value['shape'])}q", *value["shape"])
            enc.pack("fi", value["scale"], value["zero_point"])
            if value["data"] is None:
                enc.pack("B", 0)
            else:
                enc.pack("BQQ", 1, offsets[index], len(self._data_bytes(value)))
        enc.ids(self.inputs)
        enc.ids(self.outputs)
        enc.pack("I", len(self.nodes))
        for node in self.nodes:
            enc.string(node["op"])
            enc.string(node["name"])
            enc.ids(node["inputs"])
            enc.ids(node["outputs"])
            enc.pack("I", len(node["attrs"]))
            for key, values in node["attrs"].items():
                enc.string(key)
                is_float = any(isinstance(v, float) for v in values)
                enc.pack("BI", ATTR_FLOATS if is_float else ATTR_INTS, len(values))
                enc.pack(f"{len(values)}{'f' if is_float else 'q'}", *values)
        return enc.bytes()
