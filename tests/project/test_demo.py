"""The demo job, run as a new user runs it: a real sweep in a subprocess."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = [sys.executable, "-m", "actorrt.examples.digits"]


def run_demo(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*DEMO, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


@pytest.mark.timeout(300)
def test_the_demo_sweeps_prints_the_best_trial_and_plots_every_curve(tmp_path: Path) -> None:
    done = run_demo(
        "--trials", "2", "--epochs", "3", "--num-cpus", "2", "--storage", str(tmp_path)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    best = re.search(r"best: accuracy (\d\.\d+) with \{'lr'", out)
    assert best is not None, out
    assert float(best.group(1)) > 0.5, out  # ten classes: chance is 0.1
    # Every trial shows its reported epochs: the trainer's reports reached Tune.
    rows = re.findall(r"^(\w+_\d{5})\s+(\d\.\d+)\s+(\d+)\s+(done|stopped early)", out, re.M)
    assert len(rows) == 2, out
    assert all(1 <= int(epochs) <= 3 for _, _, epochs, _ in rows), rows
    folder = re.search(r"experiment folder: (\S+)", out)
    assert folder is not None and folder.group(1).startswith(str(tmp_path)), out
    png = Path(folder.group(1)) / "learning_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2 trials at once" in out


def test_bad_flags_are_refused_with_the_value() -> None:
    done = run_demo("--trials", "0", timeout=60)
    assert done.returncode == 2
    assert "--trials must be at least 1, got 0" in done.stderr
