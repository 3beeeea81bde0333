"""qtk: quantization-aware training and post-training quantization with a bit-exact deploy runtime.

    qat = qtk.quantize_qat(model)          # train as usual
    q = qtk.convert(qat)                   # the integer reference
    qtk.export(q, example, "m.qmodel")
    out = qtk.runtime.load("m.qmodel").run(x)   # identical int8 results
"""
from . import arithmetic, modules, observers, fake_quant
from . import ptq
from .errors import UnsupportedOpError
from .export.exporter import export
from .fake_quant import BinaryFakeQuantize, clip_latent_weights
from .export.onnx_export import export_onnx
from .preprocess import ImagePreprocess
from .ptq import auto_mixed_precision, quantize_ptq
from .qconfig import (PRESETS, QConfig, QConfigMapping, default_ptq_qconfig, default_qat_qconfig,
                      bits_qconfig, bits_qconfig_mapping, per_channel_activations, with_args)
from .quantization_report import Report, report
from .quantize import (FloatFallbackWarning, calibrate, convert, distillation_loss,
                       freeze_bn_stats, int8_outputs, prepare_ptq, quantize_qat)
from .version import __version__


def __getattr__(name):
    # The runtime needs the compiled extension; import it on first use so that training-only
    # code paths work while the extension builds.
    if name in ("runtime", "QtkError"):
        import importlib

        runtime = importlib.import_module(".runtime", __name__)
        return runtime if name == "runtime" else runtime.QtkError
    raise AttributeError(f"module 'qtk' has no attribute {name!r}")


__all__ = ["quantize_qat", "prepare_ptq", "calibrate", "convert", "export", "export_onnx",
           "freeze_bn_stats", "distillation_loss", "int8_outputs", "ImagePreprocess", "report",
           "Report",
           "auto_mixed_precision", "quantize_ptq", "BinaryFakeQuantize", "clip_latent_weights",
           "FloatFallbackWarning",
           "QConfig", "QConfigMapping", "PRESETS", "bits_qconfig", "bits_qconfig_mapping",
           "per_channel_activations",
           "default_qat_qconfig", "default_ptq_qconfig", "with_args", "runtime",
           "QtkError", "UnsupportedOpError", "arithmetic", "modules", "observers", "fake_quant",
           "ptq", "__version__"]
