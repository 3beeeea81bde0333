"""What prepare decided for each op of a model: int8 or float, why, and the share of the model's
multiply-accumulates that run in int8 (``qtk.report(model, example)``)."""
import copy
import dataclasses
from typing import List, Optional

import torch
from torch import nn

from .graph.capture import node_inputs, run_recording
from .modules import MatMul, QATMatMul

# Why an op stays float.
BY_QCONFIG = "its qconfig is None"
NO_INT8_FORM = "qtk has no int8 form for it"
READS_FLOAT = "it reads a float tensor"  # a pass-through op follows its input


@dataclasses.dataclass
class ReportRow:
    node: str  # the module path (or the call's node name)
    op: str  # module type or function name
    precision: str  # "int8" or "float"
    reason: str = ""  # why float
    macs: Optional[int] = None  # multiply-accumulates per call, given an example input


@dataclasses.dataclass
class Report:
    rows: List[ReportRow]

    @property
    def fallbacks(self):
        """Ops kept in float because qtk has no int8 form (not by the user's qconfig)."""
        return [row for row in self.rows if row.reason.startswith(NO_INT8_FORM)]

    @property
    def int8_mac_share(self):
        """The share of MACs in int8 (None without an example input to count them)."""
        counted = [row for row in self.rows if row.macs]
        total = sum(row.macs for row in counted)
        if not counted or total == 0:
            return None
        return sum(row.macs for row in counted if row.precision == "int8") / total

    def __str__(self):
        lines = [f"{'node':40} {'op':22} {'precision':9} {'MACs':>12}  why float"]
        for row in self.rows:
            macs = "" if row.macs is None else f"{row.macs:,}"
            lines.append(f"{row.node[:40]:40} {row.op[:22]:22} {row.precision:9} {macs:>12}  "
                         f"{row.reason}")
        share = self.int8_mac_share
        int8 = sum(row.precision == "int8" for row in self.rows)
        lines.append(f"{int8} of {len(self.rows)} ops in int8"
                     + ("" if share is None else f", {100 * share:.1f}% of MACs"))
        return "\n".join(lines)


def summary_line(report):
    """The one line prepare prints when ops fell back to float."""
    kinds = sorted({row.op for row in report.fallbacks})
    return (f"qtk: {len(report.fallbacks)} op(s) stay float because qtk has no int8 form for them "
            f"({', '.join(kinds)}); the runtime runs them in float32 between a dequantize and a "
            f"quantize. qtk.report(model) lists every op; strict=True refuses them instead")


def _macs(module, output, inputs):
    """A conv's or linear layer's multiply-accumulates: one per weight of an output channel, per
    output value (fused containers count their first layer's); a matmul's: K per output value.
    A transposed conv is the adjoint of a conv, so the count is a conv's read the other way: each
    input value meets each weight of its group's outputs (torch's weight [C, O/g, kh, kw]: one
    row per input channel), input numel x O/g x kh x kw, the products that padding crops
    included, as a conv counts those that read its padding."""
    if isinstance(module, (MatMul, QATMatMul)):
        return output.numel() * inputs[0].shape[-1]
    first = module[0] if isinstance(module, nn.Sequential) else module
    weight = getattr(first, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() not in (2, 4):
        return None
    if isinstance(first, nn.ConvTranspose2d):
        return inputs[0].numel() * weight[0].numel()
    return output.numel() * weight[0].numel()


def report(model, example_inputs=None):
    """The :class:`Report` of a model from :func:`qtk.quantize_qat` or :func:`qtk.prepare_ptq`.

    Args:
        model: the prepared model (its decisions are recorded when it is prepared).
        example_inputs: a tensor or tuple of tensors; given, each conv and linear layer's MACs are
            counted on a copy of the model (the model's own observers see nothing).
    """
    rows = getattr(model, "qtk_report", None)
    if rows is None:
        raise TypeError("qtk.report takes the model returned by qtk.quantize_qat or "
                        "qtk.prepare_ptq")
    rows = [dataclasses.replace(row) for row in rows]
    if example_inputs is not None:
        copied = copy.deepcopy(model).eval()
        inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
        values = run_recording(copied, inputs)
        by_name = {row.node: row for row in rows}
        for node, value in values.items():
            if node.op == "call_module" and node.target in by_name:
                inputs = [values[n] for n in node_inputs(node)]
                by_name[node.target].macs = _macs(copied.get_submodule(node.target), value,
                                                  inputs)
    return Report(rows)
