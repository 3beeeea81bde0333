"""The deploy runtime from Python: ``qtk.runtime.load(path, threads=...)`` -> :class:`Session`;
``qtk.runtime.load(path, device="cuda")`` -> :class:`DeviceSession`."""
import os

import numpy as np
import torch

from . import _C

QtkError = _C.QtkError
Arena = _C.Arena  # activation memory that sessions run one after another can share


class Session:
    """A loaded ``.qmodel`` ready to run.

    Inputs may be float (numpy or torch; quantized with the model's input scale by the runtime's
    quantizer, the same rule as the QuantStub) or raw int8. Outputs are float (dequantized) or
    raw int8, as numpy arrays or torch tensors matching the input's kind.

    Args:
        model: a ``qtk._C.Model``.
        threads: worker threads; results are identical for every count.
        profile: time every node of every run (:meth:`profile`).
        arena: a shared :class:`Arena`, or None for the session's own.
        keep_intermediates: give every activation its own memory, so that :meth:`intermediates`
            returns each node's output after a run (for debugging; the results are the same).
    """

    def __init__(self, model, threads=1, profile=False, arena=None, keep_intermediates=False):
        self.model = model
        self._session = _C.Session(model, threads, profile, arena, keep_intermediates)

    @property
    def inputs(self):
        return self.model.inputs

    @property
    def outputs(self):
        return self.model.outputs

    def profile(self):
        """Per node, with ``profile=True`` at load: ``name``, ``op``, ``algorithm``, ``seconds``
        summed over ``runs``, ``macs`` (multiply-accumulates of one run, conv2d and linear), and
        the last run's ``last_start`` (seconds since the session was created) and
        ``last_seconds``, for timelines (``qtk profile``)."""
        return self._session.profile()

    def intermediates(self):
        """With ``keep_intermediates=True`` at load, after a run: ``{value name: dict}`` of the
        graph inputs and every node's outputs in execution order, each dict with ``value_id`` (the
        file's value id; values a graph pass adds, named ``"<name> (NHWC)"``, come after the
        file's), ``node`` and ``op`` (the runtime node that produced it, ``""`` for an input) and
        ``data`` (int8 or float32 numpy array, in the layout the runtime holds it). With a shared
        ``arena``, only until another session runs."""
        return {v["value"]: v for v in self._session.intermediates()}

    @property
    def algorithms(self):
        """The algorithm serving each node, in execution order."""
        return self.model.algorithms

    @property
    def arena_bytes(self):
        return self._session.arena_bytes

    @property
    def arena_lower_bound(self):
        return self._session.arena_lower_bound

    def run(self, *inputs, output="float"):
        """Run the model; returns one array/tensor per output (a list when there are several).

        Args:
            inputs: one array or tensor per model input, float32 or int8.
            output: ``"float"`` to dequantize, ``"int8"`` for the raw quantized values.
        """
        if output not in ("float", "int8"):
            raise ValueError(f"output must be 'float' or 'int8', got {output!r}")
        if len(inputs) != len(self.inputs):
            raise QtkError(f"the model takes {len(self.inputs)} input(s), got {len(inputs)}")
        as_torch = any(isinstance(x, torch.Tensor) for x in inputs)
        raw = [self._graph_input(i, x) for i, x in enumerate(inputs)]
        results = self._run_graph(raw)
        if output == "float":
            results = [self._session.dequantize_output(i, r) for i, r in enumerate(results)]
        if as_torch:
            results = [torch.from_numpy(r) for r in results]
        return results[0] if len(results) == 1 else results

    def _run_graph(self, raw):
        """The runtime's outputs for the graph inputs ``_graph_input`` made."""
        return self._session.run(raw)

    def run_image(self, image, output="float"):
        """Run a model exported with ``qtk.export(..., image=preprocess)`` on uint8 images.

        Args:
            image: uint8 ``[N, H, W, C]`` (numpy or torch), the source size and channel order
                the model was exported for; the runtime resizes, crops, reorders channels and
                normalizes exactly as the :class:`qtk.ImagePreprocess` did.
            output: ``"float"`` or ``"int8"``, as :meth:`run`.
        """
        if len(self.inputs) != 1 or self.inputs[0].get("dtype") != "uint8":
            raise QtkError(f"run_image: this model's inputs are "
                           f"{[(i['name'], i['dtype']) for i in self.inputs]}; it needs one uint8 "
                           f"image input (export with image=)")
        return self.run(image, output=output)

    def _graph_input(self, index, x):
        """What the graph takes: int8 inputs accept raw int8 or float (quantized in the run);
        float32 inputs (a model whose first part is float) take float; a uint8 image input takes
        uint8 only."""
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        x = np.asarray(x)
        info = self.inputs[index]
        if info.get("dtype") == "uint8":
            if x.dtype != np.uint8:
                raise QtkError(f"input {index} ({info['name']!r}): expected a uint8 image "
                               f"[N, {', '.join(str(d) for d in info['shape'][1:])}], got "
                               f"{x.dtype}")
            return x
        is_float = x.dtype in (np.float32, np.float64, np.float16)
        if info.get("dtype", "int8") == "float32":
            if not is_float:
                raise QtkError(f"input {index} ({info['name']!r}): expected float data, got "
                               f"{x.dtype}")
            return np.ascontiguousarray(x, dtype=np.float32)
        if x.dtype == np.int8:
            return x
        if is_float:  # quantized by the run itself, into a buffer it keeps
            return np.ascontiguousarray(x, dtype=np.float32)
        raise QtkError(f"input {index} ({info['name']!r}): expected float32 or int8 data, got "
                       f"{x.dtype}")


class DeviceSession(Session):
    """A :class:`Session` whose nodes run on a device (``docs/cuda.md``): every node on qtk's CUDA
    kernels, activations in one device arena, the outputs byte-identical to the CPU session's.
    Float inputs are quantized and outputs dequantized on the host, as a CPU session does.

    Args:
        model: a ``qtk._C.Model``.
        device: ``"cuda"`` or ``"cuda:N"`` (a qtk built with ``CMAKE_ARGS=-DQTK_CUDA=ON``), or
            ``"cuda-emulated"``: the CUDA kernels' host twins on the CPU (tests; slow).
        fast_run, fast_run_cache: as :func:`load`'s, over the device's convolutions (mma and
            dp4a), per layer and batch size, the cache keyed by the GPU's name.
    """

    def __init__(self, model, device, fast_run=None, fast_run_cache=None):
        super().__init__(model)  # its quantizer and dequantizer serve the host's side
        self._device = _C.DeviceSession(model, device, fast_run or "off",
                                        os.fspath(fast_run_cache or ""))
        # Where run_on_device's tensors live: the GPU's, or the host's for the emulated device.
        self._tensor_device = ("cpu" if device == "cuda-emulated" else
                               device if ":" in device else "cuda:0")

    def output_shapes(self, batch):
        """The graph outputs' shapes at batch size ``batch``, to allocate run_on_device's."""
        return [tuple(s) for s in self._device.output_shapes(batch)]

    def run_on_device(self, inputs, outputs):
        """Run on int8 NCHW torch tensors already in the device's memory (CUDA tensors on the
        session's GPU; CPU tensors for ``"cuda-emulated"``): ``inputs`` one per graph input,
        ``outputs`` one per graph output of :meth:`output_shapes`, which the run fills. No host
        copy. The session's kernels run on a stream of their own, so torch's current stream is
        synchronized first (the inputs written, no queued kernel still using these buffers);
        returns once the outputs are written."""
        import torch
        for kind, tensors in (("input", inputs), ("output", outputs)):
            for t in tensors:
                if not isinstance(t, torch.Tensor):
                    got = type(t).__name__
                elif (t.dtype != torch.int8 or not t.is_contiguous()
                        or str(t.device) != self._tensor_device):
                    got = (f"{t.dtype} {tuple(t.shape)} on {t.device}"
                           f"{'' if t.is_contiguous() else ', not contiguous'}")
                else:
                    continue
                raise QtkError(f"run_on_device: each {kind} must be a contiguous int8 torch "
                               f"tensor on {self._tensor_device}, got {got}")
        batch = inputs[0].shape[0] if inputs else 0
        want = self.output_shapes(batch) if batch else []
        got = [tuple(t.shape) for t in outputs]
        if got != want:
            raise QtkError(f"run_on_device: the outputs must have shapes {want} (output_shapes("
                           f"{batch})), got {got}")
        if self._tensor_device != "cpu":
            torch.cuda.current_stream(self._tensor_device).synchronize()
        self._device.run_on_device([t.data_ptr() for t in inputs],
                                   [list(t.shape) for t in inputs],
                                   [t.data_ptr() for t in outputs])

    @property
    def device_name(self):
        return self._device.device_name

    @property
    def kernels(self):
        """The device kernel serving each of the file's nodes, in order."""
        return self._device.kernels

    @property
    def algorithms(self):
        return self.kernels

    @property
    def arena_lower_bound(self):
        raise QtkError("arena_lower_bound: a DeviceSession reports its device arena only "
                       "(arena_bytes)")

    @property
    def arena_bytes(self):
        return self._device.arena_bytes

    def _run_graph(self, raw):
        """Float inputs quantized here (the session's quantizer), then the graph on the device."""
        return self._device.run([self._session.quantize_input(i, x) if x.dtype == np.float32
                                 else x for i, x in enumerate(raw)])

    def profile(self):
        raise QtkError("profile: a DeviceSession does not profile nodes yet; time whole runs")

    def intermediates(self):
        raise QtkError("intermediates: a DeviceSession keeps no intermediates; debug on the CPU "
                       "(qtk.runtime.load(..., keep_intermediates=True))")


def load(model, threads=1, fast_run=None, fast_run_cache=None, profile=False, arena=None,
         optimize_graph=True, keep_intermediates=False, device="cpu"):
    """Load a ``.qmodel`` from a path or from ``bytes`` and open a :class:`Session` on it.

    The file is validated completely before anything runs; a malformed file raises
    :class:`QtkError` naming what is wrong.

    Args:
        threads: the session's worker threads (results are identical for every count).
        fast_run: ``None`` takes each layer's first usable algorithm; ``"search"`` times every
            candidate of each layer on this machine with ``threads`` threads and keeps the
            fastest, recording it in ``fast_run_cache``; ``"use"`` takes the cache's choices
            without timing. Every algorithm gives the same bytes.
        fast_run_cache: the Fast-Run cache file (keyed by layer, threads, CPU and qtk version).
        profile: time every node of every run (:meth:`Session.profile`).
        arena: a :class:`Arena` shared with other sessions that run one after another (never at
            the same time), so their activations need the largest plan, not the sum.
        optimize_graph: run the runtime's graph passes (residual adds fused into the convs
            before them, PReLUs and luts into the adds before them, channels-last regions).
            They change no byte; ``False`` runs the file's nodes one by one.
        keep_intermediates: keep every node's output for :meth:`Session.intermediates`
            (debugging: a larger arena, the same results; ``qtk.debug`` uses it).
        device: ``"cpu"``, or a :class:`DeviceSession`'s device (``"cuda"``, ``"cuda:N"``,
            ``"cuda-emulated"``), which runs the file's own nodes: of the options above only
            ``fast_run`` and ``fast_run_cache`` apply to it (over its convolutions).
    """
    on_cpu = device == "cpu"
    options = dict(fast_run=fast_run or "off" if on_cpu else "off",
                   fast_run_cache=os.fspath(fast_run_cache or "") if on_cpu else "",
                   fast_run_threads=threads, optimize_graph=optimize_graph)
    if isinstance(model, (bytes, bytearray, memoryview)):
        loaded = _C.Model.from_bytes(bytes(model), **options)
    else:
        loaded = _C.Model.load(os.fspath(model), **options)
    if not on_cpu:
        if profile or arena is not None or keep_intermediates:
            raise QtkError(f"device {device!r}: profile, arena and keep_intermediates are CPU "
                           f"session options")
        return DeviceSession(loaded, device, fast_run, fast_run_cache)
    return Session(loaded, threads, profile, arena, keep_intermediates)
