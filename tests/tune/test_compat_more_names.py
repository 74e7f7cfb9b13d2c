"""More of Ray Tune's names a ported script uses: ``MedianStoppingRule(hard_stop=False)``
pausing, ``tune.logger``'s CSV and JSON callbacks, ``tune.utils.validate_save_restore`` and
``diagnose_serialization``, ``ExperimentAnalysis.stats()`` and ``get_best_logdir``."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune.logger import CSVLoggerCallback, JsonLoggerCallback, LoggerCallback
from actorrt.tune.schedulers import MedianStoppingRule
from actorrt.tune.utils import diagnose_serialization, validate_save_restore


def steady(config: dict[str, Any]) -> None:
    """Reports its quality at each of 4 steps, with a checkpoint; resumes from one."""
    start, resumed_from = 1, 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "step.txt")) as f:
            resumed_from = int(f.read())
        start = resumed_from + 1
    for step in range(start, 5):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.txt"), "w") as f:
                f.write(str(step))
            tune.report({"score": config["quality"], "step": step, "resumed_from": resumed_from},
                        checkpoint=tune.Checkpoint.from_directory(d))


def test_paused_median_trial_resumes_and_loggers_stats_and_logdir(tmp_path: Any) -> None:
    started = time.time()
    analysis = tune.run(
        steady,
        config={"quality": tune.grid_search([0.9, 0.8, 0.1, 0.88])},
        metric="score",
        mode="max",
        scheduler=MedianStoppingRule(
            time_attr="training_iteration", grace_period=2, min_samples_required=2,
            hard_stop=False,
        ),
        max_concurrent_trials=1,
        callbacks=[CSVLoggerCallback(), JsonLoggerCallback()],
        storage_path=str(tmp_path),
        name="median",
        verbose=0,
    )
    by_quality = {t.config["quality"]: t for t in analysis.trials}
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    # 0.1 was below the median (0.85) at step 2: paused, then resumed from its checkpoint
    # and let run to its end. A paused trial still holds its max_concurrent_trials slot (as
    # in Ray, only a trial's end frees it), so it resumes before 0.88 is even suggested.
    # Timestamps are whole seconds: the order is checked with <=.
    weak = analysis.trial_dataframes[by_quality[0.1].trial_id]
    assert list(weak["step"]) == [1, 2, 3, 4]
    assert list(weak["resumed_from"]) == [0, 0, 2, 2]
    frames = {q: analysis.trial_dataframes[by_quality[q].trial_id] for q in (0.9, 0.8, 0.88)}
    earlier_end = max(frames[q]["timestamp"].max() for q in (0.9, 0.8))
    assert earlier_end <= weak["timestamp"].iloc[2] <= frames[0.88]["timestamp"].min()
    for quality in (0.9, 0.8, 0.88):
        assert list(analysis.trial_dataframes[by_quality[quality].trial_id]["resumed_from"]) \
            == [0, 0, 0, 0]
    # CSV and JSON written once each, callbacks or not.
    with open(os.path.join(by_quality[0.1].path, "progress.csv")) as f:
        assert len(f.read().splitlines()) == 1 + 4
    with open(os.path.join(by_quality[0.1].path, "result.json")) as f:
        assert len(f.read().splitlines()) == 4
    stats = analysis.stats()
    assert started - 2 <= stats["start_time"] <= stats["timestamp"] <= time.time() + 2
    assert stats["total_time_s"] > 0
    with pytest.warns(FutureWarning, match="get_best_trial"):
        assert analysis.get_best_logdir("score", "max") == by_quality[0.9].path
    with pytest.warns(FutureWarning):
        assert analysis.get_best_logdir("score", "min", scope="all") == by_quality[0.1].path


def test_median_rule_with_hard_stop_false_pauses_once() -> None:
    rule = MedianStoppingRule(
        time_attr="training_iteration", metric="acc", mode="max", grace_period=0,
        min_samples_required=1, hard_stop=False,
    )

    class T:
        def __init__(self, trial_id: str) -> None:
            self.trial_id = trial_id

    a, b = T("a"), T("b")
    assert rule.on_trial_result(None, a, {"training_iteration": 1, "acc": 0.9}) == "CONTINUE"
    assert rule.on_trial_result(None, b, {"training_iteration": 1, "acc": 0.1}) == "PAUSE"
    # Resumed, it runs on to its end: never compared again (Ray's FIFO fallback).
    assert rule.on_trial_result(None, b, {"training_iteration": 2, "acc": 0.1}) == "CONTINUE"


def test_logger_callbacks_are_rays() -> None:
    assert issubclass(CSVLoggerCallback, LoggerCallback)
    assert issubclass(JsonLoggerCallback, LoggerCallback)
    assert issubclass(LoggerCallback, tune.Callback)
    assert CSVLoggerCallback.__module__ == "actorrt.tune.logger"


class Counter(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.total = config.get("start", 0)

    def step(self) -> dict[str, Any]:
        self.total += 1
        return {"total": self.total}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"total": self.total, "iteration": self.iteration}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.total = checkpoint["total"]
        self.iteration = checkpoint["iteration"]


class ForgetsIteration(Counter):
    def load_checkpoint(self, checkpoint: Any) -> None:
        self.total = checkpoint["total"]


def test_validate_save_restore() -> None:
    assert validate_save_restore(Counter, config={"start": 10}) is True
    with pytest.raises(AssertionError, match="training_iteration 1, expected 4"):
        validate_save_restore(ForgetsIteration)
    with pytest.raises(TypeError, match="Trainable subclass"):
        validate_save_restore(lambda config: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_gpus"):
        validate_save_restore(Counter, num_gpus=-1)
    with pytest.warns(UserWarning, match="no GPU is reserved"):
        assert validate_save_restore(Counter, num_gpus=1)


LOCK = threading.Lock()


def test_diagnose_serialization(capsys: pytest.CaptureFixture[str]) -> None:
    def fine(config: dict[str, Any]) -> None:
        tune.report({"x": config["x"]})

    assert diagnose_serialization(fine) is True
    assert "Serialization succeeded" in capsys.readouterr().out

    def holds_a_lock(config: dict[str, Any]) -> None:
        with LOCK:
            tune.report({"x": 1})

    assert diagnose_serialization(holds_a_lock) == {"LOCK"}
    out = capsys.readouterr().out
    assert "Serialization failed" in out and "'LOCK'" in out and "FAILED" in out
