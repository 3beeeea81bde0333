"""Where a deployed model first departs from its quantized reference: ``first_divergence``.

The runtime's int8 bytes must equal the Quantized model's in torch (docs/contracts.md). When an
output does not, :func:`first_divergence` finds the first node that computes different bytes:

1. the Quantized model runs in torch node by node: the export's own trace (``trace_export``) runs
   its fx graph recording every node's result and says which ``.qmodel`` value holds it;
2. the runtime runs the file with ``keep_intermediates=True``, which keeps every activation
   (graph passes included: an add fused into its conv is that conv's output, a PReLU or lut fused
   into its add that add's, an NHWC value is permuted back to NCHW to compare);
3. the values are compared in the runtime's execution order, int8 byte for byte (float32 values,
   which the runtime's float kernels need not reproduce bit for bit, within a tolerance); the
   first that differs names its node.

docs/tools.md describes it with ``qtk diff``.
"""
import dataclasses
from typing import List, Optional

import numpy as np
import torch

from . import runtime
from .export.exporter import trace_export
from .export.qmodel_reader import read_qmodel, subgraph_writer

NHWC_SUFFIX = " (NHWC)"
FLOAT_RTOL, FLOAT_ATOL = 1e-4, 1e-5  # float32 values: |a - b| <= atol * max|b| + rtol * |b|


@dataclasses.dataclass
class Divergence:
    """The first value whose runtime bytes differ from the reference's.

    Args:
        node: the runtime node that computed it (a conv with a fused add carries the conv's name,
            an add with a fused PReLU or lut the add's).
        op: that node's op.
        value: the value's name in the file.
        value_id: its id in the file.
        file_node: the name of the file's node that writes the value.
        shape: the value's shape (NCHW).
        mismatches: how many elements differ, of ``size``.
        indices: the first differing indices (up to 8), each a tuple.
        expected: the reference's values there.
        got: the runtime's values there.
        repro: the one-node .qmodel written to reproduce it, or None.
        repro_note: how the reproducer behaved, why there is none, or what else is known.
        checked: the values compared before (and including) this one.
    """
    node: str
    op: str
    value: str
    value_id: int
    file_node: str
    shape: tuple
    mismatches: int
    size: int
    indices: List[tuple]
    expected: list
    got: list
    repro: Optional[str] = None
    repro_note: str = ""
    checked: int = 0

    def __str__(self):
        differ = (f"{self.mismatches} of {self.size} elements differ" if self.mismatches >= 0
                  else "its shape differs")
        lines = [f"first divergent node: {self.node!r} ({self.op or 'output'}), value "
                 f"{self.value!r} {list(self.shape)}: {differ}"]
        if self.file_node != self.node:
            lines.append(f"  (the file's node {self.file_node!r} writes the value; the runtime "
                         f"fused it into {self.node!r})")
        for index, want, got in zip(self.indices, self.expected, self.got):
            lines.append(f"  at {list(index)}: reference {want}, runtime {got}")
        if self.repro:
            lines.append(f"  reproducer: {self.repro} {self.repro_note}".rstrip())
        elif self.repro_note:
            lines.append(f"  {self.repro_note}")
        return "\n".join(lines)


def _as_tuple(inputs):
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def reference_values(quantized_model, inputs):
    """``(values, writer)``: ``{file value id: torch result}`` of every value the export of
    ``quantized_model`` has a reference for, computed on ``inputs``; ``writer`` is that export."""
    writer, value_of, recorded = trace_export(quantized_model, _as_tuple(inputs))
    values = {}
    for node, ids in value_of.items():
        results = recorded[node]
        if isinstance(ids, list):
            for vid, result in zip(ids, results):
                values.setdefault(vid, result)
        else:
            values.setdefault(ids, results)
    return {vid: t for vid, t in values.items() if isinstance(t, torch.Tensor)}, writer


def _equal(want, got):
    """A boolean mask of the elements that agree."""
    if want.dtype == np.int8 or got.dtype == np.int8:
        return want.astype(np.int64) == got.astype(np.int64)
    bound = FLOAT_ATOL * (np.abs(want).max(initial=0.0)) + FLOAT_RTOL * np.abs(want)
    return (np.abs(want - got) <= bound) | (np.isnan(want) & np.isnan(got))


def first_divergence(quantized_model, qmodel, inputs, threads=1, repro_path=None, progress=None):
    """The first node whose output bytes in the runtime differ from the Quantized reference's.

    Args:
        quantized_model: the model from :func:`qtk.convert` that ``qmodel`` was exported from
            (or a float model, for a float export: its values compare within a tolerance).
        qmodel: the ``.qmodel`` path or bytes.
        inputs: a float tensor (or tuple of them), as the model takes them.
        threads: the runtime session's threads.
        repro_path: where to write a ``.qmodel`` of the divergent node alone (its activation
            inputs become graph inputs), with ``<repro_path>.inputs.npz`` holding the reference's
            values of those inputs and ``expected``, the reference's output.
        progress: a callable wrapping an iterable (``tqdm.tqdm``) for long comparisons.
    Returns:
        a :class:`Divergence`, or None when every value the runtime computed equals the
        reference's. Where all do while each value has memory of its own but an ordinary
        session's output differs, the divergence's node is ``"(arena reuse)"``.
    """
    inputs = _as_tuple(inputs)
    qfile = read_qmodel(qmodel)
    source = bytes(qmodel) if isinstance(qmodel, (bytes, bytearray, memoryview)) else qmodel
    references, writer = reference_values(quantized_model, inputs)
    names = [v["name"] for v in writer.values]
    if names != [v.name for v in qfile.values]:
        raise ValueError("the .qmodel's values are not those this model exports (was it exported "
                         "from another model or another qtk?); export it again with qtk.export")
    arrays = [x.detach().float().numpy() if isinstance(x, torch.Tensor) else x for x in inputs]
    session = runtime.load(source, threads=threads, keep_intermediates=True)
    session.run(*arrays, output="int8")
    computed = session._session.intermediates()  # a list: execution order, names as they are
    id_of = {v.name: vid for vid, v in enumerate(qfile.values)}
    producer = qfile.producer_of()

    checked = 0
    walk = progress(computed, desc="compare", unit="value") if progress else computed
    for entry in walk:
        got, vid = entry["data"], entry["value_id"]
        if vid >= len(qfile.values):  # a value a graph pass added
            base = entry["value"]
            if not base.endswith(NHWC_SUFFIX) or got.ndim != 4:
                continue
            vid = id_of[base[:-len(NHWC_SUFFIX)]]
            got = got.transpose(0, 3, 1, 2)
        if vid not in references:
            continue
        checked += 1
        found = _compare(entry["node"] or "(graph input)", entry["op"] or "quantize", vid,
                         references[vid], got, qfile, producer, checked)
        if found is not None:
            if repro_path is not None and found.mismatches > 0:
                _write_repro(found, qfile, producer, references, repro_path, threads)
            return found

    # Every value agrees while each has memory of its own: the outputs of an ordinary session,
    # whose arena reuses memory, must agree too, or a kernel writes beyond its output or reads a
    # value after its memory went to another.
    plain = runtime.load(source, threads=threads).run(*arrays, output="int8")
    plain = plain if isinstance(plain, list) else [plain]
    for vid, got in zip(qfile.outputs, plain):
        if vid in references:
            found = _compare("(arena reuse)", "", vid, references[vid], np.asarray(got), qfile,
                             producer, checked)
            if found is not None:
                found.repro_note = ("every node's output agrees when each has memory of its own, "
                                    "but this output of an ordinary session differs: a kernel "
                                    "writes outside its output or reads memory already reused")
                return found
    return None


def _compare(node, op, vid, reference, got, qfile, producer, checked):
    """A :class:`Divergence` where ``got`` differs from ``reference``, else None."""
    want = reference.detach().cpu().numpy()
    value = qfile.values[vid]
    file_node = qfile.nodes[producer[vid]].name if vid in producer else ""
    if want.shape != got.shape:
        return Divergence(node, op, value.name, vid, file_node, tuple(got.shape), -1,
                          int(got.size), [], [], [],
                          repro_note=f"shapes differ: reference {list(want.shape)}",
                          checked=checked)
    same = _equal(want, got)
    if same.all():
        return None
    wrong = np.argwhere(~same)
    first = [tuple(int(i) for i in index) for index in wrong[:8]]
    return Divergence(node=node, op=op, value=value.name, value_id=vid, file_node=file_node,
                      shape=tuple(got.shape), mismatches=int(len(wrong)), size=int(got.size),
                      indices=first, expected=[want[i].item() for i in first],
                      got=[got[i].item() for i in first], checked=checked)


def _write_repro(found, qfile, producer, references, path, threads):
    """The file's node(s) that computed the value, alone in a .qmodel, with the reference inputs;
    then checks whether the runtime reproduces the divergence on it."""
    if found.value_id not in producer:
        found.repro_note = ("no reproducer: the value is a graph input (the runtime's input "
                            "quantization)")
        return
    chosen = {producer[found.value_id]}
    # A fused node's value comes from the node the runtime fused it into (an add's from its conv,
    # a PReLU's or lut's from its add): take both.
    chosen |= {k for k, node in enumerate(qfile.nodes) if node.name == found.node}
    writer, input_ids, output_ids = subgraph_writer(qfile, chosen)
    missing = [qfile.values[v].name for v in input_ids if v not in references]
    if missing:
        found.repro_note = f"no reproducer: no reference for its input(s) {missing}"
        return
    with open(path, "wb") as f:
        f.write(writer.to_bytes())
    arrays = {f"input_{i}": references[v].detach().cpu().numpy() for i, v in enumerate(input_ids)}
    target = output_ids.index(found.value_id) if found.value_id in output_ids else 0
    arrays["expected"] = references[output_ids[target]].detach().cpu().numpy()
    np.savez(f"{path}.inputs.npz", **arrays)
    found.repro = str(path)
    session = runtime.load(path, threads=threads)
    outs = session.run(*[arrays[f"input_{i}"] for i in range(len(input_ids))], output="int8")
    outs = outs if isinstance(outs, list) else [outs]
    same = _equal(arrays["expected"], outs[target]).all()
    nodes = ", ".join(f"{qfile.nodes[k].op} {qfile.nodes[k].name!r}" for k in sorted(chosen))
    found.repro_note = (f"({nodes}; inputs and expected output in {path}.inputs.npz; "
                        f"{'does not reproduce' if same else 'reproduces'} the difference)")
