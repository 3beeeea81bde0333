"""QAT under DistributedDataParallel (gloo, CPU, 2 ranks on this machine): observer statistics and
learned scales stay identical on every rank at every step; a checkpoint saved mid-training and
resumed gives exactly what training straight through gives."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import qtk
from qtk.fake_quant import FakeQuantize, LSQFakeQuantize
from qtk.observers import HistogramObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver
from qtk.qconfig import with_args

STEPS = 4
LSQ_QCONFIG = qtk.QConfig(
    activation=with_args(LSQFakeQuantize, observer=MovingAverageMinMaxObserver),
    weight=with_args(LSQFakeQuantize, observer=with_args(
        PerChannelMinMaxObserver, qmin=-127, qmax=127, symmetric=True, averaging_constant=1.0)))

HISTOGRAM_QCONFIG = qtk.QConfig(
    activation=with_args(FakeQuantize, observer=with_args(HistogramObserver, method="mse",
                                                          bins=256, candidates=8)),
    weight=qtk.default_qat_qconfig.weight)


def _model():
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))


def _quantization_state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()
            if any(part in k for part in ("observer", "scale", "zero_point"))}


def _qat_model(qconfig=LSQ_QCONFIG):
    torch.manual_seed(0)
    qat = qtk.quantize_qat(_model(), qconfig).train()
    qat(torch.zeros(2, 1, 6, 6) + torch.linspace(-1, 1, 36).reshape(1, 1, 6, 6))  # init ranges
    return qat


def _batch(step, rank):
    generator = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(4, 1, 6, 6, generator=generator) * (1 + rank), torch.randint(
        0, 3, (4,), generator=generator)


def _rank_main(rank, world_size, port, qconfig, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(_qat_model(qconfig))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    states = []
    for step in range(STEPS):
        x, y = _batch(step, rank)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        states.append(_quantization_state(model.module))
    results[rank] = states
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("qconfig", [qtk.default_qat_qconfig, LSQ_QCONFIG, HISTOGRAM_QCONFIG],
                         ids=["observers", "lsq", "histogram"])
def test_two_ranks_keep_identical_quantization_parameters(qconfig):
    results = mp.Manager().dict()
    mp.spawn(_rank_main, args=(2, _free_port(), qconfig, results), nprocs=2, join=True)
    for step in range(STEPS):
        rank0, rank1 = results[0][step], results[1][step]
        assert rank0.keys() == rank1.keys() and rank0
        for key in rank0:
            assert torch.equal(rank0[key], rank1[key]), f"step {step}: {key} differs across ranks"


def _train(model, optimizer, steps):
    for step in steps:
        x, y = _batch(step, 0)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_checkpoint_resume_equals_training_straight_through(tmp_path):
    straight = _qat_model()
    straight_optimizer = torch.optim.Adam(straight.parameters(), lr=1e-2)
    _train(straight, straight_optimizer, range(STEPS))

    first = _qat_model()
    first_optimizer = torch.optim.Adam(first.parameters(), lr=1e-2)
    _train(first, first_optimizer, range(STEPS // 2))
    torch.save({"model": first.state_dict(), "optimizer": first_optimizer.state_dict()},
               tmp_path / "qat.pt")

    resumed = qtk.quantize_qat(_model(), LSQ_QCONFIG).train()
    checkpoint = torch.load(tmp_path / "qat.pt")
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer = torch.optim.Adam(resumed.parameters(), lr=1e-2)
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    _train(resumed, resumed_optimizer, range(STEPS // 2, STEPS))

    expected, actual = straight.state_dict(), resumed.state_dict()
    assert expected.keys() == actual.keys()
    for key in expected:
        assert torch.equal(expected[key], actual[key]), f"{key} differs after resuming"
