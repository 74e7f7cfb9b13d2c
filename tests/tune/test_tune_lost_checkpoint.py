"""A retry completes whatever a lost attempt left on disk.

An attempt whose worker process dies after it saved a checkpoint into the trial folder but
before its report reached the controller leaves a checkpoint folder that no one recorded,
under the index the retry writes next. The retry owns that index: it never fails on the
leftover, never loses a checkpoint that was reported, and never mixes the lost attempt's
files into its own.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import tune

ITERATIONS = 6
LOST_AT = 3  # the first attempt saves checkpoint_000003, then dies before reporting it


def train(config: dict[str, Any]) -> None:
    marks = config["marks"]
    with open(os.path.join(marks, "starts"), "a") as f:
        f.write(f"{os.getpid()}\n")
    with open(os.path.join(marks, "starts")) as f:
        attempt = len(f.read().split())
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"] + 1
    if attempt == 1:
        # The process dies right after the checkpoint is in the trial folder, before its
        # report leaves: SIGKILL, as the kernel or a node agent would.
        from actorrt.tune import context as _session

        send = _session.Session.send

        def die_before_reporting(self: Any, metrics: Any, path: str | None) -> str:
            if path is not None and os.path.basename(path) == f"checkpoint_{LOST_AT:06d}":
                os.kill(os.getpid(), 9)
            return send(self, metrics, path)

        _session.Session.send = die_before_reporting  # type: ignore[method-assign]
    for i in range(start, ITERATIONS):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"i": i, "attempt": attempt}, f)
            tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))


def states(trial_dir: str) -> dict[str, dict[str, int]]:
    out = {}
    for name in sorted(os.listdir(trial_dir)):
        if name.startswith("checkpoint_"):
            with open(os.path.join(trial_dir, name, "state.json")) as f:
                out[name] = json.load(f)
    return out


def reported_checkpoints(trial_dir: str) -> list[str | None]:
    with open(os.path.join(trial_dir, "result.json")) as f:
        return [json.loads(line).get("checkpoint_dir_name") for line in f]


@pytest.mark.actorrt(num_cpus=2)
async def test_a_retry_replaces_the_checkpoint_a_killed_attempt_never_reported(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    tuner = tune.Tuner(
        train,
        param_space={"marks": str(marks)},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="exp", verbose=0,
            failure_config=tune.FailureConfig(max_failures=2),
        ),
    )  # fmt: skip
    grid = await tuner.fit_async()
    assert not grid.errors, grid.errors[0]
    result = grid[0]
    assert len((marks / "starts").read_text().split()) == 2  # one lost attempt, one retry
    assert result.metrics["i"] == ITERATIONS - 1
    assert result.checkpoint is not None
    found = states(result.path)
    # Every checkpoint is one that was reported; those after the loss are the retry's own.
    assert list(found.values()) == [
        {"i": i, "attempt": 1 if i < LOST_AT else 2} for i in range(ITERATIONS)
    ], found
    assert os.path.basename(result.checkpoint.path) == f"checkpoint_{ITERATIONS - 1:06d}"
    assert reported_checkpoints(result.path) == list(found)
