"""The seed's Tune x Train sweep on a 128-CPU, 8-GPU cluster (fake NVML): how trials that
each drive a training gang are admitted, declared or not, and what they report.

Every trial is a driver that builds a ``DataParallelTrainer`` and calls ``fit()``, swept
over ``num_workers: choice([2, 4])`` and a grid of ``lr`` x ``batch_size``. The trials and
their workers tell a recorder actor (in this process) what they hold and when; the tests
assert on that record. One runtime serves the module (its worker processes are reused
from test to test, as in a long-lived cluster); each test checks that everything it took
came back.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from conftest import no_processes_left_by
from seed_cluster import GPUS, seed_cluster

import actorrt
from actorrt import train, tune

pytestmark = pytest.mark.asyncio(loop_scope="module")

STEPS = 3


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """Replaces the per-test check: the module's runtime keeps its processes between tests."""
    yield from no_processes_left_by("this module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[actorrt.Runtime]:
    async with seed_cluster(tmp_path_factory.mktemp("cluster")) as runtime:
        yield runtime


@actorrt.actor(max_concurrency=100)
class Recorder:
    """What trials and their workers saw, kept in the test's process (an inline actor, so
    it reads the broker's view on its own loop).

    A driver is live from the start of its function to the end of its ``fit()``. It
    claims its workers' GPUs for that time: in an atomic gang they are reserved with it.
    ``meet`` is a gate that opens once ``gate_at`` trials' rank 0 are there, and stays open.
    """

    def __init__(self, gate_at: int) -> None:
        self.drivers: dict[str, dict[str, Any]] = {}
        self.workers: dict[str, list[dict[str, Any]]] = {}
        self.live: dict[str, int] = {}
        self.devices: dict[str, set[str]] = {}
        self.peak_drivers = 0
        self.peak_claimed_gpus = 0
        self.shared_devices: list[tuple[str, str, set[str]]] = []
        self.gate_at = gate_at
        self.arrivals = 0
        self.opened = asyncio.Event()
        self.short_at_open: list[dict[str, float]] = []

    def driver_started(self, trial_id: str, info: dict[str, Any]) -> None:
        self.drivers[trial_id] = info
        self.live[trial_id] = info["num_workers"]
        self.peak_drivers = max(self.peak_drivers, len(self.live))
        self.peak_claimed_gpus = max(self.peak_claimed_gpus, sum(self.live.values()))

    def driver_ended(self, trial_id: str) -> None:
        del self.live[trial_id]
        self.devices.pop(trial_id, None)

    def worker_started(self, trial_id: str, info: dict[str, Any]) -> None:
        self.workers.setdefault(trial_id, []).append(info)
        if info["rank"] == 0:
            mine = set(info["visible"].split(","))
            for other, theirs in self.devices.items():
                if mine & theirs:
                    self.shared_devices.append((trial_id, other, mine & theirs))
            self.devices[trial_id] = mine

    def state(self) -> dict[str, Any]:
        return {
            "drivers": self.drivers,
            "workers": self.workers,
            "peak_drivers": self.peak_drivers,
            "peak_claimed_gpus": self.peak_claimed_gpus,
            "shared_devices": self.shared_devices,
            "short_at_open": self.short_at_open,
        }

    async def meet(self) -> None:
        self.arrivals += 1
        if self.arrivals == self.gate_at:
            # What the trials still waiting lack, now that gate_at trials run.
            self.short_at_open = [dict(p.short_of) for p in actorrt.pending_requests()]
            self.opened.set()
        await self.opened.wait()


def light_loop(config: dict[str, Any]) -> None:
    """A training function with no framework: tells the recorder where it runs, then
    reports a made-up loss ``STEPS`` times, with a checkpoint at the end (rank 0's)."""
    context = actorrt.get_context()
    placement = context.placement
    assert placement is not None
    rank = train.get_context().get_world_rank()
    recorder = config["recorder"]
    actorrt.get(recorder.worker_started(config["trial_id"], {
        "rank": rank,
        "group": placement.group_id,
        "bundle": placement.bundle_index,
        "assigned": context.get_assigned_resources(),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    }))
    if rank == 0:
        actorrt.get(recorder.meet.options(timeout=60)())
    for step in range(STEPS):
        loss = config["lr"] * 10 / (step + 1) + 1 / config["batch_size"]
        if rank == 0 and step == STEPS - 1:
            with tempfile.TemporaryDirectory() as d:
                Path(d, "state.txt").write_text(f"{config['trial_id']} step {step}")
                train.report({"loss": loss, "step": step},
                             checkpoint=train.Checkpoint.from_directory(d))
        else:
            train.report({"loss": loss, "step": step})


def driver(config: dict[str, Any]) -> None:
    """The seed's trial: a driver that runs a data-parallel trainer on GPU workers."""
    recorder = config["recorder"]
    trial_id = tune.get_context().get_trial_id()
    context = actorrt.get_context()
    assert context.placement is not None
    actorrt.get(recorder.driver_started(trial_id, {
        "num_workers": config["num_workers"],
        "group": context.placement.group_id,
        "bundles": context.placement.bundle_specs,
        "assigned": context.get_assigned_resources(),
    }))
    try:
        train.DataParallelTrainer(
            light_loop,
            train_loop_config={
                "lr": config["lr"], "batch_size": config["batch_size"],
                "recorder": recorder, "trial_id": trial_id,
            },
            scaling_config=train.ScalingConfig(
                num_workers=config["num_workers"],
                use_gpu=True,
                resources_per_worker=config.get("resources_per_worker"),
            ),
        ).fit()
    finally:
        actorrt.get(recorder.driver_ended(trial_id))


def sweep(recorder: Any, **extra: Any) -> dict[str, Any]:
    return {
        "recorder": recorder,
        "num_workers": tune.choice([2, 4]),
        "lr": tune.grid_search([0.001, 0.01]),
        "batch_size": tune.grid_search([32, 64]),
        **extra,
    }


def declared(config: dict[str, Any]) -> train.ScalingConfig:
    return train.ScalingConfig(num_workers=config["num_workers"], use_gpu=True)


def pinned_driver(config: dict[str, Any]) -> train.ScalingConfig:
    return train.ScalingConfig(
        num_workers=config["num_workers"],
        use_gpu=True,
        trainer_resources={"CPU": 1, "TRAIN_DRIVER_RESOURCE": 1},
    )


def assert_forwarded(grid: Any) -> None:
    """Every trial ended normally with rank 0's reports as its results."""
    assert not grid.errors, grid.errors
    for result in grid:
        assert result.metrics["training_iteration"] == STEPS
        assert result.metrics["step"] == STEPS - 1
        assert result.checkpoint is not None
        # Persisted into the trial's own folder, as a tune.report checkpoint would be.
        assert os.path.dirname(result.checkpoint.path) == result.path
        state = Path(result.checkpoint.path, "state.txt").read_text()
        assert state == f"{result.trial_id} step {STEPS - 1}"


async def test_declared_trials_are_admitted_as_whole_gangs(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn(2)
    grid = await tune.Tuner(
        tune.with_resources(driver, declared),
        param_space=sweep(recorder),
        tune_config=tune.TuneConfig(seed=3),  # no max_concurrent_trials
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert len(grid) == 4
    assert_forwarded(grid)
    rec = await recorder.state()
    for result in grid:
        n = result.config["num_workers"]
        info = rec["drivers"][result.trial_id]
        # The driver started holding its whole gang: its group is its own bundle (empty:
        # as in Ray Train V2 the driver takes nothing) and one GPU bundle per worker, and
        # each worker ran in the driver's group, bundle rank + 1.
        assert info["bundles"] == [{}] + [{"GPU": 1.0}] * n
        workers = sorted(rec["workers"][result.trial_id], key=lambda w: w["rank"])
        assert [w["rank"] for w in workers] == list(range(n))
        assert {w["group"] for w in workers} == {info["group"]}
        assert [w["bundle"] for w in workers] == [r + 1 for r in range(n)]
        assert all(w["assigned"] == {"GPU": 1.0} for w in workers)
    # No driver ever ran without its workers' GPUs: what live drivers claimed never went
    # beyond the 8 GPUs, and two live trials never shared a device. Two trials ran at
    # once (the gate opened), with no max_concurrent_trials arithmetic.
    assert rec["peak_claimed_gpus"] <= GPUS
    assert rec["shared_devices"] == []
    assert rec["peak_drivers"] >= 2
    assert actorrt.available_resources() == actorrt.cluster_resources()


async def test_undeclared_trials_with_max_concurrent_trials_work_as_in_ray(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn(2)
    grid = await tune.Tuner(
        driver,  # 1 CPU per trial; the trainer reserves its GPU workers itself
        param_space=sweep(recorder),
        tune_config=tune.TuneConfig(max_concurrent_trials=GPUS // 4, seed=3),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert len(grid) == 4
    assert_forwarded(grid)
    rec = await recorder.state()
    assert rec["peak_drivers"] == 2  # the limit, reached (the gate opened)
    for result in grid:
        info = rec["drivers"][result.trial_id]
        assert info["bundles"] == [{"CPU": 1.0}]
        workers = rec["workers"][result.trial_id]
        # The workers went into a gang the trainer reserved from the cluster.
        assert len(workers) == result.config["num_workers"]
        assert len({w["group"] for w in workers}) == 1
        assert workers[0]["group"] != info["group"]
    assert rec["shared_devices"] == []
    assert actorrt.available_resources() == actorrt.cluster_resources()


async def test_drivers_asking_for_a_custom_resource_run_only_where_it_is(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn(2)
    grid = await tune.Tuner(
        tune.with_resources(driver, pinned_driver),
        param_space=sweep(recorder),
        tune_config=tune.TuneConfig(seed=3),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert_forwarded(grid)
    rec = await recorder.state()
    # Two units of TRAIN_DRIVER_RESOURCE: never more than two drivers at once, though
    # the GPUs alone would have let more trials in: when two ran, a waiting trial lacked
    # nothing but a driver's place.
    assert rec["peak_drivers"] == 2
    assert {"TRAIN_DRIVER_RESOURCE": 1.0} in rec["short_at_open"], rec["short_at_open"]
    for result in grid:
        info = rec["drivers"][result.trial_id]
        assert info["assigned"] == {"CPU": 1.0, "TRAIN_DRIVER_RESOURCE": 1.0}
        for worker in rec["workers"][result.trial_id]:
            assert worker["assigned"] == {"GPU": 1.0}  # the workers do not take it
    assert actorrt.available_resources() == actorrt.cluster_resources()


async def test_a_trial_declared_with_another_worker_shape_is_a_value_error(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn(1)
    grid = await tune.Tuner(
        tune.with_resources(driver, declared),  # workers declared as {"GPU": 1}
        param_space={
            "recorder": recorder, "num_workers": 2, "lr": 0.01, "batch_size": 32,
            # ...but the trainer's workers want a CPU too.
            "resources_per_worker": {"CPU": 2, "GPU": 1},
        },
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    [error] = grid.errors
    assert isinstance(error, ValueError)
    text = str(error)
    assert "[{}, {'GPU': 1.0}, {'GPU': 1.0}]" in text  # what the trial declared
    assert "2 worker bundle(s) of {'CPU': 2.0, 'GPU': 1.0}" in text  # what the trainer needs
    assert "tune.with_resources(driver, scaling_config)" in text
    assert actorrt.available_resources() == actorrt.cluster_resources()
