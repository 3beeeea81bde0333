"""Shared helpers: quantize a float model by PTQ or QAT, export it, run it in the runtime."""
import numpy as np
import pytest
import torch

import qtk


def calibrated(float_model, calibration_batches):
    """PTQ: prepare, run the calibration batches, convert."""
    prepared = qtk.prepare_ptq(float_model)
    with torch.no_grad():
        for batch in calibration_batches:
            prepared(batch)
    return qtk.convert(prepared)


def reference_and_runtime(quantized, example, inputs, threads=1):
    """(reference int8 output, runtime int8 output) for ``inputs`` through an exported model."""
    session = qtk.runtime.load(qtk.export(quantized, example), threads=threads)
    with qtk.int8_outputs(quantized), torch.no_grad():
        reference = quantized(inputs)
    return reference, session.run(inputs, output="int8")


def assert_not_degenerate(values, min_distinct=2):
    distinct = torch.unique(torch.as_tensor(values)).numel()
    assert distinct >= min_distinct, f"output is degenerate: only {distinct} distinct int8 values"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    np.random.seed(0)
