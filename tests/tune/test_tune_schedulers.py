"""ASHA on synthetic learning curves: rung milestones and the share of trials promoted."""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune.schedulers import (
    ASHAScheduler,
    AsyncHyperBandScheduler,
    FIFOScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
)


class FakeTrial:
    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id


def run_curve(
    scheduler: AsyncHyperBandScheduler, trial: FakeTrial, quality: float, max_t: int
) -> int:
    """Feed one trial's curve (score = quality * t) until stopped; return its last t."""
    scheduler.on_trial_add(None, trial)
    for t in range(1, max_t + 1):
        decision = scheduler.on_trial_result(
            None, trial, {"training_iteration": t, "score": quality * t}
        )
        if decision == scheduler.STOP:
            return t
    return max_t


def test_asha_stops_only_at_rungs_and_promotes_about_one_in_rf() -> None:
    rng = random.Random(0)
    scheduler = ASHAScheduler(
        metric="score", mode="max", max_t=27, grace_period=1, reduction_factor=3
    )
    assert ASHAScheduler is AsyncHyperBandScheduler
    assert [m for m, _ in scheduler.brackets[0].rungs] == [27, 9, 3, 1]
    n = 900
    ends = [run_curve(scheduler, FakeTrial(f"t{i}"), rng.random(), 27) for i in range(n)]
    assert set(ends) <= {1, 3, 9, 27}  # trials stop only at rung milestones (or max_t)
    reached = {m: sum(end >= m for end in ends) for m in (3, 9, 27)}
    # About 1/3 of the trials pass each rung (asynchronous halving is approximate).
    assert 0.25 < reached[3] / n < 0.45
    assert 0.25 < reached[9] / reached[3] < 0.5
    assert 0.25 < reached[27] / reached[9] < 0.6


def test_asha_with_min_mode_and_brackets() -> None:
    scheduler = AsyncHyperBandScheduler(
        metric="loss", mode="min", max_t=16, grace_period=2, reduction_factor=2, brackets=2,
        seed=1,
    )
    assert [m for m, _ in scheduler.brackets[0].rungs] == [16, 8, 4, 2]
    assert [m for m, _ in scheduler.brackets[1].rungs] == [16, 8, 4]
    good, bad = FakeTrial("good"), FakeTrial("bad")
    for trial in (good, bad):
        scheduler.on_trial_add(None, trial)
    scheduler._of["bad"] = scheduler._of["good"] = scheduler.brackets[0]
    def decide(trial: FakeTrial, t: int, loss: float) -> str:
        return scheduler.on_trial_result(None, trial, {"training_iteration": t, "loss": loss})

    assert decide(good, 2, 0.1) == "CONTINUE"
    assert decide(bad, 2, 0.9) == "STOP"
    assert decide(good, 16, 0.0) == "STOP"  # max_t
    with pytest.raises(ValueError, match="reduction_factor"):
        ASHAScheduler(reduction_factor=1)
    with pytest.raises(ValueError, match="max_t"):
        ASHAScheduler(max_t=1, grace_period=2)
    with pytest.raises(ValueError, match="metric and a mode"):
        ASHAScheduler().on_trial_result(None, good, {"training_iteration": 1})


def curve(config: dict[str, Any]) -> None:
    for t in range(1, 9):
        tune.report({"score": config["quality"] * t})


@pytest.mark.actorrt(num_cpus=4)
async def test_asha_in_a_sweep_stops_the_weak_trials_at_rungs(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    qualities = [0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4]
    grid = await tune.Tuner(
        curve,
        param_space={"quality": tune.grid_search(qualities)},
        tune_config=tune.TuneConfig(
            metric="score", mode="max", max_concurrent_trials=1,
            scheduler=ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2),
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors and grid.num_terminated == 8
    ends = {r.config["quality"]: r.metrics["training_iteration"] for r in grid}
    assert set(ends.values()) <= {1, 2, 4, 8}
    assert ends[0.9] == 8 and ends[0.8] == 8  # the best run to max_t
    assert ends[0.3] == 1 and ends[0.2] == 1  # below the median of rung 1 when they got there
    assert grid.get_best_result().config["quality"] == 0.9


def test_fifo_never_stops() -> None:
    scheduler = FIFOScheduler()
    assert scheduler.on_trial_result(None, FakeTrial("a"), {"x": 1}) == "CONTINUE"


def test_median_stopping_rule_stops_below_the_others_median() -> None:
    rule = MedianStoppingRule(
        time_attr="training_iteration", metric="acc", mode="max", grace_period=2,
        min_samples_required=2,
    )

    def feed(trial: FakeTrial, t: int, acc: float) -> str:
        return rule.on_trial_result(None, trial, {"training_iteration": t, "acc": acc})

    a, b, c, d = (FakeTrial(x) for x in "abcd")
    for t in (1, 2, 3):
        assert feed(a, t, 0.8) == "CONTINUE"
        assert feed(b, t, 0.6) == "CONTINUE"  # one other trial: too few to compare with
    assert feed(c, 1, 0.1) == "CONTINUE"  # within the grace period
    assert feed(c, 2, 0.2) == "STOP"  # best 0.2 < median(0.8, 0.6) = 0.7
    assert feed(d, 2, 0.75) == "CONTINUE"  # 0.75 >= the others' median
    with pytest.raises(ValueError, match="min_samples_required"):
        MedianStoppingRule(min_samples_required=0)


def test_median_stopping_rule_pauses_with_hard_stop_false() -> None:
    rule = MedianStoppingRule(
        time_attr="training_iteration", metric="acc", mode="max", grace_period=0,
        min_samples_required=1, hard_stop=False,
    )
    rule.on_trial_result(None, FakeTrial("a"), {"training_iteration": 1, "acc": 0.9})
    below = rule.on_trial_result(None, FakeTrial("b"), {"training_iteration": 1, "acc": 0.1})
    assert below == "PAUSE"  # as in Ray: paused, resumed once nothing else runs


@actorrt.actor(max_concurrency=16)
class Start:
    """Lets the population start together (a restarted attempt passes at once)."""

    def __init__(self, n: int) -> None:
        self.n, self.arrived, self.open = n, 0, asyncio.Event()

    async def go(self) -> None:
        self.arrived += 1
        if self.arrived >= self.n:
            self.open.set()
        await self.open.wait()


def grows(config: dict[str, Any]) -> None:
    """value += lr per step; the state (and who started it) travels in checkpoints."""
    state = {"value": 0.0, "origin": tune.get_context().get_trial_id()}
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            state = json.load(f)
    actorrt.get(config["start"].go.options(timeout=30)())
    while True:
        state["value"] += config["lr"]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(state, f)
            tune.report(
                {"value": state["value"], "origin": state["origin"]},
                checkpoint=tune.Checkpoint.from_directory(d),
            )


@pytest.mark.actorrt(num_cpus=4)
async def test_pbt_restarts_the_worst_from_the_best_checkpoints(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=3,
        hyperparam_mutations={"lr": [0.01, 0.1, 1.0, 10.0]}, seed=0,
    )
    grid = await tune.Tuner(
        grows,
        param_space={"lr": tune.grid_search([0.01, 0.1, 1.0, 10.0]), "start": await Start.spawn(4)},
        tune_config=tune.TuneConfig(metric="value", mode="max", scheduler=pbt),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, stop={"training_iteration": 12},
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        ),
    ).fit_async()
    assert not grid.errors, grid.errors
    assert pbt.num_exploits >= 1
    # A restarted trial continues from its donor's iteration, so it may end past 12.
    assert all(r.metrics["training_iteration"] >= 12 for r in grid)
    exploited = [r for r in grid if r.metrics["origin"] != r.trial_id]
    assert exploited  # their state came from another trial's checkpoint
    ids = {r.trial_id for r in grid}
    for result in exploited:
        assert result.metrics["origin"] in ids
        assert result.checkpoint is not None
        assert os.path.dirname(result.checkpoint.path) == result.path
    # The slowest learner did not stay the slowest: it took a better one's state.
    slowest = next(r for r in grid if r.trial_id.endswith("00000"))
    assert slowest.metrics["value"] > 12 * 0.01


def test_pbt_explore_perturbs_and_resamples() -> None:
    pbt = PopulationBasedTraining(
        hyperparam_mutations={"lr": tune.loguniform(1e-4, 1), "opt": {"m": [0.8, 0.9, 0.99]}},
        resample_probability=0.0, seed=3,
    )
    config = {"lr": 0.1, "opt": {"m": 0.9}, "fixed": 1}
    for _ in range(20):
        new = pbt.explore(config)
        assert new["lr"] in (0.1 * 1.2, 0.1 * 0.8) and new["fixed"] == 1
        assert new["opt"]["m"] in (0.8, 0.99)
    with pytest.raises(ValueError, match="something to explore"):
        PopulationBasedTraining()


def pbt(**options: Any) -> PopulationBasedTraining:
    return PopulationBasedTraining(
        time_attr="training_iteration", metric="acc", mode="max", perturbation_interval=1,
        hyperparam_mutations={"lr": [0.1, 0.2]}, **options,
    )


def test_pbt_result_without_its_metric_is_an_error_unless_told_otherwise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(RuntimeError, match=r"result has no \['acc'\].*require_attrs=False"):
        pbt().on_trial_result(None, FakeTrial("a"), {"training_iteration": 1, "accuracy": 0.5})
    lenient = pbt(require_attrs=False)
    for t in (1, 2):
        decision = lenient.on_trial_result(None, FakeTrial("a"), {"training_iteration": t})
        assert decision == "CONTINUE"
    assert caplog.text.count("skipped (require_attrs=False)") == 1  # warned once


def reports_accuracy(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"accuracy": 0.1 * i})


def test_a_sweep_whose_pbt_metric_is_never_reported_fails_as_in_ray(
    ray_start_2_cpus: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With Tune's strict metric check off, what stops the sweep is PBT's own require_attrs.
    monkeypatch.setenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    tuner = tune.Tuner(
        reports_accuracy,
        param_space={"lr": 0.1},
        tune_config=tune.TuneConfig(scheduler=pbt()),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="typo", verbose=0),
    )
    with pytest.raises(RuntimeError, match=r"has no \['acc'\]"):
        tuner.fit()


def test_pbt_takes_rays_log_config_and_refuses_synchronous_pbt() -> None:
    from actorrt.tune.schedulers import PopulationBasedTraining

    pbt = PopulationBasedTraining(
        hyperparam_mutations={"lr": [0.1, 0.01]}, log_config=False, synch=False
    )
    assert pbt.log_config is False
    with pytest.raises(ValueError, match="synch=True"):
        PopulationBasedTraining(hyperparam_mutations={"lr": [0.1, 0.01]}, synch=True)
