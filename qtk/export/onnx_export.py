"""qtk.export_onnx: a Quantized model as an ONNX graph, in one of two forms (docs/onnx.md):
``"qdq"`` (:mod:`.onnx_qdq`), what other ONNX tools and accelerators understand, within one int8
step of qtk per op; ``"integer"`` (:mod:`.onnx_integer`), qtk's arithmetic in ONNX integer ops,
byte-identical to qtk in ONNX Runtime."""
from .. import modules
from .exporter import _as_tuple, _graph_to_export, build_writer
from .onnx_integer import IntegerGraph
from .onnx_qdq import QdqGraph

FORMS = {"qdq": QdqGraph, "integer": IntegerGraph}


def export_onnx(model, example_inputs, path=None, dynamic_batch=True, form="qdq"):
    """Write a Quantized model (from :func:`qtk.convert`) as an ONNX model.

    Args:
        model: the converted model; every op must be int8 (a part kept in float is refused).
        example_inputs: a float tensor (or tuple of them) of the input shape.
        path: file to write; when ``None`` only the ``onnx.ModelProto`` is returned.
        dynamic_batch: make dim 0 of inputs and outputs a symbolic batch size.
        form: ``"qdq"`` (``QuantizeLinear``/``DequantizeLinear`` around float ops: for ONNX tools
            and accelerators; within one step of qtk per op) or ``"integer"`` (``ConvInteger``,
            ``MatMulInteger`` and int64 requantization: byte-identical to qtk in ONNX Runtime).
    Returns:
        the ``onnx.ModelProto``. Its outputs are int8, the values the qtk runtime returns with
        ``output="int8"``.
    Raises:
        UnsupportedOpError: for an op with no ONNX mapping in that form, naming it and the way out.
    """
    import onnx

    if form not in FORMS:
        raise ValueError(f"export_onnx(form={form!r}): the forms are {', '.join(FORMS)}")
    if not any(isinstance(m, modules.QuantizedModule) for m in model.modules()):
        raise TypeError("export_onnx() takes the model returned by qtk.convert; to run a float "
                        "model in ONNX, use torch.onnx.export")
    model = _graph_to_export(model)
    writer = build_writer(model, _as_tuple(example_inputs))
    graph = FORMS[form](writer, model, dynamic_batch)
    for node in writer.nodes:
        graph.add(node)
    proto = graph.to_model()
    onnx.checker.check_model(proto)
    if path is not None:
        onnx.save(proto, path)
    return proto
