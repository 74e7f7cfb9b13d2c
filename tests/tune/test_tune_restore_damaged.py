"""Tuner.restore from a damaged journal keeps what the trial folders hold; the journal is
made durable where it matters, and an unreadable one is reported by file and line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune._controller import _experiment_state

ITERATIONS = 3


def work(config: dict[str, Any]) -> None:
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"] + 1
    with open(os.path.join(config["marks"], f"{config['x']}.starts"), "a") as f:
        f.write(f"{start}\n")
    for i in range(start, ITERATIONS):
        if not config["checkpoints"]:
            tune.report({"i": i, "x": config["x"]})
            continue
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"i": i}, f)
            tune.report({"i": i, "x": config["x"]}, checkpoint=tune.Checkpoint.from_directory(d))


def starts(marks: Path) -> dict[int, list[int]]:
    return {
        int(p.name.split(".")[0]): [int(s) for s in p.read_text().split()]
        for p in marks.glob("*.starts")
    }


def folder_state(grid: tune.ResultGrid) -> dict[int, tuple[str, list[str]]]:
    out = {}
    for r in grid:
        with open(os.path.join(r.path, "result.json")) as f:
            results = f.read()
        checkpoints = sorted(n for n in os.listdir(r.path) if n.startswith("checkpoint_"))
        out[r.config["x"]] = (results, checkpoints)
    return out


@pytest.mark.parametrize("damage", ["empty journal", "header-only journal"])
@pytest.mark.actorrt(num_cpus=2)
async def test_restore_from_a_damaged_journal_keeps_results_and_checkpoints(
    actorrt_runtime: actorrt.Runtime,
    tmp_path: Path,
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    space = {
        "x": tune.grid_search([1, 2, 3, 4]),
        "checkpoints": tune.sample_from(lambda spec: spec.config["x"] <= 2),
        "marks": str(marks),
    }
    grid = await tune.Tuner(
        work,
        param_space=space,
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit_async()
    assert not grid.errors
    before = folder_state(grid)
    assert all(len(before[x][1]) == ITERATIONS for x in (1, 2))  # checkpoints were kept
    journal = Path(grid.experiment_path) / "experiment_state.jsonl"
    first = journal.read_text().splitlines()[0]
    journal.write_text("" if damage == "empty journal" else first + "\n")
    leftover = Path(grid[0].path) / "checkpoint_000007.tmp"  # a copy cut off by a crash
    leftover.mkdir()
    (leftover / "half").write_text("x")
    started = starts(marks)

    with caplog.at_level(logging.WARNING, logger="actorrt.tune"):
        again = await tune.Tuner.restore(grid.experiment_path, work).fit_async()

    assert "recovered from their files" in caplog.text
    assert not again.errors and [r.status for r in again] == ["TERMINATED"] * 4
    assert sorted(r.trial_id for r in again) == sorted(r.trial_id for r in grid)
    assert folder_state(again) == before  # nothing re-run, nothing lost
    assert {r.config["x"]: r.metrics["i"] for r in again} == {1: 2, 2: 2, 3: 2, 4: 2}
    after = starts(marks)
    for x in (1, 2):  # resumed from their last checkpoint: no iteration runs again
        assert after[x][len(started[x]):] == [ITERATIONS]
    for x in (3, 4):  # no checkpoint: kept as they were
        assert after[x] == started[x]
    assert not leftover.exists()


@pytest.mark.actorrt(num_cpus=2)
async def test_trial_ends_and_checkpoints_are_fsynced_and_a_bad_journal_names_its_line(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("experiment_state.jsonl"):
            synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(_experiment_state.os, "fsync", fsync)
    marks = tmp_path / "marks"
    marks.mkdir()
    grid = await tune.Tuner(
        work,
        param_space={"x": tune.grid_search([1, 2]), "checkpoints": True, "marks": str(marks)},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit_async()
    # 2 trial ends + 2 x 3 checkpoints, each synced when written (and once at the close).
    assert len(synced) >= 2 + 2 * ITERATIONS
    journal = Path(grid.experiment_path) / "experiment_state.jsonl"
    lines = journal.read_bytes().split(b"\n")
    lines[1] = b'{"event": "trial", "name": "caf\xe9"}'  # latin-1, not UTF-8
    journal.write_bytes(b"\n".join(lines))
    with pytest.raises(ValueError) as err:
        tune.Tuner.restore(grid.experiment_path, work)
    assert str(journal) in str(err.value) and "line 2 is not UTF-8" in str(err.value)


def cut_off(experiment: str, trial_dir: str) -> Path:
    """The folder as a kill mid-write leaves it: the trial's end and the run's finish never
    recorded, its last result half written, and (damage from outside) its latest
    checkpoint folder replaced by a file. Return that file."""
    journal = Path(experiment, _experiment_state.JOURNAL_FILE)
    kept = [
        line for line in journal.read_text().splitlines()
        if json.loads(line)["event"] not in ("end", "finished")
    ]  # fmt: skip
    journal.write_text("\n".join(kept) + "\n")
    with open(os.path.join(trial_dir, "result.json"), "a") as f:
        f.write('{"i": 99, "x": ')
    latest = Path(trial_dir, f"checkpoint_{ITERATIONS - 1:06d}")
    for name in os.listdir(latest):
        os.remove(latest / name)
    latest.rmdir()
    latest.write_text("not a checkpoint")
    return latest


@pytest.mark.actorrt(num_cpus=2)
async def test_a_torn_result_and_a_checkpoint_replaced_by_a_file_are_named_at_restore(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    grid = await tune.Tuner(
        work,
        param_space={"marks": str(marks), "x": 0, "checkpoints": True},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit_async()
    trial_dir = grid[0].path
    latest = await asyncio.to_thread(cut_off, grid.experiment_path, trial_dir)
    with caplog.at_level(logging.WARNING, logger="actorrt.tune"):
        restored = await tune.Tuner.restore(grid.experiment_path, work).fit_async()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    result_log = os.path.join(trial_dir, "result.json")
    assert any(result_log in w and "cut short" in w for w in warnings), warnings
    assert any(str(latest) in w and "is not a folder" in w for w in warnings), warnings
    assert not restored.errors
    # It resumed from the checkpoint before the damaged one, and finished.
    assert starts(marks) == {0: [0, ITERATIONS - 1]}
    assert restored[0].metrics["i"] == ITERATIONS - 1
