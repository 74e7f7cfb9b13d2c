"""What a person watching sees (quiet, plain lines in a pipe, the live view on a terminal),
and each trial's own ``output.log``."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from typing import Any

import pytest
from rich.console import Console

import actorrt
from actorrt import tune
from actorrt.tune._controller import _progress
from actorrt.tune._controller._progress import ProgressReporter
from actorrt.tune.experiment.trial import Trial

ESCAPE = "\x1b["


class Terminal(io.StringIO):
    """Stands in for a terminal: ``isatty`` says yes, so the live view is drawn into it.
    ``drawn`` is set once one frame shows every text of ``until`` (what a test waits for)."""

    def __init__(self, *until: str) -> None:
        super().__init__()
        self.until = until
        self.drawn = asyncio.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if all(part in text for part in self.until):
            self.drawn.set()
        return super().write(text)


@actorrt.actor(max_concurrency=100)
class Gate:
    """``meet`` returns once ``n`` callers are there, or once ``open`` is called."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrivals = 0
        self.opened = asyncio.Event()

    async def meet(self) -> None:
        self.arrivals += 1
        if self.arrivals >= self.n:
            self.opened.set()
        await self.opened.wait()

    def open(self) -> None:
        self.opened.set()


@actorrt.actor
class Helper:
    def ping(self) -> int:
        return os.getpid()


def loss_or_fail(config: dict[str, Any]) -> None:
    for step in range(1, 3):
        tune.report({"loss": config["x"] / step})
    if config["x"] == 2:
        raise ValueError(f"x={config['x']} fails on purpose")


@pytest.mark.actorrt(num_cpus=2)
async def test_verbose_0_prints_nothing(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = await tune.Tuner(
        loss_or_fail,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert grid.num_errors == 1 and grid.num_terminated == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def undeclared_worker(config: dict[str, Any]) -> None:
    """Holds its CPU until the other trial holds the other one, then asks the cluster for
    one more: the broker finds the deadlock and fails one trial's request."""
    actorrt.get(config["gate"].meet.options(timeout=30)())
    helper = actorrt.get(Helper.options(num_cpus=1, placement="cluster").spawn())
    tune.report({"score": 1.0 + config["i"], "helper": actorrt.get(helper.ping())})


@pytest.mark.actorrt(num_cpus=2)
async def test_verbose_1_in_a_pipe_prints_plain_lines_the_table_the_best_and_the_fix(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = await Gate.spawn(2)
    grid = await tune.Tuner(
        undeclared_worker,
        param_space={"i": tune.grid_search([0, 1]), "gate": gate},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="plain", verbose=1),
    ).fit_async()
    [error] = grid.errors
    assert isinstance(error, actorrt.ResourceDeadlockError)
    [ok] = [r for r in grid if r.error is None]
    out = capsys.readouterr().out
    assert ESCAPE not in out  # not a terminal: no escape codes
    lines = out.splitlines()
    # The error as it happened: its type, and its message, which names the fix.
    [when] = [i for i, line in enumerate(lines) if " ERROR: ResourceDeadlockError" in line]
    told = "\n".join(lines[when : when + 8])
    assert "PlacementGroupFactory" in told and "with_resources" in told
    # The final status line, the table (header, a row per trial), the best, the path.
    status = next(line for line in lines if line.startswith("[tune] ") and " | " in line)
    assert "1 TERMINATED | 1 ERROR" in status and "using 0/2 CPU" in status
    assert f"best score={ok.metrics['score']:g}" in status
    header = next(i for i, line in enumerate(lines) if line.startswith("trial "))
    assert lines[header].split()[:6] == ["trial", "status", "score", "iter", "total", "time"]
    rows = [line.split() for line in lines[header + 1 : header + 3]]
    assert sorted(row[1] for row in rows) == ["ERROR", "TERMINATED"]
    ok_row = next(row for row in rows if row[1] == "TERMINATED")
    assert ok_row[0] == os.path.basename(ok.path) and ok_row[2] == f"{ok.metrics['score']:g}"
    best = f"[tune] best score={ok.metrics['score']:g}: {os.path.basename(ok.path)} (i="
    assert any(line.startswith(best) for line in lines)
    assert "errored:" in out and "Traceback" in out
    assert lines[-1] == f"[tune] results in {grid.experiment_path}"


def _trial(name: str, status: str, config: dict[str, Any], **result: Any) -> Trial:
    trial = Trial(config=config, trial_id=name, trial_name=name)
    trial.status = status
    trial.last_result = dict(result)
    return trial


@pytest.mark.actorrt(num_cpus=4, resources={"TRAIN_DRIVER_RESOURCE": 2})
async def test_status_line_and_rich_view_show_counts_resources_waits_best_and_errors(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    held = actorrt.placement_group([{"CPU": 3, "TRAIN_DRIVER_RESOURCE": 1}])
    await held.ready()
    waiting = actorrt.placement_group([{"CPU": 2}])  # one CPU is free: this waits
    failed = _trial("t_failed", "ERROR", {"lr": 0.5, "model": {"depth": 4}})
    failed.error = actorrt.ResourceDeadlockError(
        "t_failed waits for CPU held by its own trial; declare the workers in the "
        "trial's PlacementGroupFactory"
    )
    trials = [
        _trial("t_best", "RUNNING", {"lr": 0.01, "model": {"depth": 2}},
               loss=0.125, training_iteration=7, time_total_s=3.5),
        _trial("t_worse", "RUNNING", {"lr": 0.1, "model": {"depth": 3}},
               loss=0.75, training_iteration=5, time_total_s=2.0),
        _trial("t_waiting", "PENDING", {"lr": 0.2, "model": {"depth": 2}}),
        failed,
    ]
    try:
        out = io.StringIO()
        reporter = ProgressReporter(1, "loss", "min", out=out)
        assert not reporter.live  # a StringIO is not a terminal
        reporter.status(trials)
        line = out.getvalue()
        assert line.startswith("[tune] ") and line.endswith("\n") and ESCAPE not in line
        assert "2 RUNNING | 1 PENDING | 1 ERROR" in line
        assert "using 3/4 CPU, 1/2 TRAIN_DRIVER_RESOURCE" in line
        assert "best loss=0.125 (t_best)" in line
        assert "1 waiting for resources: waiting for {CPU: 1} more" in line

        console = Console(record=True, width=200, force_terminal=True, file=io.StringIO())
        console.print(reporter.snapshot(trials).renderable())
        text = console.export_text()
        assert "2 RUNNING | 1 PENDING | 1 ERROR" in text
        assert "Resources in use: 3/4 CPU, 1/2 TRAIN_DRIVER_RESOURCE" in text
        assert "Best loss (min): 0.125 in t_best (lr=0.01, model/depth=2)" in text
        assert "Waiting for resources: 1" in text and "waiting for {CPU: 1} more" in text
        table = text[text.index("trial ") :].splitlines()
        assert table[0].split() == [
            "trial", "┃", "status", "┃", "loss", "┃", "iter", "┃", "total", "time", "(s)", "┃",
            "lr", "┃", "model/depth",
        ]
        rows = [[c.strip() for c in line.split("│")] for line in table[2:6]]
        # Running trials first, then waiting ones, then those that ended.
        assert [row[0] for row in rows] == ["t_best", "t_worse", "t_waiting", "t_failed"]
        assert rows[0] == ["t_best", "RUNNING", "0.125", "7", "3.5", "0.01", "2"]
        assert "Errors: 1" in text
        assert (
            "t_failed: ResourceDeadlockError: t_failed waits for CPU held by its own trial; "
            "declare the workers in the trial's PlacementGroupFactory" in text
        )
    finally:
        await waiting.remove()
        await held.remove()


def waits_to_be_seen(config: dict[str, Any]) -> None:
    print(f"hello from trial {config['x']}")
    actorrt.get(config["gate"].meet.options(timeout=30)())
    tune.report({"loss": float(config["x"])})


@pytest.mark.actorrt(num_cpus=2)
async def test_on_a_terminal_a_live_view_is_drawn_then_the_final_table(
    actorrt_runtime: actorrt.Runtime,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_progress, "LIVE_REFRESH_S", 0.05)
    monkeypatch.setenv("COLUMNS", "200")  # the terminal's width, for rich
    # Two trials run and wait at the gate; the third waits for a CPU. The gate opens once
    # a frame has said why the third waits, naming a running trial as the CPU's holder.
    terminal = Terminal("held by waits_to_be_seen_", "2 RUNNING", "1 PENDING")
    monkeypatch.setattr(sys, "stdout", terminal)
    gate = await Gate.spawn(99)  # never fills: opened when that frame is drawn

    async def open_when_drawn() -> None:
        await terminal.drawn.wait()
        await gate.open()

    opener = asyncio.ensure_future(open_when_drawn())
    grid = await asyncio.wait_for(tune.Tuner(
        waits_to_be_seen,
        param_space={"x": tune.grid_search([1, 2, 3]), "gate": gate},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=1),
    ).fit_async(), timeout=50)
    await opener
    assert not grid.errors
    assert sys.stdout is terminal  # the live view gave stdout back
    text = terminal.getvalue()
    assert "\x1b[?25l" in text and text.rstrip().endswith(f"results in {grid.experiment_path}")
    live, final = text.rsplit("\x1b[?25h", 1)  # the cursor comes back when the view ends
    assert "2 RUNNING" in live and "1 PENDING" in live and "Waiting for resources: 1" in live
    assert "Resources in use: 2/2 CPU" in live and "waiting for {CPU: 1} more" in live
    # Worker output went through the view, above it, with the trial's name.
    assert "hello from trial 1" in live and "hello from trial 2" in live
    assert "3 TERMINATED" in final and "Best loss (min): 1 in" in final
    assert "[tune] best loss=1: " in final


def chatty(config: dict[str, Any]) -> None:
    x = config["x"]
    print(f"stdout of trial {x}")
    print(f"stderr of trial {x}", file=sys.stderr)
    subprocess.run(["echo", f"a child process of trial {x}"], check=True)
    tune.report({"x": x})
    print(f"after the report of trial {x}", flush=True)


@pytest.mark.actorrt(num_cpus=2)
async def test_each_trial_folder_gets_the_output_of_its_process(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = await tune.Tuner(
        chatty,
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors
    for result in grid:
        x = result.config["x"]
        with open(os.path.join(result.path, "output.log")) as f:  # noqa: ASYNC230 - small
            log = f.read().splitlines()
        assert sorted(log) == sorted([
            f"stdout of trial {x}", f"stderr of trial {x}",
            f"a child process of trial {x}", f"after the report of trial {x}",
        ])
    # Still shown on the driver's console, each line with the trial actor's name.
    captured = capsys.readouterr()
    for result in grid:
        x, name = result.config["x"], os.path.basename(result.path)
        [line] = [ln for ln in captured.out.splitlines() if f"stdout of trial {x}" in ln]
        assert name in line
        assert f"stderr of trial {x}" in captured.err


def bulky(config: dict[str, Any]) -> None:
    x = config["x"]
    for i in range(3000):  # about 100 KiB: the pipe is read in several pieces
        print(f"trial {x} line {i:05d} " + "." * 20)
    tune.report({"pid": os.getpid()})
    sys.stdout.write(f"trial {x} ends without a newline")


@pytest.mark.actorrt(num_cpus=1)
async def test_trials_one_after_another_in_a_process_each_get_their_own_whole_log(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        tune.with_resources(bulky, {"cpu": 1}),
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors
    assert len({r.metrics["pid"] for r in grid}) == 1  # the same worker process ran them all
    for result in grid:
        x = result.config["x"]
        with open(os.path.join(result.path, "output.log"), "rb") as f:  # noqa: ASYNC230
            log = f.read()
        expected = b"".join(
            f"trial {x} line {i:05d} {'.' * 20}\n".encode() for i in range(3000)
        ) + f"trial {x} ends without a newline".encode()
        assert log == expected


def quiet_or_chatty(config: dict[str, Any]) -> None:
    if config["x"] % 2:
        print(f"trial {config['x']} speaks", flush=True)
    tune.report({"pid": os.getpid()})


@pytest.mark.actorrt(num_cpus=1)
async def test_a_trial_that_writes_nothing_leaves_no_log_file(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    """The log is created by a trial's first output: quiet trials (most short ones) cost
    the disk one file less, and one that speaks after a quiet one in the same process
    still gets its own whole log."""
    grid = await tune.Tuner(
        tune.with_resources(quiet_or_chatty, {"cpu": 1}),
        param_space={"x": tune.grid_search([0, 1, 2, 3])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors
    assert len({r.metrics["pid"] for r in grid}) == 1  # one worker process ran them all
    for result in grid:
        x = result.config["x"]
        log = os.path.join(result.path, "output.log")
        if x % 2:
            with open(log) as f:  # noqa: ASYNC230 - small
                assert f.read() == f"trial {x} speaks\n"
        else:
            assert not os.path.exists(log), os.listdir(result.path)  # noqa: ASYNC240


@pytest.mark.parametrize("read_size", [3, 7, 1 << 16])
def test_the_end_marker_is_found_even_cut_across_reads(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, read_size: int
) -> None:
    from actorrt.tune._worker import _trial_log

    monkeypatch.setattr(_trial_log, "_READ_SIZE", read_size)
    forwarded = tmp_path / "console"
    fd = os.open(forwarded, os.O_WRONLY | os.O_CREAT)
    try:
        tee = _trial_log._Tee(fd)
        for n in range(3):
            log = _trial_log._Log(str(tmp_path / f"log{n}"))
            tee.start(log)
            os.write(fd, f"first {n}\nsecond\x00 {n}\nno newline {n}".encode())
            tee.end()
            tee.wait_end()
            log.close()
            assert (tmp_path / f"log{n}").read_bytes() == (
                f"first {n}\nsecond\x00 {n}\nno newline {n}".encode()
            )
        os.write(fd, b"between trials\n")  # back where it pointed: not through the tee
    finally:
        os.close(fd)
    assert forwarded.read_bytes() == b"".join(
        f"first {n}\nsecond\x00 {n}\nno newline {n}".encode() for n in range(3)
    ) + b"between trials\n"
