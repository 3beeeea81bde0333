"""Post-training quantization beyond calibration: keeping a pretrained model's decisions."""
from .equalization import EqualizationWarning, equalize
