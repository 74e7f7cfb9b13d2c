"""Tuner.restore: experiments killed, interrupted or errored, continued from their folders.

The sweeps that get killed run as real scripts in subprocesses; their trainable writes a
line to a marker file at each start and each report, so the tests know how far each trial
got (and how often it started) without sleeping.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually, restore_in_process, wait_until

import actorrt
from actorrt import tune
from actorrt.tune._controller._experiment_state import Journal, read_journal
from actorrt.tune.schedulers import ASHAScheduler
from actorrt.tune.search import BasicVariantGenerator
from actorrt.tune.search.searcher import resume_search

# The sweeps' trainable, imported by the scripts, by their workers and (for an in-process
# restore) by the test. Fast trials finish; "hang" trials report iteration 3 *without* a
# checkpoint and then wait for a release file, so a kill finds them mid-way with a result
# after their latest checkpoint.
SWEEP_LIB = '''
import json, os, tempfile, time

from actorrt import tune

ITERATIONS = 5
HANG_AT = 2  # the index whose report (iteration 3) comes without a checkpoint


def mark(marks, name, **fields):
    with open(os.path.join(marks, name), "a") as f:
        f.write(json.dumps(fields) + "\\n")


def train(config):
    marks = config["marks"]
    trial_id = tune.get_context().get_trial_id()
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"] + 1
    mark(marks, trial_id + ".starts", start=start, pid=os.getpid())
    for i in range(start, ITERATIONS):
        time.sleep(0.02)  # the work
        hang = config["kind"] == "hang" and i == HANG_AT
        if hang:
            tune.report({"i": i})
        else:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"i": i}, f)
                tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))
        mark(marks, trial_id + ".iters", i=i, kind=config["kind"], pid=os.getpid())
        while hang and not os.path.exists(os.path.join(marks, "release")):
            time.sleep(0.02)
'''

SWEEP_SCRIPT = '''
import signal, sys

import actorrt
from actorrt import tune
from sweep_lib import train

# Ctrl-C as a terminal delivers it: a process that a non-interactive shell started in the
# background inherits SIGINT ignored, and Python then installs no handler for it.
signal.signal(signal.SIGINT, signal.default_int_handler)
storage, marks = sys.argv[1], sys.argv[2]
actorrt.init(num_cpus=2)
tune.Tuner(
    train,
    param_space={
        "kind": tune.grid_search(["fast", "hang"]), "x": tune.uniform(0, 1), "marks": marks,
    },
    tune_config=tune.TuneConfig(num_samples=3, seed=7),
    run_config=tune.RunConfig(storage_path=storage, name="sweep", verbose=1),
).fit()
'''

RESTORE_SCRIPT = '''
import json, sys

import actorrt
from actorrt import tune
from sweep_lib import train

path = sys.argv[1]
assert tune.Tuner.can_restore(path)
actorrt.init(num_cpus=2)
grid = tune.Tuner.restore(path, train).fit()
rows = [[r.trial_id, r.status, r.metrics["training_iteration"], r.config] for r in grid]
print("GRID " + json.dumps(rows))
'''


def write_sweep(tmp_path: Path) -> tuple[Path, Path]:
    """The sweep's files in ``tmp_path``; returns (storage folder, marker folder)."""
    (tmp_path / "sweep_lib.py").write_text(textwrap.dedent(SWEEP_LIB))
    (tmp_path / "sweep.py").write_text(textwrap.dedent(SWEEP_SCRIPT))
    (tmp_path / "restore.py").write_text(textwrap.dedent(RESTORE_SCRIPT))
    storage, marks = tmp_path / "results", tmp_path / "marks"
    marks.mkdir()
    return storage, marks


# The automatic TensorBoard logger imports torch: seconds per fresh process on this machine,
# and nothing these tests are about.
NO_AUTO_LOGGERS = {"ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}


@pytest.fixture(autouse=True)
def no_auto_loggers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in NO_AUTO_LOGGERS.items():
        monkeypatch.setenv(name, value)


def script_env(**extra: str) -> dict[str, str]:
    return {**os.environ, **NO_AUTO_LOGGERS, **extra}


def start_sweep(tmp_path: Path, storage: Path, marks: Path, **env: str) -> subprocess.Popen[bytes]:
    log = open(tmp_path / "sweep.log", "wb")  # noqa: SIM115 (the child writes it; closed below)
    try:
        return subprocess.Popen(
            [sys.executable, "sweep.py", str(storage), str(marks)],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=script_env(**env),
        )
    finally:
        log.close()


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def reports(marks: Path) -> dict[str, list[dict[str, Any]]]:
    """Per trial id, what the trainable marked after each report."""
    return {p.name.split(".")[0]: lines(p) for p in marks.glob("*.iters")}


def starts(marks: Path) -> dict[str, list[int]]:
    """Per trial id, the index each start of its function began at."""
    return {p.name.split(".")[0]: [s["start"] for s in lines(p)] for p in marks.glob("*.starts")}


def two_done_two_hanging(marks: Path) -> bool:
    last = [r[-1] for r in reports(marks).values() if r]
    done = [r for r in last if r["i"] == 4]
    hanging = [r for r in last if r["kind"] == "hang" and r["i"] == 2]
    return len(done) == 2 and len(hanging) == 2


def trial_events(experiment: Path) -> list[dict[str, Any]]:
    return [e for e in read_journal(str(experiment)) if e["event"] == "trial"]


def read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def exists(path: str) -> bool:
    return os.path.exists(path)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def processes_in(folder: Path) -> list[int]:
    """Live processes whose working directory is ``folder`` (a script and its workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == str(folder) and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def worker_pids(marks: Path) -> set[int]:
    return {s["pid"] for p in marks.glob("*.starts") for s in lines(p)}


def iterations(trial_dir: str) -> list[int]:
    with open(os.path.join(trial_dir, "result.json")) as f:
        return [json.loads(line)["training_iteration"] for line in f]


def csv_iterations(trial_dir: str) -> list[int]:
    with open(os.path.join(trial_dir, "progress.csv"), newline="") as f:
        return [int(row["training_iteration"]) for row in csv.DictReader(f)]


def test_a_killed_sweep_resumes_without_rerunning_or_duplicating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, marks = write_sweep(tmp_path)
    experiment = storage / "sweep"
    # One trial waits for resources at a time: when both CPUs are held by hanging trials,
    # the 5th trial exists (waiting) and the 6th was never drawn.
    sweep = start_sweep(tmp_path, storage, marks, ACTORRT_TUNE_MAX_PENDING_TRIALS="1")
    try:
        assert wait_until(
            lambda: two_done_two_hanging(marks) and len(trial_events(experiment)) >= 5, 50
        ), (tmp_path / "sweep.log").read_text()[-3000:]
    finally:
        sweep.kill()
        sweep.wait()
    assert len(trial_events(experiment)) == 5
    before = reports(marks)
    done = sorted(t for t, r in before.items() if r[-1]["i"] == 4)
    hung = sorted(t for t, r in before.items() if r[-1]["i"] == 2)
    kept_bytes = {t: (experiment / f"train_{t}" / "result.json").read_bytes() for t in done}
    # The killed script's workers exit with it.
    assert wait_until(lambda: not any(alive(p) for p in worker_pids(marks)), 10)
    assert wait_until(lambda: not processes_in(tmp_path), 10), processes_in(tmp_path)

    (marks / "release").touch()
    grid = restore_in_process(tmp_path, experiment, "sweep_lib", monkeypatch)

    # As many trials as the original would have drawn, with the same configs.
    space = {"kind": tune.grid_search(["fast", "hang"]), "x": tune.uniform(0, 1),
             "marks": str(marks)}
    search = BasicVariantGenerator()
    search.set_search_properties(None, None, space, num_samples=3, seed=7)
    assert [r.config for r in grid] == [search.suggest(str(i)) for i in range(6)]
    assert search.suggest("6") == BasicVariantGenerator.FINISHED
    assert [r.status for r in grid] == ["TERMINATED"] * 6 and not grid.errors
    assert [r.metrics["training_iteration"] for r in grid] == [5] * 6
    ids = [r.trial_id for r in grid]
    assert len(set(ids)) == 6 and len({i.split("_")[0] for i in ids}) == 1
    # Finished trials were kept, not run again; hanging ones resumed from their latest
    # checkpoint (index 1): index 2, reported after it, ran again; the others ran once.
    started = starts(marks)
    assert {t: started[t] for t in done} == {t: [0] for t in done}
    assert {t: started[t] for t in hung} == {t: [0, 2] for t in hung}
    assert sorted(started) == sorted(ids)
    assert all(started[t] == [0] for t in ids if t not in hung)
    for t in done:
        assert (experiment / f"train_{t}" / "result.json").read_bytes() == kept_bytes[t]
    # No (trial, iteration) twice, in either log; a resumed trial continues its count.
    for result in grid:
        assert iterations(result.path) == [1, 2, 3, 4, 5], result.trial_id
        assert csv_iterations(result.path) == [1, 2, 3, 4, 5], result.trial_id
    for t in hung:
        logged = lines(experiment / f"train_{t}" / "result.json")
        assert [r["iterations_since_restore"] for r in logged] == [1, 2, 1, 2, 3]
        assert logged[2]["pid"] != logged[1]["pid"]  # in a new process
    journal = read_journal(str(experiment))
    assert [e["event"] for e in journal if e["event"] not in ("trial", "checkpoint", "end")] == [
        "start", "start", "finished"
    ]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_fit_saves_state_prints_how_to_resume_and_restore_finishes(
    tmp_path: Path, signum: int
) -> None:
    storage, marks = write_sweep(tmp_path)
    experiment = storage / "sweep"
    sweep = start_sweep(tmp_path, storage, marks)
    try:
        assert wait_until(lambda: two_done_two_hanging(marks), 50), (
            (tmp_path / "sweep.log").read_text()[-3000:]
        )
        sweep.send_signal(signum)
        status = sweep.wait(timeout=30)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    output = (tmp_path / "sweep.log").read_text()
    if signum == signal.SIGINT:
        # Python ends on an uncaught KeyboardInterrupt by dying of SIGINT itself.
        assert status == -signal.SIGINT and "KeyboardInterrupt" in output, output[-2000:]
    else:
        assert status == 128 + signal.SIGTERM, output[-2000:]
    assert f'tune.Tuner.restore("{experiment}", trainable=train)' in output
    reason = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert read_journal(str(experiment))[-1]["event"] == "interrupted"
    assert read_journal(str(experiment))[-1]["why"] == reason
    # Every trial stopped; the script's worker processes are gone.
    assert wait_until(lambda: not any(alive(p) for p in worker_pids(marks)), 10)
    assert wait_until(lambda: not processes_in(tmp_path), 10), processes_in(tmp_path)
    before = starts(marks)
    assert len(before) == 4  # 2 finished, 2 hanging; 2 more waited for resources

    (marks / "release").touch()
    restore = subprocess.run(
        [sys.executable, "restore.py", str(experiment)],
        cwd=tmp_path, capture_output=True, text=True, timeout=50, env=script_env(),
    )
    assert restore.returncode == 0, restore.stderr[-3000:]
    [row] = [line for line in restore.stdout.splitlines() if line.startswith("GRID ")]
    grid = json.loads(row[len("GRID "):])
    assert [(status, iteration) for _, status, iteration, _ in grid] == [("TERMINATED", 5)] * 6
    after = starts(marks)
    for trial_id, _, _, config in grid:
        kind = config["kind"]
        ran_before = before.get(trial_id, [])
        if ran_before and kind == "fast":
            assert after[trial_id] == [0]  # finished: kept
        elif ran_before:
            assert after[trial_id] == [0, 2]  # hanging: resumed from its checkpoint
        else:
            assert after[trial_id] == [0]  # never started: ran once
        assert iterations(str(experiment / f"train_{trial_id}")) == [1, 2, 3, 4, 5]


# ------------------------------------------------------------- in-process experiments


def flaky(config: dict[str, Any]) -> None:
    """``ok`` finishes; ``fail`` raises after its 2nd report, ``hang`` waits there, until
    the release file exists. Checkpoints every report; marks each start."""
    marks = config["marks"]
    trial_id = tune.get_context().get_trial_id()
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"] + 1
    with open(os.path.join(marks, f"{trial_id}.starts"), "a") as f:
        f.write(json.dumps({"start": start, "kind": config["kind"]}) + "\n")
    release = os.path.join(marks, "release")
    for i in range(start, 4):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"i": i}, f)
            tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))
        with open(os.path.join(marks, f"{trial_id}.iters"), "a") as f:
            f.write(json.dumps({"i": i, "kind": config["kind"]}) + "\n")
        if i == 1 and config["kind"] == "fail" and not os.path.exists(release):
            raise RuntimeError("flaky at 1")
        while i == 1 and config["kind"] == "hang" and not os.path.exists(release):
            time.sleep(0.02)  # the trial's own waiting, until the test releases it


def by_kind(grid: tune.ResultGrid) -> dict[str, tune.Result]:
    return {r.config["kind"]: r for r in grid}


def new_starts(marks: Path, before: dict[str, list[int]]) -> dict[str, list[int]]:
    now = starts(marks)
    kinds = {p.name.split(".")[0]: lines(p)[0]["kind"] for p in marks.glob("*.starts")}
    return {kinds[t]: s[len(before.get(t, [])):] for t, s in now.items()}


@pytest.mark.actorrt(num_cpus=3)
async def test_restore_flags_decide_what_errored_and_unfinished_trials_do(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    tuner = tune.Tuner(
        flaky,
        param_space={"kind": tune.grid_search(["ok", "fail", "hang"]), "marks": str(marks)},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="flags", verbose=0),
    )
    run = asyncio.ensure_future(tuner.fit_async())
    experiment = tmp_path / "flags"

    def settled() -> bool:
        marked = {r[-1]["kind"]: r[-1]["i"] for r in reports(marks).values() if r}
        if not exists(str(experiment / "experiment_state.jsonl")):
            return False
        errored = any(e.get("status") == "ERROR" for e in read_journal(str(experiment)))
        return marked == {"ok": 3, "fail": 1, "hang": 1} and errored

    assert await eventually(settled, within=30)
    run.cancel()  # as Ctrl-C does in fit(): the hanging trial is cut off, unfinished
    await asyncio.gather(run, return_exceptions=True)
    last = read_journal(str(experiment))[-1]
    assert (last["event"], last["why"]) == ("interrupted", "cancelled")
    copies = {}
    for name in ("default", "resume_errored", "restart"):
        copies[name] = tmp_path / f"copy_{name}"
        shutil.copytree(experiment, copies[name])  # a moved experiment restores too
    (marks / "release").touch()

    # Default: the errored trial stays errored, the unfinished one resumes.
    before = starts(marks)
    grid = await tune.Tuner.restore(str(copies["default"]), flaky).fit_async()
    results = by_kind(grid)
    assert new_starts(marks, before) == {"ok": [], "fail": [], "hang": [2]}
    assert isinstance(results["fail"].error, RuntimeError)
    assert str(results["fail"].error) == "flaky at 1" and results["fail"].status == "ERROR"
    assert "flaky at 1" in "\n".join(results["fail"].error.__notes__)
    assert results["fail"].metrics["training_iteration"] == 2
    assert results["hang"].status == "TERMINATED"
    assert iterations(results["hang"].path) == [1, 2, 3, 4]
    assert results["ok"].metrics["training_iteration"] == 4 and grid.num_errors == 1

    # resume_errored: the errored trial continues from its checkpoint.
    before = starts(marks)
    grid = await tune.Tuner.restore(
        str(copies["resume_errored"]), flaky, resume_errored=True
    ).fit_async()
    results = by_kind(grid)
    assert new_starts(marks, before) == {"ok": [], "fail": [2], "hang": [2]}
    assert not grid.errors and iterations(results["fail"].path) == [1, 2, 3, 4]
    assert not exists(os.path.join(results["fail"].path, "error.txt"))

    # restart_errored, resume_unfinished=False: the errored trial starts over, its old
    # checkpoints deleted; the unfinished one is kept as it was, TERMINATED.
    before = starts(marks)
    grid = await tune.Tuner.restore(
        str(copies["restart"]), flaky, restart_errored=True, resume_unfinished=False
    ).fit_async()
    results = by_kind(grid)
    assert new_starts(marks, before) == {"ok": [], "fail": [0], "hang": []}
    assert iterations(results["fail"].path) == [1, 2, 3, 4] and not grid.errors
    assert results["hang"].status == "TERMINATED"
    assert results["hang"].metrics["training_iteration"] == 2
    checkpoints = sorted(p for p in os.listdir(results["fail"].path) if p.startswith("checkp"))
    assert checkpoints == ["checkpoint_000002", "checkpoint_000003", "checkpoint_000004",
                           "checkpoint_000005"]

    # What that restore ended stays ended: restored again, nothing runs.
    before = starts(marks)
    grid = await tune.Tuner.restore(str(copies["restart"]), flaky).fit_async()
    assert new_starts(marks, before) == {"ok": [], "fail": [], "hang": []}
    assert [r.status for r in grid] == ["TERMINATED"] * 3
    assert by_kind(grid)["hang"].metrics["training_iteration"] == 2


def climb(config: dict[str, Any]) -> None:
    for step in range(1, 9):
        tune.report({"score": config["q"] * step})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_finished_experiment_restores_as_it_was_and_asha_rungs_are_rebuilt(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    asha = ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2)
    grid = await tune.Tuner(
        climb,
        param_space={"q": tune.grid_search([0.1, 0.5, 0.9, 0.3, 0.7, 0.2])},
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=asha),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0),
    ).fit_async()
    stopped_early = [r.metrics["training_iteration"] < 8 for r in grid]
    assert any(stopped_early) and not all(stopped_early)
    files = {r.trial_id: read_text(os.path.join(r.path, "result.json")) for r in grid}

    assert tune.Tuner.can_restore(grid.experiment_path)
    restored = tune.Tuner.restore(grid.experiment_path, climb)
    again = await restored.fit_async()
    assert [(r.trial_id, r.status, r.metrics) for r in again] == [
        (r.trial_id, r.status, r.metrics) for r in grid
    ]
    assert {r.trial_id: read_text(os.path.join(r.path, "result.json")) for r in again} == files
    rebuilt = restored.tune_config.scheduler
    assert isinstance(rebuilt, ASHAScheduler) and rebuilt is not asha
    assert [(m, dict(r)) for m, r in rebuilt.brackets[0].rungs] == [
        (m, dict(r)) for m, r in asha.brackets[0].rungs
    ]
    assert again.get_best_result().config == grid.get_best_result().config


def quick(config: dict[str, Any]) -> None:
    tune.report({"v": 1})


def other(config: dict[str, Any]) -> None:
    tune.report({"v": 1})


@pytest.mark.actorrt(num_cpus=1)
async def test_restore_rejects_what_is_not_its_experiment(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        quick,
        param_space={"a": tune.grid_search([1, 2]), "nested": {"b": 3}},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit_async()
    experiment = grid.experiment_path
    assert tune.Tuner.can_restore(experiment)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike.*123"):
        tune.Tuner.restore(123, quick)  # type: ignore[arg-type]
    missing = str(tmp_path / "nope")
    with pytest.raises(ValueError, match=f"{missing!r} does not exist"):
        tune.Tuner.restore(missing, quick)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="is a file, not an experiment folder"):
        tune.Tuner.restore(str(a_file), quick)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="not a Tune experiment folder: it has no tuner.pkl"):
        tune.Tuner.restore(empty, quick)
    trial_folder = f"a trial's folder; restore its experiment: '{experiment}'"
    with pytest.raises(ValueError, match=re.escape(trial_folder)):
        tune.Tuner.restore(grid[0].path, quick)
    for path in (missing, str(a_file), empty, grid[0].path, 123):
        assert not tune.Tuner.can_restore(path)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ran the trainable 'quick', got 'other'"):
        tune.Tuner.restore(experiment, other)
    with pytest.raises(ValueError, match="Tuner takes a function trainable"):
        tune.Tuner.restore(experiment, 5)
    with pytest.raises(ValueError, match="contradict each other"):
        tune.Tuner.restore(experiment, quick, resume_errored=True, restart_errored=True)
    with pytest.raises(TypeError, match="resume_unfinished must be True or False, got 'yes'"):
        tune.Tuner.restore(experiment, quick, resume_unfinished="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="param_space must be a dict, got 7"):
        tune.Tuner.restore(experiment, quick, param_space=7)  # type: ignore[arg-type]
    keys = "missing: ['nested/b'], not in the experiment: ['c']"
    with pytest.raises(ValueError, match=re.escape(keys)):
        tune.Tuner.restore(experiment, quick, param_space={"a": 1, "c": 2})
    # The same keys with new values are accepted.
    assert tune.Tuner.restore(experiment, quick, param_space={"a": 1, "nested": {"b": 4}})

    broken = tmp_path / "broken"
    shutil.copytree(experiment, broken)
    (broken / "tuner.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="tuner.pkl cannot be read"):
        tune.Tuner.restore(broken, quick)
    garbled = tmp_path / "garbled"
    shutil.copytree(experiment, garbled)
    journal = (garbled / "experiment_state.jsonl").read_text().splitlines()
    journal[1] = journal[1][:20]
    (garbled / "experiment_state.jsonl").write_text("\n".join(journal) + "\n")
    with pytest.raises(ValueError, match="experiment_state.jsonl: line 2 is not JSON"):
        tune.Tuner.restore(garbled, quick)


@actorrt.actor
class Box:
    def get(self) -> int:
        return 41


def uses_ref(config: dict[str, Any]) -> None:
    tune.report({"v": actorrt.get(config["box"].get()) + config["n"]})


@pytest.mark.actorrt(num_cpus=1)
async def test_values_that_cannot_be_saved_are_given_again_with_param_space(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    box = await Box.spawn()
    space = {"box": box, "n": tune.grid_search([1])}
    grid = await tune.Tuner(
        uses_ref,
        param_space=space,
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="refs", verbose=0),
    ).fit_async()
    assert grid[0].metrics["v"] == 42
    with pytest.raises(ValueError, match="value at 'box' could not be saved.*pass param_space="):
        tune.Tuner.restore(grid.experiment_path, uses_ref)
    restored = tune.Tuner.restore(grid.experiment_path, uses_ref, param_space=space)
    assert restored.param_space["box"] == box
    again = await restored.fit_async()
    assert again[0].config["box"] == box and again[0].metrics["v"] == 42


# ------------------------------------------------------------------ the state files

HOLD_LOCK = """
import fcntl, sys
f = open(sys.argv[1], "a")
fcntl.flock(f.fileno(), fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()  # holds the lock until killed
"""


def test_no_two_processes_run_one_experiment(tmp_path: Path) -> None:
    (tmp_path / "tuner.pkl").write_bytes(b"not a pickle")
    (tmp_path / "experiment_state.jsonl").write_text("")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "experiment_state.jsonl")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(RuntimeError, match="is running in another process"):
            tune.Tuner.restore(tmp_path, quick)
        with pytest.raises(RuntimeError, match="is running in another process"):
            Journal(str(tmp_path), fresh=True)
        assert (tmp_path / "tuner.pkl").read_bytes() == b"not a pickle"
    finally:
        holder.kill()
        holder.wait()
    # The lock went with the process: the next problem is the folder's own.
    with pytest.raises(ValueError, match="tuner.pkl cannot be read"):
        tune.Tuner.restore(tmp_path, quick)


def test_the_journal_skips_and_cuts_a_torn_last_line(tmp_path: Path) -> None:
    journal = Journal(str(tmp_path), fresh=True)
    journal.append("start")
    journal.append("trial", id="t1")
    journal.close()
    path = tmp_path / "experiment_state.jsonl"
    with open(path, "a") as f:
        f.write('{"event": "end", "id": "t1", "sta')  # a crash in mid-write
    assert [e["event"] for e in read_journal(str(tmp_path))] == ["start", "trial"]
    again = Journal(str(tmp_path), fresh=False, elapsed=5.0, lines=2)
    again.append("end", id="t1", status="TERMINATED")
    again.close()
    events = read_journal(str(tmp_path))
    assert [e["event"] for e in events] == ["start", "trial", "end"]
    assert events[-1]["t"] >= 5.0 and again.lines == 3
    assert path.read_text().count("\n") == 3


def test_the_default_search_continues_with_the_draws_it_would_have_made() -> None:
    space = {
        "g": tune.grid_search([1, 2, 3]), "u": tune.uniform(0, 1), "c": tune.choice(["a", "b"]),
    }
    original = BasicVariantGenerator(random_state=random.Random())  # unseeded
    original.set_search_properties(None, None, space, num_samples=3)
    made = [original.suggest(f"t{i}") for i in range(4)]
    state = original.get_state()
    rest = [original.suggest(f"t{i}") for i in range(4, 10)]
    assert rest[-1] == BasicVariantGenerator.FINISHED and all(isinstance(c, dict) for c in made)

    restored = BasicVariantGenerator()
    restored.set_search_properties(None, None, space, num_samples=3)
    restored.set_state(state)
    resume_search(restored, len(made), live=[])
    assert [restored.suggest(f"t{i}") for i in range(4, 10)] == rest
    assert Counter(c["g"] for c in [*made, *rest[:-1]]) == {1: 3, 2: 3, 3: 3}
