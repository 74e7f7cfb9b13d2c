"""Ray Tune's scheduler and searcher semantics that change results without an error when
they differ: PBT never runs a trial past its stop criteria nor clones a finished trial, a
paused class ``Trainable`` resumes from the state it was saved in, and ``ConcurrencyLimiter``
keeps Ray's contract with the searcher it wraps (its limit, its state, keyword calls).

Each test states Ray Tune 2.60's documented behaviour and runs Ray-style code with only the
imports changed."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune.schedulers import HyperBandScheduler, PopulationBasedTraining
from actorrt.tune.search import ConcurrencyLimiter, Searcher


def iterations(result: Any) -> list[int]:
    """The ``training_iteration`` of every row the trial wrote to its result.json."""
    rows = Path(result.path, "result.json").read_text().splitlines()
    return [json.loads(row)["training_iteration"] for row in rows if row.strip()]


# ------------------------------------------------------------------------- PBT and stop


def meet_the_other_late_trial(gate: Path, lr: float) -> None:
    """The two late (low-lr) trials of the PBT test run side by side, whatever the machine's
    load: each waits at its start until the other has started too (the early trials hold
    the two CPUs until they finish, so the second late one always comes)."""
    if lr >= 0.5:
        return
    gate.mkdir(exist_ok=True)
    (gate / str(lr)).touch()
    deadline = time.monotonic() + 60
    while len(list(gate.iterdir())) < 2:
        assert time.monotonic() < deadline, "the other late trial never started"
        time.sleep(0.01)


def pbt_trainable(config: dict[str, Any]) -> None:
    """Ray's pbt_function shape: a score that grows with lr, a checkpoint every step."""
    step, score = 0, 0.0
    checkpoint = tune.get_checkpoint()
    if checkpoint is None and "gate" in config:
        meet_the_other_late_trial(Path(config["gate"]), config["lr"])
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            state = json.loads(Path(folder, "state.json").read_text())
            step, score = state["step"], state["score"]
    while True:
        step += 1
        score += config["lr"]
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "state.json").write_text(json.dumps({"step": step, "score": score}))
            tune.report(
                {"score": score, "step": step},
                checkpoint=tune.Checkpoint.from_directory(folder),
            )


@pytest.mark.actorrt(num_cpus=2)
async def test_pbt_never_runs_a_trial_past_stop_nor_clones_a_finished_one(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Two CPUs for four 1-CPU trials: the last two start after the first two finished at
    # iteration 10. Ray leaves finished trials out of PBT's quantiles and checks stop
    # before the scheduler acts, so no trial ever reports iteration 11.
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_mutations={"lr": tune.uniform(0.001, 1.0)},
        seed=0,
    )
    grid = await tune.Tuner(
        pbt_trainable,
        param_space={
            "lr": tune.grid_search([0.9, 0.8, 0.02, 0.01]), "gate": str(tmp_path / "gate"),
        },
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=pbt),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), stop={"training_iteration": 10}, verbose=0
        ),
    ).fit_async()
    assert len(grid) == 4 and not grid.errors
    for result in grid:
        seen = iterations(result)
        assert max(seen) == 10, (result.config, seen)
        assert result.metrics["training_iteration"] == 10
    assert pbt.num_exploits > 0  # the late trials were exploited, from live donors only


# ------------------------------------------------------- HyperBand pausing a Trainable


class Counter(tune.Trainable):
    """A class trainable whose state is only what save_checkpoint writes."""

    def setup(self, config: dict[str, Any]) -> None:
        self.count = 0

    def step(self) -> dict[str, Any]:
        self.count += 1
        return {"score": self.config["rate"] * self.count, "count": self.count}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        Path(checkpoint_dir, "count").write_text(str(self.count))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.count = int(Path(checkpoint_dir, "count").read_text())


@pytest.mark.actorrt(num_cpus=2)
async def test_hyperband_saves_a_paused_trainable_and_resumes_it_where_it_was(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Ray saves a class Trainable (save_checkpoint) when HyperBand pauses it and restores
    # it (load_checkpoint) on resume: no iteration is run twice, and the count the
    # trainable keeps itself goes on from where it was.
    grid = await tune.Tuner(
        Counter,
        param_space={"rate": tune.grid_search([0.1 * i for i in range(1, 10)])},
        tune_config=tune.TuneConfig(
            metric="score", mode="max",
            scheduler=HyperBandScheduler(time_attr="training_iteration", max_t=9),
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert len(grid) == 9 and not grid.errors
    paused_some = False
    for result in grid:
        seen = iterations(result)
        assert seen == list(range(1, len(seen) + 1)), (result.config, seen)
        assert result.metrics["count"] == result.metrics["training_iteration"]
        paused_some = paused_some or any(
            name.startswith("checkpoint_") for name in os.listdir(result.path)
        )
    assert paused_some  # a paused trial left the checkpoint it resumed from
    assert max(r.metrics["training_iteration"] for r in grid) == 9


# ------------------------------------------------------------------ ConcurrencyLimiter


class Recording(Searcher):
    """A searcher as Ray's users write them: ``on_trial_complete(..., **kwargs)``."""

    def __init__(self, limits_itself: bool = False) -> None:
        super().__init__(metric="score", mode="max")
        self.limits_itself = limits_itself
        self.max_concurrent: int | None = None
        self.n = 0
        self.completed: list[tuple[str, Any]] = []

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return self.limits_itself

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        self.n += 1
        return {"x": self.n}

    def on_trial_complete(self, trial_id: str, result: Any = None, **kwargs: Any) -> None:
        self.completed.append((trial_id, result, kwargs))


def test_concurrency_limiter_gives_its_limit_to_a_searcher_that_limits_itself() -> None:
    inner = Recording(limits_itself=True)
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert inner.max_concurrent == 2
    # The searcher keeps to the limit itself: the limiter holds nothing back.
    assert all(limiter.suggest(f"t{i}") is not None for i in range(5))


def test_concurrency_limiter_calls_on_trial_complete_with_keywords() -> None:
    inner = Recording()
    limiter = ConcurrencyLimiter(inner, max_concurrent=1)
    assert inner.max_concurrent == 1
    assert limiter.suggest("a") == {"x": 1}
    assert limiter.suggest("b") is None  # the limit holds
    limiter.on_trial_complete("a", result={"score": 1.0}, error=True)
    assert inner.completed == [("a", {"score": 1.0}, {"error": True})]
    assert limiter.suggest("b") == {"x": 2}


def test_a_restored_concurrency_limiter_keeps_its_limit_and_live_trials() -> None:
    limiter = ConcurrencyLimiter(Recording(), max_concurrent=2)
    assert limiter.suggest("a") is not None and limiter.suggest("b") is not None
    state = limiter.get_state()

    restored = ConcurrencyLimiter(Recording(), max_concurrent=5)
    restored.set_state(state)
    assert restored.max_concurrent == 2
    assert restored.suggest("c") is None  # two live trials already: no third
    restored.on_trial_complete("a", result={"score": 0.5})
    assert restored.suggest("c") is not None


def test_a_batch_limiter_tells_the_searcher_when_the_whole_batch_ends() -> None:
    inner = Recording()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2, batch=True)
    limiter.suggest("a"), limiter.suggest("b")
    limiter.on_trial_complete("a", result={"score": 1.0})
    assert inner.completed == [] and limiter.suggest("c") is None  # the batch is not over
    limiter.on_trial_complete("b", result={"score": 2.0})
    assert [trial for trial, _, _ in inner.completed] == ["a", "b"]
    assert limiter.suggest("c") is not None


def test_concurrency_limiter_refuses_a_bad_limit() -> None:
    with pytest.raises(ValueError, match="max_concurrent must be a positive int, got 1.5"):
        ConcurrencyLimiter(Recording(), max_concurrent=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1, got 0"):
        ConcurrencyLimiter(Recording(), max_concurrent=0)


# ------------------------------------------------ ExperimentAnalysis and its checkpoints


def improves(config: dict[str, Any]) -> None:
    for step in range(1, 4):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step").write_text(str(step))
            tune.report(
                {"score": config["rate"] * step},
                checkpoint=tune.Checkpoint.from_directory(folder),
            )


def step_of(checkpoint: tune.Checkpoint) -> str:
    return Path(checkpoint.path, "step").read_text()


@pytest.mark.actorrt(num_cpus=2)
async def test_analysis_falls_back_to_progress_csv_and_checkpoints_compare_equal(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        improves,
        param_space={"rate": tune.grid_search([1.0, 2.0])},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit_async()
    assert not grid.errors
    analysis = tune.ExperimentAnalysis(
        str(tmp_path / "exp"), default_metric="score", default_mode="max"
    )
    best = analysis.best_trial
    # Ray's Trial.checkpoint is a Checkpoint, equal to the analysis's for the same folder.
    assert isinstance(best.checkpoint, tune.Checkpoint)
    assert analysis.best_checkpoint == best.checkpoint
    assert step_of(best.checkpoint) == "3"

    # Without result.json, Ray reads progress.csv: the same best trial and checkpoints.
    for result in grid:
        os.remove(os.path.join(result.path, "result.json"))
    analysis = tune.ExperimentAnalysis(
        str(tmp_path / "exp"), default_metric="score", default_mode="max"
    )
    assert analysis.best_config == {"rate": 2.0}
    assert analysis.best_result["score"] == 6.0
    checkpoint = analysis.get_best_checkpoint(analysis.best_trial)
    assert checkpoint is not None and step_of(checkpoint) == "3"
    last = analysis.get_last_checkpoint(analysis.best_trial)
    assert last is not None and last == analysis.best_checkpoint
    frames = analysis.trial_dataframes
    assert [list(frame["score"]) for frame in frames.values()] in (
        [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]], [[2.0, 4.0, 6.0], [1.0, 2.0, 3.0]]
    )


# ------------------------------------------------- an exception in a trial name creator


def names_badly(trial: Any) -> str:
    raise KeyError("no such name")


def test_a_failing_trial_name_creator_ends_fit_with_its_error_and_no_resume_hint(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    tuner = tune.Tuner(
        improves,
        param_space={"rate": tune.grid_search([1.0, 2.0])},
        tune_config=tune.TuneConfig(trial_name_creator=names_badly),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=1),
    )
    with pytest.raises(KeyError, match="no such name") as caught:
        tuner.fit()
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "raised by TuneConfig(trial_name_creator=names_badly)" in notes
    err = capfd.readouterr().err
    # Not a cancellation, and no hint to resume: a resumed run would fail the same way.
    assert "cancelled" not in err and "Tuner.restore" not in err
    assert "the experiment ended: KeyError" in err


# ------------------------------ Ray 2.7-2.40's train.CheckpointConfig(checkpoint_frequency)


@pytest.mark.actorrt(num_cpus=2)
async def test_train_checkpoint_config_with_a_frequency_checkpoints_a_trainable(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    from actorrt import air, train

    class Stops(Counter):
        def step(self) -> dict[str, Any]:
            result = super().step()
            return {**result, "done": self.count >= 4}

    grid = await tune.Tuner(
        Stops,
        param_space={"rate": 1.0},
        run_config=train.RunConfig(
            storage_path=str(tmp_path),
            checkpoint_config=air.CheckpointConfig(checkpoint_frequency=2, num_to_keep=5),
            verbose=0,
        ),
    ).fit_async()
    [result] = grid
    assert result.error is None
    names = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
    assert len(names) == 2  # iterations 2 and 4
    assert result.checkpoint is not None and step_count(result.checkpoint) == "4"
    bad = r"checkpoint_frequency must be an int >= 0 \(0: never\), got -1"
    with pytest.raises(ValueError, match=bad):
        train.CheckpointConfig(checkpoint_frequency=-1)


def step_count(checkpoint: tune.Checkpoint) -> str:
    return Path(checkpoint.path, "count").read_text()


def test_a_trial_has_rays_status_constants_and_string(tmp_path: Path) -> None:
    seen: list[tuple[str, str, str, str]] = []

    class Names(tune.Callback):
        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                              **info: Any) -> None:
            seen.append((str(trial), trial.trainable_name, trial.status, trial.TERMINATED))

    tune.Tuner(
        improves,
        param_space={"rate": 1.0},
        tune_config=tune.TuneConfig(trial_name_creator=lambda trial: "custom"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), callbacks=[Names()], verbose=0),
    ).fit()
    [(text, trainable, status, terminated)] = seen
    assert trainable == "improves" and text == "custom"  # Ray: the custom name
    assert status == terminated == "TERMINATED"


# ------------------------------------------- tracebacks from a script's own functions

TRACEBACK_SCRIPT = '''
import traceback
import actorrt
from actorrt import tune


def helper(x):
    raise ValueError(f"bad value {x}")


def train_fn(config):
    tune.report({"a": 1})
    helper(config["x"])


@actorrt.actor(process=True)
class Fails:
    def go(self):
        helper("from an actor")


async def ask_actor():
    actor = await Fails.spawn()
    try:
        await actor.go()
    except ValueError as exc:
        print("".join(traceback.format_exception(exc)))


grid = tune.Tuner(
    train_fn, param_space={"x": 3},
    run_config=tune.RunConfig(storage_path="out", verbose=0),
).fit()
print("".join(traceback.format_exception(grid[0].error)))
actorrt.run(ask_actor)
'''


def test_tracebacks_from_workers_name_the_scripts_file_and_line(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "sweep.py"
    script.write_text(textwrap.dedent(TRACEBACK_SCRIPT))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Ray shows the user's file and line; cloudpickle alone names it "<dynamic-code>".
    assert "<dynamic-code>" not in done.stdout
    assert done.stdout.count(f'File "{script}", line 8, in helper') == 2, done.stdout
    assert f'File "{script}", line 13, in train_fn' in done.stdout
    assert 'raise ValueError(f"bad value {x}")' in done.stdout  # the source line too


# ---------------------------------------- ResultGrid(experiment_analysis), Result.from_path


def fails_on_two(config: dict[str, Any]) -> None:
    tune.report({"score": config["rate"]})
    if config["rate"] == 2.0:
        raise RuntimeError("two is not allowed")


def test_a_result_grid_built_from_an_analysis_and_results_read_from_folders(
    tmp_path: Path,
) -> None:
    tune.Tuner(
        fails_on_two,
        param_space={"rate": tune.grid_search([1.0, 2.0, 3.0])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    analysis = tune.ExperimentAnalysis(
        str(tmp_path / "exp"), default_metric="score", default_mode="max"
    )
    grid = tune.ResultGrid(analysis)  # as Ray builds one
    assert len(grid) == 3 and grid.experiment_path == analysis.experiment_path
    assert grid.num_errors == 1 and "two is not allowed" in str(grid.errors[0])
    assert grid.get_best_result().config == {"rate": 3.0}

    failed = next(r for r in grid if r.error is not None)
    again = tune.Result.from_path(failed.path, storage_filesystem=None)
    assert again.config == {"rate": 2.0} and "two is not allowed" in str(again.error)
    with pytest.raises(ValueError, match="storage_filesystem must be None or pyarrow's"):
        tune.Result.from_path(failed.path, storage_filesystem=object())
    with pytest.raises(ValueError, match="needs experiment_path"):
        tune.ResultGrid([])
