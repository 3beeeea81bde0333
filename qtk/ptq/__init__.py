"""Post-training quantization beyond calibration: which layers quantization hurts, and what to do
about it."""
from .sensitivity import sensitivity
from .mixed_precision import auto_mixed_precision
