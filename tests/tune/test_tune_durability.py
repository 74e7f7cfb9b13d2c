"""What a crash may lose (docs/tune.md): result lines are written off the event loop in
batches, at most ``FLUSH_S`` after they were reported; a trial's end reaches the journal
only after its results reach its files; a driver killed mid-sweep loses at most the results
of its last moment, and ``Tuner.restore`` finishes the sweep with every result once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest
from conftest import eventually, restore_in_process, wait_until

from actorrt.tune._controller import _storage
from actorrt.tune._controller._experiment_state import read_journal
from actorrt.tune._controller._storage import FLUSH_S, ExperimentStorage

ITERATIONS = 12

LIB = f'''
import json, os, tempfile, time

from actorrt import tune

ITERATIONS = {ITERATIONS}


def train(config):
    marks = config["marks"]
    trial_id = tune.get_context().get_trial_id()
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"] + 1
    for i in range(start, ITERATIONS):
        time.sleep(0.01)
        if i % 4 == 3:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({{"i": i}}, f)
                tune.report({{"i": i}}, checkpoint=tune.Checkpoint.from_directory(d))
        else:
            tune.report({{"i": i}})
        # report() returned: the driver has the result. When, by the wall clock:
        with open(os.path.join(marks, trial_id), "a") as f:
            f.write(json.dumps({{"i": i, "t": time.time()}}) + "\\n")
'''

SCRIPT = '''
import sys

import actorrt
from actorrt import tune
from durable_lib import train

storage, marks = sys.argv[1], sys.argv[2]
actorrt.init(num_cpus=2)
tune.Tuner(
    train,
    param_space={"n": tune.grid_search(list(range(24))), "marks": marks},
    run_config=tune.RunConfig(storage_path=storage, name="sweep", verbose=0),
).fit()
'''


def _whole_lines(path: Path) -> list[str]:
    """The lines of ``path`` that a kill did not cut short."""
    text = path.read_text() if path.exists() else ""
    return text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]


def _marks(marks: Path) -> dict[str, list[dict[str, Any]]]:
    """Per trial id, the reports its trainable saw answered, with when."""
    return {p.name: [json.loads(line) for line in _whole_lines(p)] for p in marks.iterdir()}


def _logged(trial_dir: Path) -> list[int]:
    return [json.loads(line)["training_iteration"]
            for line in _whole_lines(trial_dir / "result.json")]


def test_a_driver_killed_mid_sweep_loses_at_most_its_last_moment_and_restore_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "durable_lib.py").write_text(textwrap.dedent(LIB))
    (tmp_path / "sweep.py").write_text(textwrap.dedent(SCRIPT))
    storage, marks = tmp_path / "results", tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}
    with open(tmp_path / "sweep.log", "wb") as log:
        sweep = subprocess.Popen(
            [sys.executable, "sweep.py", str(storage), str(marks)],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=env,
        )
    try:
        # Some trials finished, others mid-way: kill the driver then.
        def midway() -> bool:
            done = [m for m in _marks(marks).values() if m and m[-1]["i"] == ITERATIONS - 1]
            return len(done) >= 4
        assert wait_until(lambda: midway() or sweep.poll() is not None, 40)
        assert sweep.poll() is None, (tmp_path / "sweep.log").read_text()[-3000:]
    finally:
        sweep.send_signal(signal.SIGKILL)
        killed = time.time()
        sweep.wait()
    experiment = storage / "sweep"
    journal = read_journal(str(experiment))
    folders = {e["id"]: experiment / e["dir"] for e in journal if e["event"] == "trial"}
    ended = {e["id"] for e in journal if e["event"] == "end"}
    assert ended, "no trial end reached the journal before the kill"
    # A result whose report was answered well before the kill is in its trial's file: the
    # window is FLUSH_S, plus the writer thread's turn on a loaded machine.
    window = FLUSH_S + 1.0
    for trial_id, marked in _marks(marks).items():
        logged = _logged(folders[trial_id])
        early = [m["i"] + 1 for m in marked if m["t"] < killed - window]
        assert logged[: len(early)] == early, (trial_id, logged, early)
    # A trial the journal calls finished has all its results in its files.
    for trial_id in ended:
        assert _logged(folders[trial_id]) == list(range(1, ITERATIONS + 1)), trial_id

    grid = restore_in_process(tmp_path, experiment, "durable_lib", monkeypatch)
    assert len(grid) == 24 and not grid.errors
    for result in grid:
        assert result.metrics["training_iteration"] == ITERATIONS
        # Every result once, in order, across the kill.
        assert _logged(Path(result.path)) == list(range(1, ITERATIONS + 1)), result.trial_id


async def test_result_writes_never_run_on_the_loop_and_a_slow_disk_does_not_stall_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.current_thread()
    release = threading.Event()
    writers: list[str] = []
    real_write_all = _storage._write_all

    def slow_write_all(file: IO[bytes], data: bytes) -> None:
        writers.append(threading.current_thread().name)
        assert threading.current_thread() is not loop_thread, "a result written on the loop"
        assert release.wait(10)  # the disk is slow
        real_write_all(file, data)

    monkeypatch.setattr(_storage, "_write_all", slow_write_all)
    storage = ExperimentStorage(str(tmp_path), "exp")
    trial = storage.new_trial_dir("t1", {"x": 1})
    await storage.ready(trial)
    ended: list[int] = []
    started = time.monotonic()
    for i in range(200):
        storage.append_result(trial, {"i": i, "training_iteration": i + 1})
    storage.close_trial(trial, then=lambda: ended.append(len(_logged(Path(trial)))))
    # The loop went on at once: it formatted the lines and queued them.
    assert time.monotonic() - started < 2.0
    ticks = 0
    for _ in range(5):
        await asyncio.sleep(0.02)
        ticks += 1
    assert ticks == 5 and ended == []  # the trial's end waits for its lines
    assert await eventually(lambda: bool(writers))  # the writer thread is in its write
    release.set()
    assert await eventually(lambda: ended == [200], 10), ended
    assert set(writers) == {"actorrt-tune-results"}
    # Batched: far fewer writes than lines (two files, one write each per batch).
    assert len(writers) <= 6, len(writers)
    storage.close()
