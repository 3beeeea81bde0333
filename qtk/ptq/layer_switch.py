"""One prepared and calibrated model whose layers are switched between float and fake-quantized:
what :func:`qtk.prepare_ptq` with a QConfigMapping that keeps some layers float gives, without
preparing and calibrating again for each choice (``qtk.ptq.sensitivity``,
``qtk.auto_mixed_precision``)."""
import torch
from torch import fx, nn

from ..graph.capture import node_inputs, replace_submodule
from ..graph.functional import FLOAT_CALL
from ..modules import PASS_THROUGH, QATDequantStub, QATModule, QATQuantStub, QuantStub
from ..fake_quant import FakeQuantize
from ..quantize import bound_observer, calibrate, prepare_ptq, readers_saturation

FLOAT = "float"  # the source of a value that is float whichever layers are quantized


def quantizable_layers(prepared):
    """(node, module) of each call that a QConfigMapping can switch by the node's target and that
    quantizes its own output: the QAT modules, not the stubs, nor the ops that keep their input's
    quantization."""
    layers = []
    for node in prepared.graph.nodes:
        if node.op == "call_module":
            module = prepared.get_submodule(node.target)
            if (isinstance(module, QATModule) and not isinstance(module, QATQuantStub)
                    and hasattr(module, "activation_post_process")):
                layers.append((node, module))
    return layers


def set_fake_quant(modules, observe, fake_quantize):
    """Every fake quantizer among ``modules`` observes (or not) and fake-quantizes (or not)."""
    for module in modules:
        if isinstance(module, FakeQuantize):
            module.observer_enabled, module.fake_quant_enabled = observe, fake_quantize


class LayerInputs(nn.Module):
    """A layer's input quantizers, one per input node: prepare puts a quantize stub with the
    layer's qconfig on an input whose producer is float (after any pooling, ReLU or reshape that
    stays float with it), and these stand for it; each sees the float values reaching the layer.

    Args:
        node: the layer's call in the prepared graph.
        qconfig: the layer's :class:`qtk.QConfig`.
        sources: for each of the node's inputs, the layer it carries (see ``LayerSwitch``),
            ``FLOAT``, or None where it is int8 in every choice.
        bounds: for each input, the (floor, ceiling) its readers' saturation allows, or None:
            prepare bounds the stub it puts there alike (``docs/quantizers.md``, reader bounds;
            where a reader stays float in a choice, prepare's stub has fewer readers and may be
            bounded where this is not).
    """

    def __init__(self, node, qconfig, sources, bounds):
        super().__init__()
        self.args = node.args
        self.inputs = node_inputs(node)
        self.sources = sources
        self.quantizers = nn.ModuleList(qconfig.activation() for _ in self.inputs)
        for quantizer, input_bounds in zip(self.quantizers, bounds):
            bound_observer(quantizer, input_bounds)

    def crossing(self, float_layers):
        """The quantizers on inputs that cross from float to this layer, int8."""
        return [quantizer for quantizer, source in zip(self.quantizers, self.sources)
                if source == FLOAT or source in float_layers]

    def forward(self, args):
        return self._quantize(self.args, args)

    def _quantize(self, node_args, args):
        """``args`` with the value of each input node quantized by that node's quantizer (the
        call's arguments and ``args`` have the same nesting)."""
        if isinstance(node_args, fx.Node):
            if (node_args in self.inputs and isinstance(args, torch.Tensor)
                    and args.is_floating_point()):
                return self.quantizers[self.inputs.index(node_args)](args)
            return args
        if isinstance(node_args, (tuple, list)):
            return type(args)(self._quantize(n, a) for n, a in zip(node_args, args))
        return args


class LayerSwitch:
    """``model`` prepared with every layer at ``qconfig`` plus each layer's input quantizers,
    calibrated once on ``inputs`` with fake quantization off (so every observer sees the float
    model's values, as in any PTQ calibration); :meth:`use` then chooses which layers are float.

    Args:
        model: a trained float ``nn.Module`` in eval mode (prepare copies it).
        qconfig: the :class:`qtk.QConfig` of every quantized layer.
        inputs: calibration batches (tensors).
        method: the calibration method (:func:`qtk.calibrate`).
    """

    def __init__(self, model, qconfig, inputs, method=None):
        self.prepared = prepare_ptq(model, qconfig)
        self.nodes = {node.target: node for node, _ in quantizable_layers(self.prepared)}
        self.layers = {name: self.prepared.get_submodule(name) for name in self.nodes}
        user_stubs = {name for name, module in model.named_modules()
                      if isinstance(module, QuantStub)}
        self.inserted_stubs = [  # float in every choice: the input quantizers stand for them
            self.prepared.get_submodule(node.target) for node in self.prepared.graph.nodes
            if node.op == "call_module" and node.target not in user_stubs
            and isinstance(self.prepared.get_submodule(node.target), QATQuantStub)]
        self.inputs = {
            name: LayerInputs(node, qconfig, [self._source(n) for n in node_inputs(node)],
                              [readers_saturation(self.prepared, n) for n in node_inputs(node)])
            for name, node in self.nodes.items()}
        self.prepared.layer_inputs = nn.ModuleList(self.inputs.values())  # calibrate sets them
        for name, layer in self.layers.items():
            layer.register_forward_pre_hook(lambda _, args, inputs=self.inputs[name]: inputs(args))
        set_fake_quant(self.prepared.modules(), observe=True, fake_quantize=False)
        calibrate(self.prepared, inputs, method=method)
        set_fake_quant(self.prepared.modules(), observe=False, fake_quantize=True)
        for stub in self.inserted_stubs:
            set_fake_quant(stub.modules(), observe=False, fake_quantize=False)

    def _source(self, node):
        """The layer whose output ``node`` carries, through the ops that follow their input's
        precision (pooling, ReLU, reshapes); ``FLOAT`` for a graph input or a float op's output;
        None for a value int8 in every choice (the user's QuantStub, a QAT module that is not a
        switched layer)."""
        while True:
            if node.op == "call_module":
                module = self.prepared.get_submodule(node.target)
                if node.target in self.nodes:
                    return node.target
                if isinstance(module, QATQuantStub):
                    return FLOAT if module in self.inserted_stubs else None
                if isinstance(module, QATModule) and not isinstance(module, QATDequantStub):
                    return None
                if not isinstance(module, PASS_THROUGH):
                    return FLOAT
            elif node.op not in ("call_function", "call_method") or FLOAT_CALL in node.meta:
                return FLOAT
            inputs = node_inputs(node)
            if not inputs:
                return FLOAT
            node = inputs[0]

    def use(self, float_layers=(), other=None, from_other=()):
        """Fake-quantize every layer but ``float_layers``, with the input quantizers prepare
        would add where a quantized layer reads a float one; the layers ``from_other`` are taken
        (with their input quantizers) from ``other``, a LayerSwitch of the same model at another
        QConfig. Returns the model to run."""
        for name in self.layers:
            switch = other if name in from_other else self
            layer, inputs = switch.layers[name], switch.inputs[name]
            replace_submodule(self.prepared, name, layer)
            quantized = name not in float_layers
            set_fake_quant(layer.modules(), observe=False, fake_quantize=quantized)
            set_fake_quant(inputs.quantizers, observe=False, fake_quantize=False)
            if quantized:
                set_fake_quant(inputs.crossing(float_layers), observe=False, fake_quantize=True)
        return self.prepared
