"""HyperBandScheduler and HyperBandForBOHB: brackets, milestones and halvings as Ray Tune
computes them, driven with fake trials; and a real sweep that pauses trials (their actors
stop) and resumes them from their checkpoints."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune.schedulers import HyperBandForBOHB, HyperBandScheduler

CONTINUE, PAUSE, STOP = "CONTINUE", "PAUSE", "STOP"


class FakeTrial:
    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id
        self.status = "RUNNING"


class FakeController:
    """What a scheduler may call on the controller; it records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def stop_trial(self, trial: FakeTrial) -> None:
        self.calls.append(("stop", trial.trial_id))
        trial.status = "TERMINATED"

    def resume_trial(self, trial: FakeTrial) -> None:
        self.calls.append(("resume", trial.trial_id))
        trial.status = "RUNNING"


def report(sched: Any, ctl: FakeController, trial: FakeTrial, t: int, score: float) -> str:
    decision = sched.on_trial_result(ctl, trial, {"training_iteration": t, "score": score})
    if decision == PAUSE:
        trial.status = "PAUSED"
    elif decision == STOP:
        trial.status = "TERMINATED"
    return str(decision)


def test_brackets_fill_in_rays_order_with_rays_sizes() -> None:
    sched = HyperBandScheduler(metric="score", mode="max", max_t=81, reduction_factor=3)
    # s_max + 1 = 5 brackets per band; bracket s: n0 = ceil(5 / (s + 1) * 3**s) trials,
    # first milestone r0 = int(81 * 3**-s).
    assert [sched.n0(s) for s in range(5)] == [5, 8, 15, 34, 81]
    assert [sched.r0(s) for s in range(5)] == [81, 27, 9, 3, 1]
    ctl = FakeController()
    for i in range(5 + 8 + 15 + 34 + 81 + 1):
        sched.on_trial_add(ctl, FakeTrial(f"t{i}"))
    sizes = [(b.s, len(b.trials), b.milestone) for band in sched.bands for b in band if b]
    assert sizes == [(0, 5, 81), (1, 8, 27), (2, 15, 9), (3, 34, 3), (4, 81, 1), (0, 1, 81)]
    bohb = HyperBandForBOHB(metric="score", mode="max", max_t=81, reduction_factor=3)
    for i in range(81 + 1):
        bohb.on_trial_add(ctl, FakeTrial(f"b{i}"))
    assert [(b.s, len(b.trials)) for b in bohb.bands[0] if b] == [(4, 81), (3, 1)]


def test_a_bracket_pauses_at_its_milestone_halves_and_stops_at_the_last() -> None:
    # max_t=9, eta=3: brackets s=0 (3 trials, to 9) and s=1 (5 trials, milestone 3).
    sched = HyperBandScheduler(metric="score", mode="max", max_t=9, reduction_factor=3)
    ctl = FakeController()
    trials = [FakeTrial(f"t{i}") for i in range(8)]
    for trial in trials:
        sched.on_trial_add(ctl, trial)
    second = trials[3:]  # bracket s=1; t3 scores best ... t7 worst, except t5 (second)
    scores = {"t3": 5.0, "t4": 1.0, "t5": 4.0, "t6": 2.0, "t7": 3.0}
    for t in (1, 2):
        assert {report(sched, ctl, x, t, scores[x.trial_id]) for x in second} == {CONTINUE}
    assert [report(sched, ctl, x, 3, scores[x.trial_id]) for x in second[:4]] == [PAUSE] * 4
    assert ctl.calls == []
    # The last one reaches the milestone: ceil(5 / 3) = 2 go on (t3, t5), to Ray's next
    # milestone int(min(3 * 3, 9)) = 9, max_t; the others stop.
    assert report(sched, ctl, second[4], 3, scores["t7"]) == STOP
    assert sorted(ctl.calls) == [("resume", "t3"), ("resume", "t5"), ("stop", "t4"),
                                 ("stop", "t6")]
    bracket = sched._of["t3"]
    assert (bracket.milestone, bracket.n, sorted(bracket.live)) == (9, 2, ["t3", "t5"])
    ctl.calls.clear()
    assert report(sched, ctl, trials[3], 6, 6.0) == CONTINUE
    assert report(sched, ctl, trials[3], 9, 7.0) == PAUSE
    # The last halving done: the bracket is finished; everything in it stops.
    assert report(sched, ctl, trials[5], 9, 5.0) == STOP
    assert ctl.calls == [("stop", "t3")]
    assert sched.num_stopped == 3  # t4, t6 and t7 were halved away


def test_a_trial_that_ends_early_lets_its_bracket_halve() -> None:
    sched = HyperBandScheduler(metric="score", mode="min", max_t=9, reduction_factor=3)
    ctl = FakeController()
    trials = [FakeTrial(f"t{i}") for i in range(8)]
    for trial in trials:
        sched.on_trial_add(ctl, trial)
    for x, loss in zip(trials[3:7], [1.0, 2.0, 3.0, 4.0], strict=True):
        assert report(sched, ctl, x, 3, loss) == PAUSE
    trials[7].status = "TERMINATED"
    sched.on_trial_complete(ctl, trials[7], {})  # ends before its milestone
    # 4 live trials at the milestone: halving keeps ceil(5 / 3) = 2, the lowest scores.
    assert sorted(ctl.calls) == [("resume", "t3"), ("resume", "t4"), ("stop", "t5"),
                                 ("stop", "t6")]


def test_rays_hyperband_example_shape_max_t_200_with_nine_trials() -> None:
    # Ray's hyperband example: max_t=200, eta=3. s_max + 1 = round(log 200 / log 3) + 1 = 6;
    # bracket s=0 takes n0 = 6 trials to r0 = 200, bracket s=1 (n0 = 9, r0 = int(200 / 3)
    # = 66) gets the other three.
    sched = HyperBandScheduler(metric="score", mode="max", max_t=200)
    assert (sched.s_max_1, sched.n0(0), sched.r0(0), sched.n0(1), sched.r0(1)) == (
        6, 6, 200, 9, 66)
    ctl = FakeController()
    trials = [FakeTrial(f"t{i}") for i in range(9)]
    for trial in trials:
        sched.on_trial_add(ctl, trial)
    first, second = trials[:6], trials[6:]
    # Bracket s=1: below 66 every result goes on; at 66 the first two wait, paused.
    assert {report(sched, ctl, x, 65, 1.0) for x in second} == {CONTINUE}
    assert [report(sched, ctl, x, 66, float(i)) for i, x in enumerate(second[:2])] == [
        PAUSE, PAUSE]
    # The third one completes the milestone: Ray keeps ceil(n0 / eta) = ceil(9 / 3) = 3,
    # the bracket's size and not its three live trials, so none is stopped; the next
    # milestone is int(min(66 * 3, 200)) = 198.
    assert report(sched, ctl, second[2], 66, 2.0) == CONTINUE
    assert sorted(ctl.calls) == [("resume", "t6"), ("resume", "t7")]
    assert sched._of["t6"].milestone == 198 and sched.num_stopped == 0
    ctl.calls.clear()
    # No halving is left: at 198 they wait for each other, then all stop there.
    assert [report(sched, ctl, x, 198, 3.0) for x in second] == [PAUSE, PAUSE, STOP]
    assert sorted(ctl.calls) == [("stop", "t6"), ("stop", "t7")]
    ctl.calls.clear()
    # Bracket s=0 has no halving: its trials run to max_t, wait there, then all stop.
    assert {report(sched, ctl, x, 199, 1.0) for x in first} == {CONTINUE}
    assert [report(sched, ctl, x, 200, 1.0) for x in first] == [PAUSE] * 5 + [STOP]
    assert sorted(ctl.calls) == [("stop", f"t{i}") for i in range(5)]


def test_a_trial_leaving_after_a_halving_lets_the_bracket_halve_again_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # max_t=4, eta=2: s_max + 1 = 3; brackets s=0 (3 trials, to 4), s=1 (3 trials, 2 -> 4)
    # and s=2 (4 trials, milestones 1 -> 2 -> 4).
    sched = HyperBandScheduler(metric="score", mode="max", max_t=4, reduction_factor=2)
    ctl = FakeController()
    trials = [FakeTrial(f"t{i}") for i in range(10)]
    for trial in trials:
        sched.on_trial_add(ctl, trial)
    third = trials[6:]
    assert [report(sched, ctl, x, 1, float(i)) for i, x in enumerate(third)] == [
        PAUSE, PAUSE, PAUSE, CONTINUE]  # t8 (resumed) and t9 go on to 2
    assert sorted(ctl.calls) == [("resume", "t8"), ("stop", "t6"), ("stop", "t7")]
    ctl.calls.clear()
    assert report(sched, ctl, trials[9], 2, 9.0) == PAUSE
    trials[8].status = "ERROR"
    with caplog.at_level("WARNING", logger="actorrt.tune"):
        sched.on_trial_error(ctl, trials[8])
    # Ray's scheduler would leave t9 paused (it processes a bracket on a trial's removal
    # only before its first halving); here the bracket halves and t9 goes on to 4.
    assert ctl.calls == [("resume", "t9")]
    assert "does not process a bracket again" in caplog.text


def test_hyperband_for_bohb_waits_for_a_full_bracket_and_reports_budgets() -> None:
    sched = HyperBandForBOHB(metric="score", mode="max", max_t=9, reduction_factor=3)
    ctl = FakeController()
    trials = [FakeTrial(f"t{i}") for i in range(9)]  # bracket s=2: 9 trials, milestone 1
    for trial in trials[:3]:
        sched.on_trial_add(ctl, trial)
    results = [{"training_iteration": 1, "score": float(i)} for i in range(9)]
    for trial, result in zip(trials[:3], results, strict=False):
        assert sched.on_trial_result(ctl, trial, result) == PAUSE
        trial.status = "PAUSED"
        assert result["hyperband_info"] == {"budget": 1}
    for trial in trials[3:]:
        sched.on_trial_add(ctl, trial)
    for trial, result in zip(trials[3:8], results[3:8], strict=True):
        assert sched.on_trial_result(ctl, trial, result) == PAUSE
        trial.status = "PAUSED"
    assert sched.on_trial_result(ctl, trials[8], results[8]) == CONTINUE  # the best
    # ceil(9 / 3) = 3 go on to milestone int(min(1 * 3, 9)) = 3: t6, t7 (resumed) and t8.
    assert sorted(c for c in ctl.calls if c[0] == "resume") == [("resume", "t6"),
                                                                 ("resume", "t7")]
    assert len([c for c in ctl.calls if c[0] == "stop"]) == 6


def climb(config: dict[str, Any]) -> None:
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["t"]
    with open(os.path.join(config["marks"], f"{config['q']}.starts"), "a") as f:
        f.write(f"{start}\n")
    for t in range(start + 1, 20):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"t": t}, f)
            tune.report({"score": config["q"] * t}, checkpoint=tune.Checkpoint.from_directory(d))


@pytest.mark.actorrt(num_cpus=2)
async def test_a_sweep_pauses_trials_and_resumes_them_from_their_checkpoints(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    grid = await tune.Tuner(
        climb,
        param_space={"q": tune.grid_search([1, 2, 3, 4, 5, 6, 7, 8]), "marks": str(marks)},
        tune_config=tune.TuneConfig(
            metric="score", mode="max",
            scheduler=HyperBandScheduler(max_t=9, reduction_factor=3),
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors and len(grid) == 8
    ended = {r.config["q"]: r.metrics["training_iteration"] for r in grid}
    # Bracket s=0 (q 1-3) runs to 9; bracket s=1 (q 4-8) halves at 3: q 7 and 8 go on
    # to Ray's next milestone, max_t = 9, the others stop at 3.
    assert ended == {1: 9, 2: 9, 3: 9, 4: 3, 5: 3, 6: 3, 7: 9, 8: 9}
    starts = {q: (marks / f"{q}.starts").read_text().split() for q in range(1, 9)}
    # Each trial paused at 3 and kept started again from its checkpoint there (the one
    # whose result made the bracket halve, if it was kept, just went on); the others and
    # bracket 0's (paused at 9, then stopped) started once.
    assert ["0", "3"] in (starts[7], starts[8])
    assert all(starts[q] in (["0"], ["0", "3"]) for q in (7, 8))
    assert all(starts[q] == ["0"] for q in range(1, 7))
    assert all(r.status == "TERMINATED" for r in grid)


class Sigmoid(tune.Trainable):
    """A class trainable whose score rises with its ``height``; it keeps every step it
    took, so a restart from scratch would show as a repeated step."""

    def setup(self, config: dict[str, Any]) -> None:
        self.steps: list[int] = []

    def step(self) -> dict[str, Any]:
        self.steps.append(len(self.steps) + 1)
        return {"score": config_score(self.config, len(self.steps)), "steps": list(self.steps)}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "steps.json"), "w") as f:
            json.dump(self.steps, f)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "steps.json")) as f:
            self.steps = json.load(f)


def config_score(config: dict[str, Any], t: int) -> float:
    return float(config["height"]) * t / (t + 10)


async def sweep_nine_heights(tmp_path: Path, max_t: int, **run_config: Any) -> dict[int, int]:
    """Nine Sigmoid trials under HyperBandScheduler(max_t); each trial's last iteration, by
    height (checked to have taken each step once: a pause saved it, a resume restored it)."""
    grid = await tune.Tuner(
        Sigmoid,
        param_space={"height": tune.grid_search([10, 20, 30, 40, 50, 60, 70, 80, 90])},
        tune_config=tune.TuneConfig(
            metric="score", mode="max", scheduler=HyperBandScheduler(max_t=max_t),
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0, **run_config),
    ).fit_async()
    assert not grid.errors and len(grid) == 9
    ended = {r.config["height"]: r.metrics["training_iteration"] for r in grid}
    for r in grid:
        assert r.metrics["steps"] == list(range(1, ended[r.config["height"]] + 1))
    return ended


@pytest.mark.actorrt(num_cpus=2)
async def test_a_class_trainable_paused_by_hyperband_is_saved_and_goes_on_where_it_was(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # max_t=9, eta=3, nine trials: bracket s=0 takes three and runs them to 9; s=1 takes
    # five, halves at 3 and runs the best two on to max_t; s=2 takes the last one, which
    # goes 1 -> 3 -> 9 alone. Six of nine reach 9, as under Ray.
    ended = await sweep_nine_heights(tmp_path, 9)
    assert ended == {10: 9, 20: 9, 30: 9, 40: 3, 50: 3, 60: 3, 70: 9, 80: 9, 90: 9}


@pytest.mark.actorrt(num_cpus=2)
async def test_rays_hyperband_example_with_its_stop_criterion_ends_trials_as_ray_does(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Ray's example passes stop={"training_iteration": max_t} too. max_t=27, eta=3:
    # s_max + 1 = 4; bracket s=0 takes four trials to 27 (the stop criterion ends them
    # there), s=1 (n0 = 6, milestone 9) the other five: it halves at 9 keeping
    # ceil(6 / 3) = 2, which go on to int(min(9 * 3, 27)) = 27. Six of nine reach 27.
    ended = await sweep_nine_heights(tmp_path, 27, stop={"training_iteration": 27})
    assert ended == {10: 27, 20: 27, 30: 27, 40: 27, 50: 9, 60: 9, 70: 9, 80: 27, 90: 27}
