"""Trials that start their own workers: declared (atomic with the trial), undeclared
(the seed's deadlock: an error in the results, not a hang), and too big for the group."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

import actorrt
from actorrt import tune


@actorrt.actor(max_concurrency=100)
class Gate:
    """Counts arrivals; ``meet`` opens once ``n`` are there. Records free CPUs when it opens."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrivals = 0
        self.opened = asyncio.Event()
        self.free_at_open: float | None = None
        self.pending_at_open: int | None = None

    async def meet(self) -> None:
        self.arrivals += 1
        if self.arrivals == self.n:
            self.free_at_open = actorrt.available_resources().get("CPU", 0.0)
            self.pending_at_open = len(actorrt.pending_requests())
            self.opened.set()
        await self.opened.wait()

    def seen(self) -> dict[str, Any]:
        return {
            "arrivals": self.arrivals,
            "free_at_open": self.free_at_open,
            "pending_at_open": self.pending_at_open,
        }


@actorrt.actor
class Worker:
    def devices(self) -> str:
        return os.environ.get("CUDA_VISIBLE_DEVICES", "?")


def with_workers(config: dict[str, Any]) -> None:
    """A trial that starts two GPU workers, then waits for the other trial at the gate."""
    placement = config.get("placement", "auto")
    workers = [
        actorrt.get(Worker.options(num_cpus=2, num_gpus=1, placement=placement).spawn())
        for _ in range(2)
    ]
    devices = sorted(actorrt.get([w.devices() for w in workers]))
    actorrt.get(config["gate"].meet.options(timeout=30)())
    tune.report({"devices": ",".join(devices)})


@pytest.mark.actorrt(num_cpus=10, num_gpus=4)
async def test_declared_workers_go_into_the_trials_own_bundles(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    factory = tune.PlacementGroupFactory(
        [{"CPU": 1, "GPU": 0}, {"CPU": 2, "GPU": 1}, {"CPU": 2, "GPU": 1}]
    )
    assert factory.required_resources == {"CPU": 5.0, "GPU": 2.0}
    gate = await Gate.spawn(2)
    grid = await tune.Tuner(
        tune.with_resources(with_workers, factory),
        param_space={"gate": gate, "i": tune.grid_search([0, 1, 2])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors, grid.errors
    seen = await gate.seen()
    # Two whole gangs (driver + two workers each) ran at once: nothing was left over, and
    # the third trial waited as one request, though its driver bundle alone would fit.
    assert seen["free_at_open"] == 0 and seen["pending_at_open"] == 1
    devices = [r.metrics["devices"] for r in grid]
    assert all(len(d.split(",")) == 2 for d in devices)
    assert actorrt.available_resources() == actorrt.cluster_resources()


def undeclared(config: dict[str, Any]) -> None:
    """Holds its CPU, waits for the other trial, then asks the cluster for one more CPU."""
    actorrt.get(config["gate"].meet.options(timeout=30)())
    worker = actorrt.get(Worker.options(num_cpus=1, placement="cluster").spawn())
    tune.report({"worker": actorrt.get(worker.devices())})


@pytest.mark.actorrt(num_cpus=2)
async def test_undeclared_workers_deadlock_is_a_trial_error_not_a_hang(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    gate = await Gate.spawn(2)
    grid = await tune.Tuner(
        undeclared,
        param_space={"gate": gate, "i": tune.grid_search([0, 1])},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=2),
        ),
    ).fit_async()
    assert len(grid.errors) == 1 and grid.num_terminated == 1
    error = grid.errors[0]
    assert isinstance(error, actorrt.ResourceDeadlockError)
    assert "PlacementGroupFactory" in str(error) and "with_resources" in str(error)
    assert (await gate.seen())["arrivals"] == 2  # a configuration error is not retried
    errored = next(r for r in grid if r.error is not None)
    with open(os.path.join(errored.path, "error.txt")) as f:  # noqa: ASYNC230 - tiny, local
        assert "ResourceDeadlockError" in f.read()
    assert actorrt.available_resources()["CPU"] == 2


def too_big(config: dict[str, Any]) -> None:
    actorrt.get(Worker.options(num_cpus=2).spawn())  # the trial's group holds only 1 CPU


@pytest.mark.actorrt(num_cpus=4)
async def test_a_worker_too_big_for_the_trials_group_fails_at_once(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        too_big,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, failure_config=tune.FailureConfig(3)
        ),
    ).fit_async()
    [error] = grid.errors
    assert isinstance(error, actorrt.InfeasibleResourceError)
    assert "bundle" in str(error)
