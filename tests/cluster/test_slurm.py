"""The Slurm recipe of docs/cluster.md, submitted with ``sbatch`` to a real Slurm (``_slurm.py``:
a controller and three CPU-only nodes, each a separate host). The batch script the test submits
is the one the page shows, byte for byte, and it runs unmodified: the sweep ends with every
trial TERMINATED, and nothing of actorrt is left running on any node after the job."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from ._slurm import SlurmCluster, slurm_cluster

pytestmark = pytest.mark.timeout(420)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "slurm" / "sweep.sbatch"
DOC = ROOT / "docs" / "cluster.md"
JOB_WITHIN = 300.0
FENCE = re.compile(r"^```[\w-]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def fenced_blocks(page: Path) -> list[str]:
    return FENCE.findall(page.read_text(encoding="utf-8"))


def test_the_page_shows_the_batch_script_it_names() -> None:
    assert SCRIPT.read_text(encoding="utf-8") in fenced_blocks(DOC)
    assert "examples/slurm/sweep.sbatch" in DOC.read_text(encoding="utf-8")


def job_env(tmp_path: Path) -> dict[str, str]:
    """The submitter's environment, as a user's shell would have it: the virtualenv's bin on
    PATH, none of this test run's actorrt settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACTORRT_", "SLURM_", "PYTEST_")) and k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env["ACTORRT_JOBS_DIR"] = str(tmp_path / "jobs")
    env["SWEEP_STORAGE"] = str(tmp_path / "results")
    return env


def submit(slurm: SlurmCluster, tmp_path: Path) -> tuple[int, str, float]:
    """``sbatch --wait`` the script; its exit code, its output and its wall time."""
    started = time.monotonic()
    done = slurm.run(
        ["sbatch", "--parsable", "--wait", f"--output={tmp_path}/slurm-%j.out", str(SCRIPT)],
        timeout=JOB_WITHIN, cwd=ROOT, env=job_env(tmp_path),
    )
    took = time.monotonic() - started
    outputs = sorted(tmp_path.glob("slurm-*.out"))
    output = outputs[-1].read_text(errors="replace") if outputs else "(no output file)"
    if done.returncode != 0:
        pytest.fail(f"the job exited {done.returncode}: {done.stderr}\n--- its output\n"
                    f"{output}\n--- Slurm's logs\n{slurm.logs()}")
    return done.returncode, output, took


def test_the_slurm_recipe_runs_a_sweep_to_its_end(tmp_path: Path) -> None:
    with slurm_cluster(tmp_path / "slurm", 3) as slurm:
        _, output, took = submit(slurm, tmp_path)
        print(f"the job took {took:.1f} s")
        assert "3 of 3 trials TERMINATED" in output, output
        assert len(re.findall(r"^trial \S+: TERMINATED", output, re.MULTILINE)) == 3, output
        # Every member joined (the head's machine and the two others) and was used.
        assert "'TRAIN_DRIVER_RESOURCE': 2.0" in output and "'CPU': 12.0" in output, output
        # The job's steps are over, and nothing they started outlives them.
        deadline = time.monotonic() + 30
        while (left := slurm.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert left == {}, left
        assert slurm.run(["squeue", "-h"]).stdout.strip() == ""
        assert list((tmp_path / "jobs").iterdir()) == []  # the job's token went with it
