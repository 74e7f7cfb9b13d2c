"""Where the gang goes when fit() runs inside an actor with a placement group (a Tune
trial's driver): its declared bundles, or one gang reserved from the cluster."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import train

WORKER_ENV = {"OMP_NUM_THREADS": "1"}


def where_am_i() -> None:
    context = actorrt.get_context()
    placement = context.placement
    assert placement is not None
    train.report({
        "rank": train.get_context().get_world_rank(),
        "group": placement.group_id,
        "bundle": placement.bundle_index,
        "assigned": context.get_assigned_resources(),
    })


@actorrt.actor(process=True)
class Driver:
    """A trial-driver-like actor: builds a trainer and calls fit() from sync code."""

    def run_trainer(self, storage: str, num_workers: int, per_worker: dict[str, float]) -> Any:
        result = train.DataParallelTrainer(
            where_am_i,
            scaling_config=train.ScalingConfig(
                num_workers=num_workers, resources_per_worker=per_worker
            ),
            run_config=train.RunConfig(storage_path=storage),
        ).fit()
        placement = actorrt.get_context().placement
        return {"group": placement.group_id, "history": result.metrics_history}


async def spawn_driver(bundles: list[dict[str, float]]) -> Any:
    return await Driver.options(placement_group=bundles, worker_env=WORKER_ENV).spawn()


@pytest.mark.actorrt(num_cpus=4)
async def test_declared_workers_go_into_the_callers_bundles(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # What tune.with_resources(driver, scaling_config) reserves for a trial.
    factory = train.ScalingConfig(num_workers=3).as_placement_group_factory()
    assert factory.group_bundles[0] == {}  # Ray Train V2: the driver itself takes nothing
    driver = await spawn_driver(factory.group_bundles)
    assert actorrt.available_resources().get("CPU", 0) == 1
    out = await driver.run_trainer(str(tmp_path), 3, {"CPU": 1})
    # Rank 0 reported from bundle 1 of the driver's own group; nothing else was reserved.
    first = out["history"][0]
    assert first["group"] == out["group"] and first["bundle"] == 1
    assert first["assigned"] == {"CPU": 1.0}
    await driver.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=4)
async def test_a_driver_with_only_its_own_bundle_reserves_a_gang(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    driver = await spawn_driver([{"CPU": 1}])
    out = await driver.run_trainer(str(tmp_path), 2, {"CPU": 1})
    first = out["history"][0]
    # Rank 0 ran in bundle 0 of a group of its own, which the driver reserved for the gang.
    assert first["group"] != out["group"] and first["bundle"] == 0
    # The gang's group is gone again: only the driver's CPU is held.
    assert actorrt.available_resources()["CPU"] == 3
    await driver.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=4)
async def test_a_mismatched_declaration_is_a_value_error_showing_both(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    driver = await spawn_driver([{"CPU": 1}, {"CPU": 2}])
    with pytest.raises(ValueError) as err:
        await driver.run_trainer(str(tmp_path), 1, {"CPU": 1})
    text = str(err.value)
    assert "[{'CPU': 1.0}, {'CPU': 2.0}]" in text  # the declared group
    assert "1 worker bundle(s) of {'CPU': 1.0}" in text  # what the trainer needs
    assert "tune.with_resources(driver, scaling_config)" in text
    await driver.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=3)
async def test_undeclared_gangs_that_can_never_fit_are_a_deadlock_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Two drivers hold a CPU each; each trainer wants 2 more, and 1 is free: on Ray this
    # hangs. Here one of them is told, and once it ends the other one's gang runs.
    a = await spawn_driver([{"CPU": 1}])
    b = await spawn_driver([{"CPU": 1}])
    runs = {
        a: asyncio.ensure_future(a.run_trainer(str(tmp_path), 2, {"CPU": 1})),
        b: asyncio.ensure_future(b.run_trainer(str(tmp_path), 2, {"CPU": 1})),
    }
    done, _ = await asyncio.wait(runs.values(), return_when=asyncio.FIRST_COMPLETED)
    loser = next(d for d, run in runs.items() if run in done)
    with pytest.raises(actorrt.ResourceDeadlockError, match="declare"):
        runs[loser].result()
    await loser.stop()
    winner = a if loser is b else b
    out = await runs[winner]
    assert len(out["history"]) == 1
    await winner.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()
