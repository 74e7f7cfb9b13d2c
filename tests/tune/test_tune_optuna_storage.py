"""OptunaSearch(study_name=, storage=): the study lives in an RDB (sqlite here), is readable
with ``optuna.load_study`` while the sweep runs, and a restored sweep continues it."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

import actorrt
from actorrt import tune
from actorrt.tune.search.optuna import OptunaSearch

optuna.logging.set_verbosity(optuna.logging.WARNING)
COMPLETE, RUNNING = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING


def two_steps(config: dict[str, Any]) -> None:
    marks = Path(config["marks"])
    tune.report({"loss": (config["x"] - 1) ** 2 + 1})
    # The third trial to start waits for the release file: the sweep is cut off there.
    started = len(list(marks.glob("start-*")))
    (marks / f"start-{started}-{os.getpid()}-{time.monotonic_ns()}").touch()
    if started >= 2:
        while not (marks / "release").exists():
            time.sleep(0.05)
    tune.report({"loss": (config["x"] - 1) ** 2})


class ReadsTheStudy(tune.Callback):
    """Reads the study back from the database, as optuna-dashboard would, mid-sweep."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: list[tuple[int, dict[int, float]]] = []

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        if result["training_iteration"] == 1 and not self.seen:
            study = optuna.load_study(study_name="sweep", storage=self.url)
            running = [t for t in study.trials if t.state == RUNNING]
            self.seen = [(t.number, dict(t.intermediate_values)) for t in running]


def searcher(url: str) -> OptunaSearch:
    return OptunaSearch(
        study_name="sweep",
        storage=optuna.storages.RDBStorage(url),
        sampler=optuna.samplers.TPESampler(seed=3),
    )


@pytest.mark.actorrt(num_cpus=2)
async def test_an_sqlite_study_is_read_while_it_runs_and_continued_by_a_restore(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    marks = tmp_path / "marks"
    marks.mkdir()
    reader = ReadsTheStudy(url)
    tuner = tune.Tuner(
        two_steps,
        param_space={"x": tune.uniform(-3, 3), "marks": str(marks)},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=4, search_alg=searcher(url),
            max_concurrent_trials=1,
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="optuna_db", verbose=0, callbacks=[reader]
        ),
    )
    run = asyncio.ensure_future(tuner.fit_async())

    def states() -> list[Any]:
        try:
            study = optuna.load_study(study_name="sweep", storage=url)
        except KeyError:  # not made yet
            return []
        return [t.state for t in study.trials]

    try:
        deadline = time.monotonic() + 60
        while states() != [COMPLETE, COMPLETE, RUNNING] or not list(marks.glob("start-2-*")):
            assert time.monotonic() < deadline, states()
            await asyncio.sleep(0.1)
    finally:
        run.cancel()  # as Ctrl-C does in fit(): the third trial is cut off, unfinished
        await asyncio.gather(run, return_exceptions=True)
    # The first trial's report was in the database while that trial ran.
    assert reader.seen and reader.seen[0][0] == 0 and 1 in reader.seen[0][1]
    (marks / "release").touch()

    grid = await tune.Tuner.restore(str(tmp_path / "optuna_db"), two_steps).fit_async()
    assert len(grid) == 4 and not grid.errors
    study = optuna.load_study(study_name="sweep", storage=url)
    # One Optuna trial per Tune trial, all in the one study: the restore continued it.
    assert [t.number for t in study.trials] == [0, 1, 2, 3]
    assert all(t.state == COMPLETE for t in study.trials)
    assert all(sorted(t.intermediate_values) == [1, 2] for t in study.trials)
    assert sorted(t.params["x"] for t in study.trials) == sorted(r.config["x"] for r in grid)
    assert grid.get_best_result().metrics["loss"] == pytest.approx(study.best_value)


def test_a_study_of_other_directions_and_bad_storage_are_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    optuna.create_study(study_name="up", storage=url, direction="maximize")
    search = OptunaSearch(study_name="up", storage=url)
    with pytest.raises(ValueError, match=r"'up'.*\['maximize'\].*\['minimize'\]"):
        search.set_search_properties("loss", "min", {"x": tune.uniform(0, 1)})
    same = OptunaSearch(study_name="up", storage=url)  # the same direction: it is continued
    same.set_search_properties("score", "max", {"x": tune.uniform(0, 1)})
    assert same.study.study_name == "up" and same.suggest("t1")
    with pytest.raises(ValueError, match="storage must be"):
        OptunaSearch(storage=5)
