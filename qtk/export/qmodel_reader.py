"""Reads the .qmodel format of docs/qmodel_format.md back into Python, for the tools
(``qtk inspect``, ``qtk diff``'s one-node reproducer) and tests.

This is not the runtime's loader: it trusts the file's structure (the runtime checks every byte;
load a file with :func:`qtk.runtime.load` first when it may be malformed) and only decodes it.
"""
import dataclasses
import struct
from typing import Dict, List, Optional

import numpy as np
import torch

from .qmodel_writer import ATTR_FLOATS, HEADER_SIZE, MAGIC, QModelWriter

_DTYPES = {1: "int8", 2: "int32", 3: "float32", 4: "int4", 5: "int2", 6: "uint8", 7: "int1"}
_PACKED_BITS = {"int4": 4, "int2": 2, "int1": 1}
_NUMPY = {"int8": np.int8, "int32": np.int32, "float32": np.float32, "uint8": np.uint8}


@dataclasses.dataclass
class QValue:
    """One value record: an activation (``data`` None) or a constant."""
    name: str
    # "int8", "int32", "float32", "uint8" (an image input), "int4"/"int2"/"int1" (packed)
    dtype: str
    shape: List[int]
    scale: float
    zero_point: int
    data: Optional[np.ndarray] = None  # constants, widened to int8 where packed
    file_offset: int = -1  # constants: where their bytes start in the file
    file_size: int = 0

    @property
    def constant(self):
        return self.data is not None


@dataclasses.dataclass
class QNode:
    op: str
    name: str
    inputs: List[int]
    outputs: List[int]
    attrs: Dict[str, list]  # f32 lists hold Python floats, i64 lists ints


@dataclasses.dataclass
class QModelFile:
    producer: str
    values: List[QValue]
    inputs: List[int]
    outputs: List[int]
    nodes: List[QNode]

    def producer_of(self):
        """{value id: index of the node that writes it}."""
        return {v: k for k, node in enumerate(self.nodes) for v in node.outputs}


def _unpack_signed(data, bits, count):
    per_byte = 8 // bits
    raw = np.frombuffer(data, dtype=np.uint8).astype(np.int16)
    fields = np.stack([(raw >> (bits * i)) & ((1 << bits) - 1) for i in range(per_byte)], axis=1)
    fields = fields.reshape(-1)[:count]
    if bits == 1:  # a binary weight's sign: 1 for -1 (spec 24)
        return (1 - 2 * fields).astype(np.int8)
    return np.where(fields >= 1 << (bits - 1), fields - (1 << bits), fields).astype(np.int8)


class _Decoder:
    def __init__(self, data, offset):
        self.data, self.at = data, offset

    def unpack(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def string(self):
        (length,) = self.unpack("I")
        text = bytes(self.data[self.at:self.at + length]).decode("utf-8")
        self.at += length
        return text

    def ids(self):
        (count,) = self.unpack("I")
        return list(self.unpack(f"{count}I"))


def read_qmodel(source):
    """A ``.qmodel`` (path or bytes) as a :class:`QModelFile`."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        with open(source, "rb") as f:
            data = f.read()
    if data[:8] != MAGIC:
        raise ValueError("not a .qmodel file (bad magic)")
    (_, _, _, graph_offset, _, blob_offset, _, _, _) = struct.unpack_from("<IIQQQQQII", data, 8)
    assert HEADER_SIZE == 64
    dec = _Decoder(data, graph_offset)
    producer = dec.string()
    (count,) = dec.unpack("I")
    values = []
    for _ in range(count):
        name = dec.string()
        code, rank = dec.unpack("BB")
        shape = list(dec.unpack(f"{rank}q"))
        scale, zero_point = dec.unpack("fi")
        (has_data,) = dec.unpack("B")
        value = QValue(name, _DTYPES[code], shape, scale, zero_point)
        if has_data:
            offset, size = dec.unpack("QQ")
            start = blob_offset + offset
            raw = data[start:start + size]
            elements = int(np.prod(shape)) if shape else 1
            if value.dtype in _PACKED_BITS:
                array = _unpack_signed(raw, _PACKED_BITS[value.dtype], elements)
            else:
                array = np.frombuffer(raw, dtype=_NUMPY[value.dtype]).copy()
            value.data = array.reshape(shape)
            value.file_offset, value.file_size = start, size
        values.append(value)
    inputs, outputs = dec.ids(), dec.ids()
    (count,) = dec.unpack("I")
    nodes = []
    for _ in range(count):
        op, name = dec.string(), dec.string()
        node_inputs, node_outputs = dec.ids(), dec.ids()
        (attr_count,) = dec.unpack("I")
        attrs = {}
        for _ in range(attr_count):
            key = dec.string()
            kind, n = dec.unpack("BI")
            attrs[key] = list(dec.unpack(f"{n}{'f' if kind == ATTR_FLOATS else 'q'}"))
        nodes.append(QNode(op, name, node_inputs, node_outputs, attrs))
    return QModelFile(producer, values, inputs, outputs, nodes)


class _QParams:
    """What QModelWriter reads of a qparams object: a file's value holds one scale (a tensor
    quantized per channel, spec 25, its largest, which is what a copy writes back)."""
    per_channel = False

    def __init__(self, scale, zero_point):
        self.scale, self.zero_point = scale, zero_point


def subgraph_writer(qfile, node_indices):
    """A :class:`QModelWriter` for the nodes ``node_indices`` of ``qfile`` alone: the activations
    they read and no chosen node writes become graph inputs (with their scale and zero point), the
    ones they write and nothing else chosen reads become outputs. Constants are copied (packed
    ones stay packed). Returns ``(writer, input value ids, output value ids)``, ids of
    ``qfile``."""
    chosen = [qfile.nodes[k] for k in sorted(node_indices)]
    written = {v for node in chosen for v in node.outputs}
    read = {v for node in chosen for v in node.inputs}
    writer = QModelWriter(qfile.producer + " (subgraph)")
    new_id = {}

    def add(vid):
        if vid in new_id:
            return new_id[vid]
        v = qfile.values[vid]
        if v.constant:
            bits = _PACKED_BITS.get(v.dtype, 8)
            new_id[vid] = writer.add_constant(v.name, torch.from_numpy(v.data.copy()), bits)
        else:
            qparams = None if v.dtype == "float32" else _QParams(v.scale, v.zero_point)
            new_id[vid] = writer.add_activation(v.name, v.shape, qparams)
        return new_id[vid]

    input_ids, output_ids = [], []
    for node in chosen:
        for vid in node.inputs:
            if not qfile.values[vid].constant and vid not in written and vid not in input_ids:
                input_ids.append(vid)
                writer.inputs.append(add(vid))
        ins = [add(vid) for vid in node.inputs]
        outs = [add(vid) for vid in node.outputs]
        writer.add_node(node.op, node.name, ins, outs, node.attrs)
    for node in chosen:
        for vid in node.outputs:
            if vid not in read or vid in qfile.outputs:
                output_ids.append(vid)
                writer.outputs.append(new_id[vid])
    return writer, input_ids, output_ids
