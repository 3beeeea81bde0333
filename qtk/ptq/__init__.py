"""Post-training quantization beyond calibration: keeping a pretrained model's decisions."""
from .adaround import adaround
from .equalization import EqualizationWarning, equalize
