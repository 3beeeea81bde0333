"""Module trios: Float -> QAT (fake-quantized) -> Quantized (integer reference), and the float32
runtime op of a part kept in float.

Each op family's file declares all four forms; they register themselves as the file is imported
here (a QAT class by declaring ``FLOAT_TYPES``, a Quantized one by ``SOURCE_TYPES``, a float op by
``@float_export``), and the conversion maps below are derived from those registries.
"""
from .activation import (QATPReLU, QATRPReLU, QATSoftmax, QATTableFunction, QuantizedClamp,
                         QuantizedLookupTable, QuantizedPReLU, QuantizedSoftmax, RPReLU,
                         reader_bounds)
from .base import (FLOAT_EXPORTS, QAT_MODULES, QUANTIZED_MODULES, QATModule, QModelOp, QParams,
                   QuantizedModule)
from .conv import (ConvBn2d, ConvBnReLU2d, ConvReLU2d, QATConv2d, QATConvBn2d, QATConvTranspose2d,
                   QuantizedConv2d, QuantizedConvTranspose2d)
from .elementwise import (Add, AddReLU, Concat, Div, Mul, QATAdd, QATConcat, QATMul,
                          QATWithConstant, QuantizedAdd, QuantizedConcat, QuantizedMul,
                          QuantizedWithConstant, Sub, TensorExpression, WithConstant)
from .linear import LinearReLU, QATLinear, QuantizedLinear
from .matmul import MatMul, QATMatMul, QuantizedMatMul
from . import attention  # noqa: F401  (registers its float32 op)
from .normalization import (L2Normalize, QATL2Normalize, QATNorm, QuantizedL2Normalize,
                            QuantizedNorm)
from .pooling import (QuantizedAdaptiveAvgPool2d, QuantizedAdaptiveMaxPool2d, QuantizedAvgPool2d,
                      QuantizedMaxPool2d, SpatialMean)
from .resize import (QATResizeBilinear, QuantizedPad, QuantizedResizeBilinear,
                     QuantizedResizeNearest, UpsampleTo)
from .shape import ExpandBatch, QuantizedFlatten, QuantizedIdentity
from .stubs import (DequantStub, QATDequantStub, QATQuantStub, QuantizedDequantStub,
                    QuantizedQuantStub, QuantStub)


def _type_map(classes, attribute):
    return {source: cls for cls in classes for source in getattr(cls, attribute)}


FLOAT_TO_QAT = _type_map(QAT_MODULES, "FLOAT_TYPES")
TO_QUANTIZED = _type_map(QUANTIZED_MODULES, "SOURCE_TYPES")

# Float modules that QAT leaves as they are: their output keeps their input's quantization.
PASS_THROUGH = tuple(t for t in TO_QUANTIZED if not issubclass(t, QATModule))


__all__ = ["QuantStub", "DequantStub", "ConvBn2d", "ConvBnReLU2d", "ConvReLU2d", "LinearReLU",
           "Add", "AddReLU", "Mul", "Sub", "Div", "WithConstant", "MatMul", "ExpandBatch", "UpsampleTo", "Concat",
           "SpatialMean", "QParams", "QModelOp", "QATModule", "QuantizedModule",
           "QAT_MODULES", "QUANTIZED_MODULES", "FLOAT_EXPORTS", "FLOAT_TO_QAT", "TO_QUANTIZED", "PASS_THROUGH"]
