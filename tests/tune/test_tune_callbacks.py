"""Callbacks: which hooks run when, with what; a callback that raises; TensorBoard files."""

from __future__ import annotations

import os
import struct
import tempfile
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune.callback import DISABLE_AUTO_LOGGERS_ENV, importable
from actorrt.tune.logger import LoggerCallback, TBXLoggerCallback


class Recorder(tune.Callback):
    """Writes down every hook call (callbacks run in the driver: a plain list will do)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        self.events.append(("setup", stop, num_samples, total_num_samples))

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.events.append(("start", iteration, trial.trial_id, trial.status, len(trials)))

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.events.append(
            ("result", iteration, trial.trial_id, result["training_iteration"], result["config"])
        )
        result["mutated"] = True  # each callback gets its own copy: this reaches no one

    def on_trial_complete(
        self, iteration: int, trials: list[Any], trial: Any, **info: Any
    ) -> None:
        self.events.append(("complete", iteration, trial.trial_id, trial.status))

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.events.append(("error", iteration, trial.trial_id, type(trial.error).__name__))

    def on_trial_recover(
        self, iteration: int, trials: list[Any], trial: Any, **info: Any
    ) -> None:
        self.events.append(("recover", iteration, trial.trial_id, trial.num_failures))

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.events.append(("end", sorted(t.status for t in trials)))


def sometimes_fails(config: dict[str, Any]) -> None:
    """x=1 works; x=2 always fails; x=3 fails before its checkpoint is taken, then works."""
    retried = tune.get_checkpoint() is not None
    if config["x"] == 2:
        raise ValueError("x=2 always fails")
    folder = tempfile.mkdtemp()
    tune.report({"v": 1}, checkpoint=tune.Checkpoint.from_directory(folder))
    if config["x"] == 3 and not retried:
        raise RuntimeError("x=3 fails once")
    tune.report({"v": 2})


@pytest.mark.actorrt(num_cpus=2)
async def test_hooks_run_in_order_with_rays_arguments(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    recorder = Recorder()
    grid = await tune.Tuner(
        sometimes_fails,
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            verbose=0,
            callbacks=[recorder],
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    ).fit_async()
    assert grid.num_errors == 1 and grid.num_terminated == 2
    events = recorder.events
    setup, *middle, end = events
    assert setup[0] == "setup" and isinstance(setup[1], tune.stopper.Stopper)
    assert setup[2:] == (1, 3)  # num_samples, and the trials the grid makes
    assert end == ("end", ["ERROR", "TERMINATED", "TERMINATED"])
    iterations = [e[1] for e in middle]  # the controller's step numbers, as in Ray
    assert iterations == sorted(iterations) and iterations[0] >= 0
    ids = {r.config["x"]: r.trial_id for r in grid}
    by_trial = {x: [e for e in middle if e[2] == ids[x]] for x in ids}

    def kinds(x: int) -> list[str]:
        return [e[0] for e in by_trial[x]]

    assert kinds(1) == ["start", "result", "result", "complete"]
    assert kinds(2) == ["start", "recover", "error"]
    # x=3: its first result, then it fails and is retried from that result's checkpoint.
    assert kinds(3) == ["start", "result", "recover", "result", "result", "complete"]
    assert [e[3] for e in by_trial[3] if e[0] == "result"] == [1, 2, 3]
    assert by_trial[1][0][3] == "RUNNING" and by_trial[1][-1][3] == "TERMINATED"
    assert [e[3] for e in by_trial[1] if e[0] == "result"] == [1, 2]
    assert all(e[4] == {"x": 1} for e in by_trial[1] if e[0] == "result")
    assert by_trial[2][-1][3] == "ValueError" and by_trial[2][1][3] == 1
    assert "mutated" not in grid[0].metrics


class Broken(tune.Callback):
    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        raise RuntimeError("the dashboard is down")


def three_reports(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"loss": config["x"] - step})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_callback_that_raises_ends_the_experiment_as_in_ray(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    recorder = Recorder()
    tuner = tune.Tuner(
        three_reports,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, callbacks=[Broken(), recorder]
        ),
    )
    with pytest.raises(RuntimeError, match="the dashboard") as caught:
        await tuner.fit_async()
    assert "raised by the tune callback Broken.on_trial_result" in caught.value.__notes__[0]
    # No hook runs after the failure but on_experiment_end, so callbacks can clean up.
    kinds = [e[0] for e in recorder.events]
    assert "result" not in kinds and kinds[-1] == "end"


def test_callbacks_must_be_a_list_of_callbacks() -> None:
    with pytest.raises(ValueError, match=r"tune\.Callback instances, got <built-in function"):
        tune.RunConfig(callbacks=[print])
    with pytest.raises(ValueError, match="must be a list"):
        tune.RunConfig(callbacks=Recorder())  # type: ignore[arg-type]
    assert tune.RunConfig(callbacks=[Recorder(), LoggerCallback()]).callbacks


def read_events(folder: str) -> list[Any]:
    """The events of the one TensorBoard file in ``folder``, each record's checksums
    verified as TensorBoard does."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import masked_crc32c

    [name] = [f for f in os.listdir(folder) if f.startswith("events.out.tfevents.")]
    with open(os.path.join(folder, name), "rb") as f:
        data = f.read()
    events, pos = [], 0
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        body = data[pos + 12 : pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        assert header_crc == masked_crc32c(header) and body_crc == masked_crc32c(body)
        events.append(Event.FromString(body))
        pos += 16 + length
    return events


def curves(config: dict[str, Any]) -> None:
    for step in range(1, 4):
        tune.report({
            "loss": config["x"] / step,
            "nested": {"acc": step / 4},
            "converged": step == 3,
            "phase": "warm-up",  # not a number: no curve
        })


@pytest.mark.actorrt(num_cpus=2)
async def test_tensorboard_files_are_written_by_default_and_read_back(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in DISABLE_AUTO_LOGGERS_ENV:
        monkeypatch.delenv(name, raising=False)
    grid = await tune.Tuner(
        curves,
        param_space={"x": tune.grid_search([1.0, 2.0]), "opt": {"name": "sgd"}},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="tb", verbose=0),
    ).fit_async()
    assert not grid.errors
    for result in grid:
        events = read_events(result.path)
        assert events[0].file_version == "brain.Event:2"
        scalars = {
            (v.tag, e.step): v.simple_value
            for e in events for v in e.summary.value if v.WhichOneof("value") == "simple_value"
        }
        x = result.config["x"]
        for step in (1, 2, 3):
            assert scalars[("ray/tune/loss", step)] == pytest.approx(x / step)
            assert scalars[("ray/tune/nested/acc", step)] == pytest.approx(step / 4)
            assert scalars[("ray/tune/converged", step)] == float(step == 3)
        tags = {tag for tag, _ in scalars}
        assert "ray/tune/time_this_iter_s" in tags
        left_out = {"phase", "pid", "training_iteration", "done"}
        assert not tags & {f"ray/tune/{name}" for name in left_out}
        # The trial's config and last values, for TensorBoard's hyperparameter view.
        hparams = [v for e in events for v in e.summary.value if v.tag.startswith("_hparams_/")]
        start = next(v for v in hparams if v.tag == "_hparams_/session_start_info")
        content = start.metadata.plugin_data.content
        assert b"opt/name" in content and b"sgd" in content and b"x" in content


@pytest.mark.actorrt(num_cpus=2)
async def test_tensorboard_logger_off_by_environment_and_on_when_given(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    space = {"x": tune.grid_search([1.0])}
    off = await tune.Tuner(
        curves, param_space=space,
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="off", verbose=0),
    ).fit_async()
    assert not [f for f in os.listdir(off[0].path) if "tfevents" in f]
    given = await tune.Tuner(
        curves, param_space=space,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="given", verbose=0,
            callbacks=[TBXLoggerCallback()],
        ),
    ).fit_async()
    losses = [
        v.simple_value for e in read_events(given[0].path) for v in e.summary.value
        if v.tag == "ray/tune/loss"
    ]
    assert losses == pytest.approx([1.0, 0.5, 1 / 3])


_LOOP_GAP_SCRIPT = """
import asyncio, json, sys, time
import actorrt
from actorrt import tune

def trainable(config):
    tune.report({"x": 1})

async def main():
    async with actorrt.Runtime(num_cpus=1):
        gaps = [0.0]
        async def tick():
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.02)
                now = time.monotonic()
                gaps.append(now - last)
                last = now
        ticker = asyncio.ensure_future(tick())
        started = time.monotonic()
        grid = await tune.Tuner(
            trainable, run_config=tune.RunConfig(storage_path=sys.argv[1], verbose=0)
        ).fit_async()
        ticker.cancel()
        print(json.dumps({"gap": max(gaps), "fit": time.monotonic() - started,
                          "errors": len(grid.errors), "tbx": "tensorboardX" in sys.modules}))

asyncio.run(main())
"""


@pytest.mark.skipif(not importable("tensorboardX"), reason="tensorboardX is not installed")
def test_the_tensorboard_logger_imports_tensorboardx_off_the_event_loop(tmp_path: Any) -> None:
    import json
    import subprocess
    import sys

    # A fresh interpreter, where tensorboardX (and torch with it) is imported for real.
    env = {k: v for k, v in os.environ.items() if k not in DISABLE_AUTO_LOGGERS_ENV}
    timed = subprocess.run(
        [sys.executable, "-c", "import time; t = time.monotonic(); import tensorboardX.summary;"
         " print(time.monotonic() - t)"],
        capture_output=True, text=True, timeout=120, check=True, env=env,
    )
    import_s = float(timed.stdout)
    if import_s < 1.5:
        pytest.skip(f"importing tensorboardX took {import_s:.2f} s here: too quick to tell")
    done = subprocess.run(
        [sys.executable, "-c", _LOOP_GAP_SCRIPT, str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["tbx"] and seen["errors"] == 0, seen
    # The loop kept turning while the import ran (an extension's load holds the GIL for a
    # fraction of a second, longer on a loaded machine); on the loop, the longest gap
    # would be the whole import, most of the sweep's time.
    assert seen["gap"] < seen["fit"] / 3, (seen, import_s)
