"""The seed's parallelism arithmetic, through Tuner, with real trial processes.

Every case proves that *exactly* N trials run together: each trial arrives at a barrier
(an inline actor in the driver) that opens only when N trials are there, and at the moment
it opens every other trial of the sweep must still be waiting for resources (the broker's
pending list). So N ran at once, and the (N+1)th could not.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

import actorrt
from actorrt import tune


@actorrt.actor(max_concurrency=1000)
class Barrier:
    """Opens for each generation of ``min(n, trials left)`` arrivals; records the scene."""

    def __init__(self, n: int, total: int) -> None:
        self.n = n
        self.left = total
        self.count = 0
        self.opened = asyncio.Event()
        self.pending_at_open: list[int] = []
        self.generations: list[list[Any]] = [[]]

    async def arrive(self, info: Any = None) -> None:
        opened = self.opened
        self.count += 1
        self.generations[-1].append(info)
        if self.count == min(self.n, self.left):
            self.pending_at_open.append(len(actorrt.pending_requests()))
            self.left -= self.count
            self.count = 0
            self.opened = asyncio.Event()
            self.generations.append([])
            opened.set()
        await opened.wait()

    def scene(self) -> dict[str, Any]:
        return {
            "pending_at_open": self.pending_at_open,
            "generations": [g for g in self.generations if g],
        }


def meet(config: dict[str, Any]) -> None:
    """A trial: meet the others at the barrier, report what it sees, end."""
    info = {
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_ids": actorrt.get_gpu_ids(),
        "trial": tune.get_context().get_trial_id(),
    }
    actorrt.get(config["barrier"].arrive.options(timeout=30)(info))
    tune.report({"ok": 1, "cuda": info["cuda"] or ""})


async def sweep(
    trainable: Any, n: int, total: int, tmp_path: Any, **space: Any
) -> tuple[tune.ResultGrid, dict[str, Any]]:
    """Run ``total`` trials; return the results and what the barrier saw."""
    barrier = await Barrier.spawn(n, total)
    grid = await tune.Tuner(
        trainable,
        param_space={"barrier": barrier, "i": tune.grid_search(list(range(total))), **space},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="par", verbose=0),
    ).fit_async()
    assert not grid.errors, grid.errors
    assert len(grid) == total and all(r.metrics["ok"] == 1 for r in grid)
    scene: dict[str, Any] = await barrier.scene()
    await barrier.stop()
    return grid, scene


def exactly(scene: dict[str, Any], n: int, total: int) -> None:
    sizes = [len(g) for g in scene["generations"]]
    assert sizes[0] == n, sizes
    # When the first n met, every other trial was still waiting for its resources.
    assert scene["pending_at_open"][0] == total - n, scene["pending_at_open"]


@pytest.mark.actorrt(num_cpus=4)
async def test_default_is_one_cpu_so_four_at_a_time(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    _, scene = await sweep(meet, 4, 6, tmp_path)
    exactly(scene, 4, 6)
    assert actorrt.available_resources()["CPU"] == 4


@pytest.mark.actorrt(num_cpus=4)
async def test_two_cpus_each_two_at_a_time(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    _, scene = await sweep(tune.with_resources(meet, {"cpu": 2}), 2, 3, tmp_path)
    exactly(scene, 2, 3)


@pytest.mark.actorrt(num_cpus=4)
async def test_half_a_cpu_each_eight_at_a_time(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    _, scene = await sweep(tune.with_resources(meet, {"cpu": 0.5}), 8, 9, tmp_path)
    exactly(scene, 8, 9)


@pytest.mark.actorrt(num_cpus=4, num_gpus=8)
async def test_one_gpu_each_eight_at_a_time_on_distinct_devices(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    _, scene = await sweep(tune.with_resources(meet, {"gpu": 1}), 8, 9, tmp_path)
    exactly(scene, 8, 9)
    first = scene["generations"][0]
    assert sorted(info["cuda"] for info in first) == [str(i) for i in range(8)]
    assert all([str(g) for g in info["gpu_ids"]] == [info["cuda"]] for info in first)


@pytest.mark.actorrt(num_cpus=4, num_gpus=1)
async def test_the_scarcer_resource_decides(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    _, scene = await sweep(tune.with_resources(meet, {"cpu": 2, "gpu": 1}), 1, 2, tmp_path)
    exactly(scene, 1, 2)
    assert [g[0]["cuda"] for g in scene["generations"]] == ["0", "0"]


@pytest.mark.actorrt(num_cpus=4, num_gpus=2)
async def test_a_callable_decides_per_config(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    def per_config(config: dict[str, Any]) -> dict[str, float]:
        return {"gpu": 1} if config["use_gpu"] else {"gpu": 0}

    trainable = tune.with_resources(meet, per_config)
    # GPU trials: two GPUs, so two at a time while the third waits.
    _, scene = await sweep(trainable, 2, 3, tmp_path, use_gpu=True)
    exactly(scene, 2, 3)
    assert sorted(info["cuda"] for info in scene["generations"][0]) == ["0", "1"]
    # {"gpu": 0} reserves nothing (an empty head bundle): all run at once, with no GPU.
    _, scene = await sweep(trainable, 5, 5, tmp_path, use_gpu=False)
    exactly(scene, 5, 5)
    assert {info["cuda"] for info in scene["generations"][0]} == {""}


@pytest.mark.actorrt(num_cpus=8, resources={"TRAIN_DRIVER_RESOURCE": 2})
async def test_a_custom_resource_pins_and_limits_drivers(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    trainable = tune.with_resources(meet, {"cpu": 1, "TRAIN_DRIVER_RESOURCE": 1})
    _, scene = await sweep(trainable, 2, 3, tmp_path)
    exactly(scene, 2, 3)


@pytest.mark.actorrt(num_cpus=4)
async def test_max_concurrent_trials_caps_below_what_resources_allow(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    barrier = await Barrier.spawn(2, 4)
    grid = await tune.Tuner(
        tune.with_resources(meet, {"cpu": 0.5}),
        param_space={"barrier": barrier, "i": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors
    scene = await barrier.scene()
    # Resources allowed 8; the limiter started 2, and had not even asked for more.
    assert [len(g) for g in scene["generations"]] == [2, 2]
    assert scene["pending_at_open"] == [0, 0]
