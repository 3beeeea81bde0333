"""Real models unchanged: torchvision classifiers go through QAT -> convert -> export -> runtime
byte-identical, at 224x224, batch 1 and 4, with outputs far from degenerate.

Random weights make deep nets degenerate, so BatchNorm statistics are re-estimated on random data
first (train-mode forward with momentum=None, a cumulative average) and the test asserts many
distinct int8 output values.
"""
import pytest
import torch
import torchvision
from torch import nn

import qtk
from conftest import assert_not_degenerate
from model_zoo.training import reestimate_batchnorm

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def qat_convert(model, size, steps=2):
    reestimate_batchnorm(model, (4, 3, size, size))
    qat = qtk.quantize_qat(model).train()
    optimizer = torch.optim.SGD(qat.parameters(), lr=1e-4, momentum=0.9)
    for _ in range(steps):
        logits = qat(torch.randn(2, 3, size, size))
        loss = nn.functional.cross_entropy(logits, torch.randint(0, logits.shape[1], (2,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return qtk.convert(qat.eval())


def check_byte_identical(quantized, size, batches):
    """Runtime (its graph passes on, as users run it) against the Quantized reference."""
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, size, size)), threads=2)
    compared = 0
    for batch in batches:
        x = torch.randn(batch, 3, size, size)
        with qtk.int8_outputs(quantized), torch.no_grad():
            reference = quantized(x)
        runtime = session.run(x, output="int8")
        assert torch.equal(reference, runtime), f"batch {batch}: runtime differs from reference"
        assert_not_degenerate(reference, min_distinct=32)
        compared += batch
    return compared


@pytest.mark.parametrize("name", ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small",
                                  "shufflenet_v2_x1_0"])
def test_torchvision_model_at_224_is_byte_identical(name):
    torch.manual_seed(0)
    quantized = qat_convert(getattr(torchvision.models, name)(), 224)
    assert check_byte_identical(quantized, 224, batches=[1, 1, 1, 1, 4]) >= 8


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_residual_adds_fuse_into_convs(name):
    """Every residual add of these models becomes its conv's epilogue (the runtime's graph pass);
    the test above holds the fused model byte-identical. (The layout pass may add permutes at the
    edges of its channels-last convs, where the CPU has those kernels.)"""
    torch.manual_seed(0)
    quantized = qat_convert(getattr(torchvision.models, name)(num_classes=10), 32, steps=1)
    qmodel = qtk.export(quantized, torch.randn(1, 3, 32, 32))
    unfused = qtk.runtime.load(qmodel, optimize_graph=False).model.op_names
    fused = [op for op in qtk.runtime.load(qmodel).model.op_names if op != "permute"]
    assert unfused.count("add") > 0 and "add" not in fused
    assert len(fused) == len(unfused) - unfused.count("add")


@pytest.mark.parametrize("name", ["mobilenet_v3_large", "mnasnet0_5", "regnet_x_400mf",
                                  "efficientnet_b0", "densenet121"])
def test_other_torchvision_models_need_no_model_specific_code(name):
    """Any classifier built from supported ops works the same way (smaller input to stay fast)."""
    torch.manual_seed(0)
    quantized = qat_convert(getattr(torchvision.models, name)(num_classes=100), 96, steps=1)
    check_byte_identical(quantized, 96, batches=[1, 3])


@pytest.mark.parametrize("name, result", [
    ("vit_b_16", "byte-identical"), ("swin_t", "byte-identical"),
    ("convnext_tiny", "byte-identical"), ("maxvit_t", "byte-identical"),
    ("swin_v2_t", "byte-identical"),  # cosine attention: int8 L2 norm and logit scale
    ("deeplabv3_mobilenet_v3_large", "byte-identical"),
    ("ssdlite320_mobilenet_v3_large", "byte-identical"),  # the detector's backbone and head
])
def test_one_model_per_family_deploys_as_the_coverage_table_says(name, result):
    """docs/coverage.md's pipeline (model_zoo/coverage.py: PTQ with default settings, export,
    runtime, non-degenerate outputs) for one transformer, ConvNeXt, segmentation and detection
    model each, with every conv, linear and matmul in int8."""
    from model_zoo.coverage import run
    row = {"status": "", "share": None, "size": None}
    run(name, row)
    assert row["status"].startswith(result), row["status"]
    assert row["share"] == 1.0
