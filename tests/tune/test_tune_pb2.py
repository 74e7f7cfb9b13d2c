"""PB2: PBT's exploit with a Gaussian-process bandit for explore. Driven with fake trials
(its choice follows the data), and in a real sweep."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune.schedulers.pb2 import PB2

pytest.importorskip("sklearn")


class FakeTrial:
    def __init__(self, trial_id: str, config: dict[str, Any]) -> None:
        self.trial_id = trial_id
        self.config = config
        self.status = "RUNNING"
        self.checkpoint: str | None = None
        self.restarted: tuple[dict[str, Any], str] | None = None

    def restart_from(self, config: dict[str, Any], donor: FakeTrial) -> None:
        self.restarted = (config, donor.trial_id)


def feed(pb2: PB2, trials: list[FakeTrial], steps: int, rate: Any) -> list[str]:
    """Every trial's reward grows by ``rate(config)`` per step; the PAUSE decisions."""
    paused = []
    rewards = {t.trial_id: 0.0 for t in trials}
    for step in range(1, steps + 1):
        for trial in trials:
            rewards[trial.trial_id] += rate(trial.config)
            trial.checkpoint = f"ckpt-{trial.trial_id}-{step}"
            decision = pb2.on_trial_result(
                None, trial, {"training_iteration": step, "reward": rewards[trial.trial_id]}
            )
            if decision == "PAUSE":
                paused.append(trial.trial_id)
                assert trial.restarted is not None
                trial.config = trial.restarted[0]
    return paused


def test_exploit_takes_a_top_checkpoint_and_explore_follows_the_improvement() -> None:
    pb2 = PB2(
        time_attr="training_iteration", metric="reward", mode="max", perturbation_interval=2,
        hyperparam_bounds={"lr": [0.0, 1.0], "net": {"width": [8, 64]}}, seed=0,
    )
    lrs = [0.1, 0.3, 0.6, 0.9]
    trials = [FakeTrial(f"t{i}", {"lr": lr, "net": {"width": 8}, "k": "x"})
              for i, lr in enumerate(lrs)]
    for trial in trials:
        pb2.on_trial_add(None, trial)
    # Reward grows by lr per step: at each perturbation (every 2 steps) the bottom quarter
    # of 4 (1 trial, the slowest) restarts from the top quarter's (the fastest) checkpoint.
    paused = feed(pb2, trials, 8, lambda c: c["lr"])
    assert paused and paused[0] == "t0"
    config, donor = trials[0].restarted  # type: ignore[misc]
    assert donor == "t3" and config["k"] == "x"
    assert 0.0 <= config["lr"] <= 1.0 and isinstance(config["net"]["width"], int)
    assert 8 <= config["net"]["width"] <= 64
    # The GP saw improvement grow with lr: every choice it made is in the upper half.
    chosen = [row[3][0] for row in pb2.data if row[0] == "t0"][1:]
    assert chosen and all(lr > 0.5 for lr in chosen), chosen
    assert pb2.num_exploits == len(paused)


def test_without_data_the_donor_config_is_kept_and_bad_bounds_are_refused() -> None:
    pb2 = PB2(metric="reward", mode="max", hyperparam_bounds={"lr": [0.0, 1.0]})
    assert pb2.select("nobody", {"lr": 0.5}) == {"lr": 0.5}
    with pytest.raises(ValueError, match="needs hyperparam_bounds"):
        PB2()
    with pytest.raises(ValueError, match=r"hyperparam_bounds\['lr'\] must be \[lower, upper\]"):
        PB2(hyperparam_bounds={"lr": [1.0, 0.0]})


def test_without_scikit_learn_pb2_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(ImportError, match=r"pip install 'actorrt\[pb2\]'"):
        PB2(hyperparam_bounds={"lr": [0.0, 1.0]})


def grows(config: dict[str, Any]) -> None:
    value, start = 0.0, 0
    marks = config["marks"]
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            value, start = json.load(f)
        Path(marks, "restored").touch()  # an exploited trial started from a donor's state
    for step in range(start + 1, 100):  # stopped at training_iteration 12
        value += config["lr"]
        deadline = time.monotonic() + 30
        if step == 3 and config["lr"] == 0.01:  # the slowest learner's first perturbation
            # waits for another trial's score to be in
            while not any(n != "restored" for n in os.listdir(marks)):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        elif step == 5 and config["lr"] != 0.01:
            # A donor stays live (unfinished: finished trials are out of the population)
            # until the slowest has restarted from one.
            while not os.path.exists(os.path.join(marks, "restored")):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump([value, step], f)
            tune.report({"value": value}, checkpoint=tune.Checkpoint.from_directory(d))
        if config["lr"] != 0.01:
            Path(marks, str(config["lr"])).touch()  # its reported score is recorded


@pytest.mark.actorrt(num_cpus=2)
async def test_pb2_in_a_sweep_restarts_the_slowest_with_a_new_lr(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    pb2 = PB2(
        time_attr="training_iteration", perturbation_interval=3,
        hyperparam_bounds={"lr": [0.01, 1.0]}, seed=0,
    )
    grid = await tune.Tuner(
        grows,
        param_space={"lr": tune.grid_search([0.01, 0.2, 0.5, 1.0]), "marks": str(marks)},
        tune_config=tune.TuneConfig(metric="value", mode="max", scheduler=pb2),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, stop={"training_iteration": 12}
        ),
    ).fit_async()
    assert not grid.errors and pb2.num_exploits >= 1
    slowest = next(r for r in grid if r.trial_id.endswith("00000"))
    # It took a faster trial's state and a new lr within the bounds.
    assert slowest.config["lr"] != 0.01 and 0.01 <= slowest.config["lr"] <= 1.0
    assert slowest.metrics["value"] > 12 * 0.01
