"""The model as a graph, before any quantization: torch.fx capture, functional calls turned into
modules, and the fusion of conv-bn-relu style patterns. quantize.py runs these first."""
