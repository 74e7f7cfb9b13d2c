"""ResourceChangingScheduler: DistributeResources' decisions against hand-computed shares
(driven with fake trials), and real sweeps where a trial grows once another finishes, and
where it cannot grow and keeps running uninterrupted."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune import PlacementGroupFactory as PGF
from actorrt.tune.schedulers import FIFOScheduler, ResourceChangingScheduler
from actorrt.tune.schedulers.resource_changing_scheduler import (
    DistributeResources,
    DistributeResourcesToTopJob,
)


class FakeTrial:
    def __init__(self, trial_id: str, bundles: list[dict[str, float]], score: float = 0.0):
        self.trial_id = trial_id
        self.placement_group_factory = PGF(bundles)
        self.last_result = {"score": score}
        self.status = "RUNNING"


class FakeController:
    def __init__(self, cpus: float, gpus: float, trials: list[FakeTrial]) -> None:
        self.totals = {"CPU": cpus, "GPU": gpus}
        self.trials = trials
        self.resized: list[tuple[str, list[dict[str, float]]]] = []

    def cluster_resources(self) -> dict[str, float]:
        return dict(self.totals)

    def get_live_trials(self) -> list[FakeTrial]:
        return [t for t in self.trials if t.status == "RUNNING"]

    def resize_trial(self, trial: FakeTrial, resources: PGF) -> bool:
        self.resized.append((trial.trial_id, resources.bundles))
        trial.placement_group_factory = resources  # granted at once
        return True


def sweep(base: list[dict[str, float]], n: int, cpus: float, gpus: float = 0.0,
          fn: Any = None) -> tuple[ResourceChangingScheduler, FakeController, list[FakeTrial]]:
    sched = ResourceChangingScheduler(resources_allocation_function=fn or DistributeResources())
    trials = [FakeTrial(f"t{i}", base, score=i) for i in range(n)]
    ctl = FakeController(cpus, gpus, trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    return sched, ctl, trials


def result(sched: Any, ctl: FakeController, trial: FakeTrial, it: int = 1) -> str:
    return str(sched.on_trial_result(ctl, trial, {"training_iteration": it, "score": 0.0}))


def cpus(trial: FakeTrial) -> float:
    return trial.placement_group_factory.required_resources.get("CPU", 0.0)


def test_equal_shares_of_8_cpus_as_trials_finish() -> None:
    sched, ctl, trials = sweep([{"CPU": 1}], 4, cpus=8)
    # 4 live trials of 1 CPU: 4 free; an even share is ceil((8 - 4) / 4) = 1 more each.
    assert result(sched, ctl, trials[0], it=0) == "CONTINUE" and ctl.resized == []  # iter 0
    for t in trials:
        assert result(sched, ctl, t) == "CONTINUE"
    assert [cpus(t) for t in trials] == [2, 2, 2, 2]
    for t in trials:  # nothing free: nothing changes, nothing is asked for
        result(sched, ctl, t, 2)
    assert len(ctl.resized) == 4
    # Two finish: 2 live trials of 2 CPUs, 4 free; share = ceil((8 - 2) / 2) = 3 more each.
    trials[2].status = trials[3].status = "TERMINATED"
    result(sched, ctl, trials[0], 3)
    assert cpus(trials[0]) == 4  # 1 added + 4 free, capped at the share of 3 added
    result(sched, ctl, trials[1], 3)
    assert cpus(trials[1]) == 4  # 1 added + the 2 still free
    assert ctl.resized[-2:] == [("t0", [{"CPU": 4.0}]), ("t1", [{"CPU": 4.0}])]
    # A third arrives (the scheduler saw its base resources): 9 used of 8, one unit short.
    late = FakeTrial("t9", [{"CPU": 1}])
    ctl.trials.append(late)
    sched.on_trial_add(ctl, late)
    result(sched, ctl, trials[0], 4)
    assert cpus(trials[0]) == 3  # gives one back
    assert [cpus(t) for t in (trials[0], trials[1], late)] == [3, 4, 1]


def test_increase_by_adds_bundles_up_to_increase_by_times() -> None:
    fn = DistributeResources(add_bundles=True, increase_by={"CPU": 2}, increase_by_times=2)
    sched, ctl, trials = sweep([{"CPU": 1}], 2, cpus=8, fn=fn)
    # 6 free = 3 units of 2 CPUs; share ceil(3 / 2) = 2, also the increase_by_times limit.
    result(sched, ctl, trials[0])
    assert trials[0].placement_group_factory.bundles == [
        {"CPU": 1.0}, {"CPU": 2.0}, {"CPU": 2.0}
    ]
    result(sched, ctl, trials[1])  # 2 CPUs left: one unit
    assert trials[1].placement_group_factory.bundles == [{"CPU": 1.0}, {"CPU": 2.0}]
    result(sched, ctl, trials[0], 2)  # at its limit, nothing free: unchanged
    assert len(ctl.resized) == 2


def test_gpus_grow_by_one_gpu_and_cpu_gpu_units_take_the_scarcer() -> None:
    sched, ctl, trials = sweep([{"CPU": 1, "GPU": 1}], 2, cpus=4, gpus=4)
    result(sched, ctl, trials[0])  # default unit 1 GPU; 2 free GPUs, share 1
    assert trials[0].placement_group_factory.bundles == [{"CPU": 1.0, "GPU": 2.0}]
    fn = DistributeResources(increase_by={"CPU": 2, "GPU": 1})
    sched, ctl, trials = sweep([{"CPU": 2, "GPU": 1}], 1, cpus=6, gpus=4, fn=fn)
    result(sched, ctl, trials[0])  # 4 free CPUs, 3 free GPUs: 2 units of (2 CPU, 1 GPU)
    assert trials[0].placement_group_factory.bundles == [{"CPU": 6.0, "GPU": 3.0}]


def test_reserve_resources_are_never_handed_out() -> None:
    fn = DistributeResources(reserve_resources={"CPU": 3})
    sched, ctl, trials = sweep([{"CPU": 1}], 1, cpus=8, fn=fn)
    result(sched, ctl, trials[0])
    assert cpus(trials[0]) == 5


def test_top_job_gets_every_free_cpu() -> None:
    fn = DistributeResourcesToTopJob(metric="score", mode="max")
    sched, ctl, trials = sweep([{"CPU": 1}], 3, cpus=8, fn=fn)
    result(sched, ctl, trials[0])  # not the best (score 0): keeps 1
    assert ctl.resized == []
    result(sched, ctl, trials[2])  # the best (score 2): all 5 free
    assert cpus(trials[2]) == 6


def test_bad_arguments_and_mixed_base_resources() -> None:
    with pytest.raises(ValueError, match="increase_by"):
        DistributeResources(increase_by={"CPU": -1})
    with pytest.raises(ValueError, match="resources_allocation_function"):
        ResourceChangingScheduler(resources_allocation_function=42)  # type: ignore[arg-type]
    with pytest.warns(UserWarning, match="no trial's resources will ever change"):
        ResourceChangingScheduler(resources_allocation_function=None)
    sched, ctl, trials = sweep([{"CPU": 1}, {"CPU": 1}], 1, cpus=8)
    with pytest.raises(ValueError, match="add_bundles=True"):
        result(sched, ctl, trials[0])
    with pytest.raises(RuntimeError, match="same resources"):
        sched.on_trial_add(ctl, FakeTrial("odd", [{"CPU": 2}]))
    assert isinstance(sched._base_scheduler, FIFOScheduler)


# ------------------------------------------------------------------ real sweeps
# Three trials on 4 CPUs, ordered by flag files: the long one reports step 0 while the two
# short ones run, then waits at step 1 until both short ones have ended.


def wait_for(path: str) -> None:
    deadline = time.monotonic() + 50
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


def train(config: dict[str, Any]) -> None:
    """Reports the CPUs it reserved at every step; restarts from its checkpoint."""
    flags, long = config["flags"], config["steps"] > 3
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "step")) as f:
            start = int(f.read())
    for step in range(start, config["steps"]):
        if long and step == 0:
            wait_for(os.path.join(flags, "started"))
        if long and step == 1:
            open(os.path.join(flags, "long0"), "w").close()
            wait_for(os.path.join(flags, "shorts_done"))
        if not long and step == 0:
            wait_for(os.path.join(flags, "long0"))
        cpus_now = tune.get_context().get_trial_resources().required_resources["CPU"]
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "step"), "w") as f:
                f.write(str(step + 1))
            tune.report(
                {"cpus": cpus_now, "pid": os.getpid(), "step": step, "from": start},
                checkpoint=tune.Checkpoint.from_directory(tmp),
            )


class Flags(tune.Callback):
    """``started`` once all trials run; ``shorts_done`` once the short ones ended."""

    def __init__(self, flags: str) -> None:
        self.flags, self.started, self.done = flags, 0, 0

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.started += 1
        if self.started == 3:
            open(os.path.join(self.flags, "started"), "w").close()

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if trial.config["steps"] <= 3:
            self.done += 1
            if self.done == 2:
                open(os.path.join(self.flags, "shorts_done"), "w").close()


async def run_sweep(tmp_path: Any, fn: Any) -> Any:
    flags = tmp_path / "flags"
    flags.mkdir()
    tuner = tune.Tuner(
        train,
        param_space={"steps": tune.grid_search([6, 2, 2]), "flags": str(flags)},
        tune_config=tune.TuneConfig(
            scheduler=ResourceChangingScheduler(resources_allocation_function=fn),
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, callbacks=[Flags(str(flags))]
        ),
    )
    return await tuner.fit_async()


def long_trial(grid: Any) -> Any:
    assert not grid.errors
    return next(r for r in grid if r.config["steps"] == 6).metrics_dataframe


@pytest.mark.actorrt(num_cpus=4)
async def test_a_trial_grows_once_the_others_finish(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await run_sweep(tmp_path, DistributeResources())
    assert actorrt.available_resources() == actorrt.cluster_resources()
    frame = long_trial(grid)
    assert list(frame["step"]) == list(range(6))  # restarted from its checkpoints
    # Step 0 with 3 live trials of 1 CPU on 4: the one free CPU is its even share, so it
    # restarts with 2. From step 1, once the others ended: 2 more free, all of it (taken at
    # the first result after the short trials' actors have given their CPUs back).
    cpus_seen = list(frame["cpus"])
    assert cpus_seen[:2] == [1, 2] and cpus_seen[-1] == 4
    assert list(frame["from"])[:2] == [0, 1]  # step 1 ran in an attempt restored at 1
    assert cpus_seen == sorted(cpus_seen) and set(cpus_seen) == {1, 2, 4}
    short = [r for r in grid if r.config["steps"] == 2]
    # A short one may grow at its last result, once the other short one has ended.
    assert all(r.metrics_dataframe["cpus"].iloc[0] == 1 for r in short)


class Grow(DistributeResources):
    """Asks for the whole cluster (4 CPUs) for the long trial."""

    def __call__(self, tune_controller: Any, trial: Any, result: dict[str, Any],
                 scheduler: Any) -> PGF | None:
        return PGF([{"CPU": 4}]) if trial.config["steps"] > 3 else None


@pytest.mark.actorrt(num_cpus=4)
async def test_a_trial_that_cannot_grow_keeps_running(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="actorrt.tune"):
        grid = await run_sweep(tmp_path, Grow())
    assert actorrt.available_resources() == actorrt.cluster_resources()
    frame = long_trial(grid)
    # At step 0 the short trials hold 2 CPUs: 4 cannot be had, so it keeps its 1 CPU and
    # its attempt (same process, no restore); at step 1 they have ended, and it grows.
    assert list(frame["step"]) == list(range(6))
    cpus_seen = list(frame["cpus"])
    assert cpus_seen[:2] == [1, 1] and cpus_seen[-1] == 4
    assert cpus_seen == sorted(cpus_seen) and set(cpus_seen) == {1, 4}
    assert len(set(list(frame["pid"])[:2])) == 1
    assert list(frame["from"])[:2] == [0, 0]  # one attempt: never restarted in between
    assert "keeps running with [{'CPU': 1.0}]" in caplog.text


def steady(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"step": step})


class Always(DistributeResources):
    """Asks for 2 CPUs at every result."""

    def __call__(self, tune_controller: Any, trial: Any, result: dict[str, Any],
                 scheduler: Any) -> PGF | None:
        return PGF([{"CPU": 2}])


@pytest.mark.actorrt(num_cpus=4)
async def test_a_resize_at_a_trials_last_result_is_withdrawn(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    # The stop condition ends the trial at the result where its new group was reserved:
    # the group is given back, and the trial ends as TERMINATED, not restarted.
    grid = await tune.Tuner(
        steady,
        tune_config=tune.TuneConfig(
            scheduler=ResourceChangingScheduler(resources_allocation_function=Always())
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, stop={"training_iteration": 1}
        ),
    ).fit_async()
    assert not grid.errors
    assert [r.metrics["training_iteration"] for r in grid] == [1]
    assert actorrt.available_resources() == actorrt.cluster_resources()


def gpu_train(config: dict[str, Any]) -> None:
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "step")) as f:
            start = int(f.read())
    step, gpus = start, 0
    # The long trial goes on until it has grown (the short trial's GPU comes back a moment
    # after the short one completes), at most 200 steps.
    while step < config["steps"] or (config["steps"] > 1 and gpus < 2 and step < 200):
        if config["steps"] > 1 and step == 1:
            wait_for(os.path.join(config["flags"], "shorts_done"))
        if step >= config["steps"]:
            time.sleep(0.05)
        gpus = tune.get_context().get_trial_resources().required_resources.get("GPU", 0)
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "step"), "w") as f:
                f.write(str(step + 1))
            tune.report(
                {"gpus": gpus, "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "?")},
                checkpoint=tune.Checkpoint.from_directory(tmp),
            )
        step += 1


class ShortDone(tune.Callback):
    def __init__(self, flags: str) -> None:
        self.flags = flags

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if trial.config["steps"] == 1:
            open(os.path.join(self.flags, "shorts_done"), "w").close()


@pytest.mark.actorrt(num_cpus=2, num_gpus=2)
async def test_a_trial_grows_to_two_gpus_and_sees_both(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    grid = await tune.Tuner(
        tune.with_resources(gpu_train, {"cpu": 1, "gpu": 1}),
        param_space={"steps": tune.grid_search([4, 1]), "flags": str(flags)},
        tune_config=tune.TuneConfig(scheduler=ResourceChangingScheduler()),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, callbacks=[ShortDone(str(flags))]
        ),
    ).fit_async()
    assert not grid.errors
    frame = next(r for r in grid if r.config["steps"] == 4).metrics_dataframe
    # DistributeResources' unit is one GPU when the base has one: alone, it takes both,
    # and its worker process sees both devices.
    assert frame["gpus"].iloc[0] == 1 and len(frame["visible"].iloc[0].split(",")) == 1
    assert frame["gpus"].iloc[-1] == 2
    assert sorted(frame["visible"].iloc[-1].split(",")) == ["0", "1"]
    assert actorrt.available_resources() == actorrt.cluster_resources()
