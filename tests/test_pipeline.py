"""The whole data flow: QAT training -> convert -> export -> runtime, byte-identical, at several
batch sizes and thread counts; and the MNIST demo itself on a short schedule."""
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, reference_and_runtime


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 12, 3, padding=1, bias=False), nn.BatchNorm2d(12),
                                  nn.ReLU6())
        self.conv = nn.Conv2d(12, 12, 3, padding=1, groups=12)
        self.bn = nn.BatchNorm2d(12)
        self.add = qtk.modules.AddReLU()
        self.side = nn.Conv2d(12, 5, 1)
        self.cat = qtk.modules.Concat()
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.AvgPool2d(2), nn.Flatten(), nn.Dropout(0.2),
                                  nn.Linear(17 * 2 * 2, 10))

    def forward(self, x):
        y = self.stem(x)
        y = self.add(self.bn(self.conv(y)), y)
        y = self.pool(self.cat(y, self.side(y)))
        return self.head(y)


def _train_qat(steps=5):
    torch.manual_seed(0)
    qat = qtk.quantize_qat(TinyResNet())
    optimizer = torch.optim.SGD(qat.parameters(), lr=0.05)
    for step in range(steps):
        x = torch.randn(8, 3, 9, 9)
        loss = nn.functional.cross_entropy(qat(x), torch.randint(0, 10, (8,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return qtk.convert(qat.eval())


def test_qat_model_runs_byte_identical_at_every_batch_and_thread_count():
    quantized = _train_qat()
    for batch in (1, 4, 7):
        for threads in (1, 2):
            inputs = torch.randn(batch, 3, 9, 9)
            reference, runtime = reference_and_runtime(quantized, torch.randn(2, 3, 9, 9), inputs,
                                                       threads)
            assert torch.equal(reference, runtime), (batch, threads)
            assert_not_degenerate(reference, min_distinct=5)


def _small_quantized():
    torch.manual_seed(1)
    prepared = qtk.prepare_ptq(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()))
    qtk.calibrate(prepared, [torch.randn(2, 3, 9, 9)])
    return qtk.convert(prepared)


def test_models_run_one_after_another_share_one_arena():
    """The shared arena holds the larger plan, not the sum; results are unchanged even after a
    larger batch of one session moves the memory under the other."""
    models = [_train_qat(), _small_quantized()]
    arena = qtk.runtime.Arena()
    sessions = [qtk.runtime.load(qtk.export(m, torch.randn(1, 3, 9, 9)), arena=arena)
                for m in models]
    largest = 0
    for batch in (1, 5, 2):
        x = torch.randn(batch, 3, 9, 9)
        for session, model in zip(sessions, models):
            with qtk.int8_outputs(model):
                assert torch.equal(session.run(x, output="int8"), model(x))
        largest = max([largest] + [s.arena_bytes for s in sessions])
        assert arena.bytes == largest


def test_float_output_and_file_round_trip(tmp_path):
    quantized = _train_qat()
    path = tmp_path / "tiny.qmodel"
    qtk.export(quantized, torch.randn(1, 3, 9, 9), path)
    session = qtk.runtime.load(path, threads=2)
    x = torch.randn(3, 3, 9, 9)
    assert torch.equal(session.run(x), quantized(x))  # dequantization is part of the contract
    assert session.run(x.numpy()).dtype == x.numpy().dtype
    assert 0 < session.arena_lower_bound <= session.arena_bytes


def test_int8_input_is_taken_raw():
    quantized = _train_qat()
    session = qtk.runtime.load(qtk.export(quantized, torch.randn(1, 3, 9, 9)))
    x = torch.randn(2, 3, 9, 9)
    scale, zero_point = session.inputs[0]["scale"], session.inputs[0]["zero_point"]
    raw = qtk.arithmetic.quantize(x, scale, zero_point).to(torch.int8)
    assert torch.equal(session.run(raw, output="int8"), session.run(x, output="int8"))


def test_mnist_demo_short_schedule(tmp_path):
    from model_zoo import mnist

    result = mnist.main(["--epochs", "1", "--qat-epochs", "1", "--out", str(tmp_path / "m.qmodel")])
    assert result["identical"] == result["total"]
    assert result["runtime"] == result["quantized"]
    assert result["float"] > 80.0
