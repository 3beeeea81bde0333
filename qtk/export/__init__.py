"""The last step: a Quantized (or float) model written as a .qmodel for the runtime."""
