"""`pip wheel .` builds a wheel that carries the runtime (qtk._C): installed in a fresh venv, away
from the source tree, it loads a model exported here and gives this checkout's output bytes."""
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate, calibrated

ROOT = Path(__file__).resolve().parents[1]

SMOKE = """
import sys
import numpy as np
import qtk
assert "{root}" not in qtk.__file__, qtk.__file__
session = qtk.runtime.load(sys.argv[1], threads=2)
np.save(sys.argv[3], session.run(np.load(sys.argv[2]), output="int8")[0])
"""


def _run(command, cwd=None):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_wheel_installs_in_a_fresh_venv_and_runs_a_model(tmp_path):
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "-w", wheels])
    (wheel,) = wheels.glob("qtk-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("qtk/_C") for n in names), "the wheel lacks the runtime (qtk/_C)"

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    model.train()(torch.randn(16, 3, 12, 12))  # BatchNorm statistics from data, not the init
    quantized = calibrated(model.eval(), [torch.randn(8, 3, 12, 12)])
    x = torch.randn(4, 3, 12, 12)
    path = tmp_path / "m.qmodel"
    qtk.export(quantized, x[:1], path)
    want = qtk.runtime.load(path).run(x, output="int8")[0]
    assert_not_degenerate(want)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])
    _run([venv / "bin" / "pip", "install", wheel])
    np.save(tmp_path / "x.npy", x.numpy())
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE.format(root=ROOT))
    _run([venv / "bin" / "python", script, path, tmp_path / "x.npy", tmp_path / "y.npy"],
         cwd=tmp_path)
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.asarray(want))
