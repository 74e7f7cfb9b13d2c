"""The seed's arithmetic, GPUs, custom resources and placement groups, with real processes.

Each parallelism case spawns actors until the resources are used up: exactly N run together
(they meet at a barrier that only opens with N present) and the next one is held back (its
request is pending) until one of them ends.
"""

import asyncio
import os

import pytest
from conftest import eventually

import actorrt


@actorrt.actor(max_concurrency=64)
class Barrier:
    """Opens once ``n`` parties have arrived."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrived = 0
        self.open = asyncio.Event()

    async def meet(self) -> int:
        self.arrived += 1
        if self.arrived >= self.n:
            self.open.set()
        await self.open.wait()
        return self.arrived


@actorrt.actor
class Trial:
    def visible_gpus(self) -> str | None:
        return os.environ.get("CUDA_VISIBLE_DEVICES")

    async def meet(self, barrier: actorrt.ActorRef[Barrier]) -> int:
        return int(await barrier.meet())


async def run_exactly(n: int, options: dict[str, object]) -> list[actorrt.ActorRef[Trial]]:
    """Spawn n actors with ``options`` (they fit), then show that the (n+1)th waits."""
    barrier = await Barrier.spawn(n)
    trials = [await Trial.options(**options).spawn() for _ in range(n)]
    assert await asyncio.gather(*(t.meet(barrier) for t in trials)) == [n] * n
    extra = asyncio.ensure_future(Trial.options(**options).spawn())
    assert await eventually(lambda: len(actorrt.pending_requests()) == 1)
    assert not extra.done()
    await trials[0].stop()
    trials[0] = await extra  # one ended, the waiting one starts
    assert actorrt.pending_requests() == []
    return trials


@pytest.mark.actorrt(num_cpus=4)
@pytest.mark.parametrize(
    ("cpus", "n"), [(1, 4), (2, 2), (4, 1), (0.5, 8)], ids=["1cpu", "2cpu", "4cpu", "halfcpu"]
)
async def test_parallelism_is_total_over_request(
    actorrt_runtime: actorrt.Runtime, cpus: float, n: int
) -> None:
    assert actorrt.cluster_resources()["CPU"] == 4
    trials = await run_exactly(n, {"num_cpus": cpus})
    for trial in trials:
        await trial.stop()
    assert actorrt.available_resources()["CPU"] == 4


@pytest.mark.actorrt(num_cpus=4, num_gpus=8)
async def test_eight_gpus_one_each_distinct_devices(actorrt_runtime: actorrt.Runtime) -> None:
    trials = await run_exactly(8, {"num_gpus": 1, "num_cpus": 0})
    devices = [await t.visible_gpus() for t in trials]
    assert sorted(devices, key=int) == [str(i) for i in range(8)]  # type: ignore[arg-type]
    plain = await Trial.options(num_cpus=0.1).spawn()
    assert await plain.visible_gpus() == ""  # no GPU asked, none visible


@pytest.mark.actorrt(num_cpus=4, num_gpus=1)
async def test_the_scarcer_resource_decides(actorrt_runtime: actorrt.Runtime) -> None:
    await run_exactly(1, {"num_cpus": 2, "num_gpus": 1})


@pytest.mark.actorrt(num_cpus=8, resources={"TRAIN_DRIVER_RESOURCE": 2})
async def test_a_custom_resource_limits_like_a_builtin(actorrt_runtime: actorrt.Runtime) -> None:
    await run_exactly(2, {"num_cpus": 1, "resources": {"TRAIN_DRIVER_RESOURCE": 1}})
    with pytest.raises(actorrt.InfeasibleResourceError, match="TRAIN_DRIVER_RESOURCE"):
        await Trial.options(resources={"TRAIN_DRIVER_RESOURCE": 3}).spawn()


@pytest.mark.actorrt(num_cpus=4)
async def test_bad_requests_fail_at_the_call(actorrt_runtime: actorrt.Runtime) -> None:
    with pytest.raises(actorrt.InfeasibleResourceError, match="CPU"):
        await Trial.options(num_cpus=5).spawn()
    with pytest.raises(ValueError, match="num_cpus=-1"):
        Trial.options(num_cpus=-1)
    with pytest.raises(ValueError, match="STRICT_SPREAD"):
        actorrt.placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
    with pytest.raises(ValueError):
        actorrt.placement_group([{"CPU": 0}])
    assert actorrt.available_resources()["CPU"] == 4


@pytest.mark.actorrt(num_cpus=4)
async def test_placement_groups_are_atomic_and_hold_actors(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    pg = actorrt.placement_group([{"CPU": 1}, {"CPU": 2}], strategy="PACK")
    await pg.ready(timeout=5)
    assert actorrt.available_resources()["CPU"] == 1
    too_big = actorrt.placement_group([{"CPU": 1}, {"CPU": 1}])  # only 1 CPU is free
    with pytest.raises(TimeoutError, match="not ready"):
        await too_big.ready(timeout=0.2)
    assert actorrt.available_resources()["CPU"] == 1  # all or nothing: no partial hold
    await too_big.remove()  # a timed-out wait leaves it queued, as in Ray
    a = await Trial.options(num_cpus=0.5, placement=pg.bundle(0)).spawn()
    b = await Trial.options(num_cpus=0.5, placement=pg.bundle(0)).spawn()  # two fit bundle 0
    c = await Trial.options(num_cpus=2, placement=pg).spawn()  # any bundle with room
    assert actorrt.available_resources()["CPU"] == 1
    with pytest.raises(ValueError, match="out of range"):
        pg.bundle(2)
    await pg.remove()
    for ref in (a, b, c):
        assert (await ref.wait_stopped()).reason == "placement group removed"
    assert actorrt.available_resources()["CPU"] == 4


@pytest.mark.actorrt(num_cpus=2)
async def test_cancelling_a_spawn_or_ready_withdraws_the_request(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    holder = await Trial.options(num_cpus=2).spawn()
    waiting = asyncio.ensure_future(Trial.options(num_cpus=1).spawn())
    assert await eventually(lambda: len(actorrt.pending_requests()) == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    pg = actorrt.placement_group([{"CPU": 2}])
    ready = asyncio.ensure_future(pg.ready())
    await asyncio.sleep(0)  # let the wait begin: a task cancelled before its first step never ran
    assert len(actorrt.pending_requests()) == 1
    ready.cancel()
    with pytest.raises(asyncio.CancelledError):
        await ready
    assert actorrt.pending_requests() == []
    await holder.stop()
    assert actorrt.available_resources()["CPU"] == 2


@actorrt.actor
class Driver:
    """A trial driver: holds its own CPU, then starts workers."""

    async def start_workers(self, n: int, cpus: float, placement: str = "auto") -> list[int]:
        workers = [
            await Trial.options(num_cpus=cpus, placement=placement).spawn() for _ in range(n)
        ]
        return [len(workers)]

    async def start_and_hold(self, gate: actorrt.ActorRef[Barrier]) -> str:
        worker = await Trial.options(num_cpus=1, placement="cluster").spawn()
        await gate.meet()
        await worker.stop()
        return "ran"


@pytest.mark.actorrt(num_cpus=4)
async def test_children_are_captured_by_their_parents_group(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    driver = await Driver.options(placement_group=[{"CPU": 1}, {"CPU": 1}, {"CPU": 1}]).spawn()
    assert actorrt.available_resources()["CPU"] == 1
    assert await driver.start_workers(2, 1) == [2]  # into bundles 1 and 2: nothing more taken
    assert actorrt.available_resources()["CPU"] == 1
    with pytest.raises(actorrt.InfeasibleResourceError, match="bundle"):
        await driver.start_workers(1, 2)  # can never fit any bundle of the group
    await driver.stop()
    assert actorrt.available_resources()["CPU"] == 4


@actorrt.actor
class Coordinator:
    """An inline go-between: the driver asks it, it spawns the worker."""

    async def spawn_worker(self) -> str:
        worker = await Trial.options(num_cpus=1, placement="cluster").spawn()
        await worker.stop()
        return "spawned"


@actorrt.actor(num_cpus=1)
class IndirectDriver:
    async def via(self, coordinator: actorrt.ActorRef[Coordinator]) -> str:
        return str(await coordinator.spawn_worker())


async def exactly_one_deadlock(runs: list[asyncio.Future[str]], stop: list[object]) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    done, _ = await asyncio.wait(runs, return_when=asyncio.FIRST_COMPLETED, timeout=10)
    assert len(done) == 1, "no deadlock was reported"
    assert loop.time() - started < 1.5
    victim = done.pop()
    err = victim.exception()
    assert isinstance(err, actorrt.ResourceDeadlockError), err
    text = str(err)
    assert "{CPU: 1}" in text and "placement_group=[its own bundle]" in text
    assert "PlacementGroupFactory" not in text  # no trial here: no Tune words in the fix
    index = runs.index(victim)
    await stop[index].stop()  # type: ignore[attr-defined]
    other = runs[1 - index]
    assert await asyncio.wait_for(other, 10) in ("ran", "spawned")


@pytest.mark.actorrt(num_cpus=2)
async def test_the_seeds_deadlock_is_an_error_not_a_hang(actorrt_runtime: actorrt.Runtime) -> None:
    gate = await Barrier.spawn(1)
    drivers = [await Driver.options(num_cpus=1).spawn() for _ in range(2)]
    runs = [asyncio.ensure_future(d.start_and_hold(gate)) for d in drivers]
    await exactly_one_deadlock(runs, drivers)  # type: ignore[arg-type]


@pytest.mark.actorrt(num_cpus=2)
async def test_the_deadlock_through_an_intermediary(actorrt_runtime: actorrt.Runtime) -> None:
    drivers = [await IndirectDriver.spawn() for _ in range(2)]
    coordinators = [await Coordinator.spawn() for _ in range(2)]
    runs = [asyncio.ensure_future(d.via(c)) for d, c in zip(drivers, coordinators, strict=True)]
    await exactly_one_deadlock(runs, drivers)  # type: ignore[arg-type]


@pytest.mark.actorrt(num_cpus=1)
async def test_a_busy_holder_is_not_a_deadlock(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor(num_cpus=1)
    class Busy:
        def work(self, seconds: float) -> str:
            import time

            time.sleep(seconds)
            return "worked"

    busy = await Busy.spawn()
    working = busy.work(1.0)
    coordinator = await Coordinator.spawn()
    spawning = asyncio.ensure_future(coordinator.spawn_worker())
    assert await working == "worked"  # a second passed with the spawn waiting: no error
    assert not spawning.done()
    await busy.stop()
    assert await spawning == "spawned"


@pytest.mark.actorrt(num_cpus=4)
async def test_an_actor_learns_its_grant_and_places_children_in_its_bundles(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    @actorrt.actor
    class Leaf:
        def context(self) -> actorrt.RuntimeContext:
            return actorrt.get_context()

    @actorrt.actor(num_cpus=1)
    class Lead:
        async def go(self) -> tuple[actorrt.RuntimeContext, actorrt.RuntimeContext]:
            mine = actorrt.get_context()
            assert mine.placement is not None
            leaf = await Leaf.options(num_cpus=2, placement=mine.placement.bundle(1)).spawn()
            return mine, await leaf.context()

    lead = await Lead.options(placement_group=[{"CPU": 1}, {"CPU": 2}]).spawn()
    mine, leafs = await lead.go()
    assert mine.get_assigned_resources() == {"CPU": 1.0}
    assert mine.placement is not None and mine.placement.bundle_index == 0
    assert mine.placement.bundle_specs == [{"CPU": 1.0}, {"CPU": 2.0}]
    assert leafs.actor_class == "Leaf" and leafs.placement is not None
    assert leafs.placement.bundle_index == 1 and leafs.assigned_resources == {"CPU": 2.0}
    assert actorrt.available_resources()["CPU"] == 1  # the leaf drew from the group only


@pytest.mark.actorrt(num_cpus=4)
async def test_placement_groups_made_in_a_worker_are_held_by_its_actor(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    @actorrt.actor(num_cpus=1)
    class Planner:
        async def plan(self) -> str | None:
            pg = actorrt.placement_group([{"CPU": 1}, {"CPU": 1}])
            await pg.ready(timeout=10)
            worker = await Trial.options(num_cpus=1, placement=pg.bundle(1)).spawn()
            return await worker.visible_gpus()

        async def too_big(self) -> None:
            await actorrt.placement_group([{"CPU": 8}]).ready()

        async def forever(self) -> None:
            await actorrt.placement_group([{"CPU": 4}]).ready(timeout=0.2)

    planner = await Planner.spawn()
    assert await planner.plan() == ""
    assert actorrt.available_resources().get("CPU", 0) == 1  # 1 for it, 2 in its group
    with pytest.raises(actorrt.InfeasibleResourceError):
        await planner.too_big()
    with pytest.raises(TimeoutError):
        await planner.forever()
    assert actorrt.available_resources().get("CPU", 0) == 1  # the timed-out one holds nothing
    await planner.stop()  # its group goes with it
    assert actorrt.available_resources()["CPU"] == 4


@pytest.mark.actorrt(num_cpus=2)
async def test_a_timed_out_ready_keeps_the_group_queued(actorrt_runtime: actorrt.Runtime) -> None:
    # As in Ray (ray.get(pg.ready(), timeout=...)): the wait ends, the group does not.
    hog = await Trial.options(num_cpus=1).spawn()
    pg = actorrt.placement_group([{"CPU": 1}, {"CPU": 1}])
    with pytest.raises(TimeoutError, match="still queued: await pg.ready\\(\\) again"):
        await pg.ready(timeout=0.2)
    with pytest.raises(TimeoutError):
        await pg.ready(timeout=0.1)  # again: the same wait, still queued
    assert [p.request_id for p in actorrt.pending_requests()] == [pg.id]
    await hog.stop()
    await pg.ready(timeout=30)  # granted once the CPU came back
    assert pg.is_ready() and actorrt.available_resources().get("CPU", 0) == 0
    await pg.remove()
    assert actorrt.available_resources()["CPU"] == 2


@pytest.mark.actorrt(num_cpus=3)
async def test_pending_reasons_name_holders_and_read_as_queueing(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # One CPU each: a worker-process actor, an inline actor, and a group the program holds.
    proc = await Trial.options(num_cpus=1, name="hog-proc").spawn()
    inline = await Trial.options(num_cpus=1, process=False, name="hog-inline").spawn()
    pg = actorrt.placement_group([{"CPU": 1}])
    await pg.ready()
    big = asyncio.ensure_future(Trial.options(num_cpus=2, name="big").spawn())
    small: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    try:
        assert await eventually(lambda: len(actorrt.pending_requests()) == 1)
        small = asyncio.ensure_future(Trial.options(num_cpus=1, name="small").spawn())
        assert await eventually(lambda: len(actorrt.pending_requests()) == 2)
        first, second = actorrt.pending_requests()
        assert first.bundles == ({"CPU": 2.0},) and second.bundles == ({"CPU": 1.0},)
        for p in (first, second):
            assert p.reason.startswith("waiting for {CPU: ")
            assert "Trial(id=" in p.reason and "name='hog-proc'" in p.reason
            assert "name='hog-inline'" in p.reason and "the driver program" in p.reason
            for holder in p.held_by:  # every holder by class and name, none as a bare id
                assert holder == "driver" or f"(id={holder} " in p.reason
            assert "stalled" not in p.reason and "first in line" not in p.reason
        assert first.reason.endswith("it is next in line: what frees there is set aside for it")
        assert "it is 2nd in line" in second.reason
        # A CPU frees: it is set aside for the older request, which the younger one now waits
        # behind; one account of that, not two that contradict each other.
        await inline.stop()
        assert await eventually(lambda: actorrt.pending_requests()[1].behind != ())
        first, second = actorrt.pending_requests()
        assert second.behind == (first.request_id,)
        assert second.reason == (
            "what it needs is free, but set aside for the request ahead of it: request "
            f"{first.request_id} of Trial(id={first.holder} name='big'); it is 2nd in line"
        )
    finally:
        small.cancel()
        big.cancel()
        await asyncio.gather(big, small, return_exceptions=True)
        await pg.remove()
        await proc.stop()
