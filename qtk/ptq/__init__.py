"""Post-training quantization beyond calibration, to keep a pretrained model's decisions: cross-layer
equalization, learned weight rounding, empirical bias correction, which layers quantization hurts
and mixed precision."""
from .adaround import AdaRoundBudgetWarning, adaround
from .bias_correction import correct_biases
from .equalization import EqualizationWarning, equalize
from .mixed_precision import auto_mixed_precision
from .sensitivity import sensitivity
from .pipeline import quantize_ptq
