"""Fairness of the cluster queue through the public API (inline actors holding grants).

A large gang is not starved by a stream of small requests; small requests that take
nothing reserved still run (backfill); an actor that already holds resources is served at
its own admission time, ahead of a later gang (no priority inversion).
"""

import asyncio

import pytest
from conftest import eventually

import actorrt


@actorrt.actor(process=False)
class Holder:
    async def spawn_child(self, cpus: float) -> actorrt.ActorRef["Holder"]:
        return await Holder.options(num_cpus=cpus, process=False, placement="cluster").spawn()


def small(cpus: float = 1, **extra: object) -> actorrt.ActorClass[Holder]:
    return Holder.options(num_cpus=cpus, **extra)


@pytest.mark.actorrt(num_cpus=4)
async def test_a_gang_is_not_starved_by_a_stream_of_small_requests(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    holders = [await small().spawn() for _ in range(4)]
    gang = actorrt.placement_group([{"CPU": 2}, {"CPU": 2}])
    gang_ready = asyncio.ensure_future(gang.ready())
    later: list[asyncio.Future[actorrt.ActorRef[Holder]]] = []
    for holder in holders:
        await holder.stop()  # one CPU frees...
        later.append(asyncio.ensure_future(small().spawn()))  # ...and a small request arrives
        await asyncio.sleep(0)
    await asyncio.wait_for(gang_ready, 5)  # the gang got every freed CPU
    assert not any(f.done() for f in later)  # the stream waited behind it
    await gang.remove()
    assert len(await asyncio.gather(*later)) == 4


@pytest.mark.actorrt(num_cpus=4, resources={"DISK": 2})
async def test_small_requests_that_take_nothing_reserved_backfill(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    first = [await small().spawn() for _ in range(3)]  # 1 CPU left
    gang = actorrt.placement_group([{"CPU": 2}])  # waits, with a reservation on CPUs
    ready = asyncio.ensure_future(gang.ready())
    await asyncio.sleep(0)
    # Takes no CPU, so nothing the gang waits for: granted at once.
    disk = await asyncio.wait_for(small(0, resources={"DISK": 1}).spawn(), 5)
    # Would take the free CPU the gang is owed: it waits behind the gang.
    greedy = asyncio.ensure_future(small(1).spawn())
    assert await eventually(lambda: len(actorrt.pending_requests()) == 2)
    await first[0].stop()
    await asyncio.wait_for(ready, 5)
    assert not greedy.done()
    await gang.remove()
    await asyncio.wait_for(greedy, 5)
    await disk.stop()


@pytest.mark.actorrt(num_cpus=4)
async def test_an_actor_holding_resources_is_not_stuck_behind_a_later_gang(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    early = await small().spawn()  # admitted first
    middle = await small(2).spawn()
    gang = actorrt.placement_group([{"CPU": 3}])  # later; waits (1 CPU free)
    ready = asyncio.ensure_future(gang.ready())
    await asyncio.sleep(0)
    # The early actor's child is served at the early actor's admission time: before the gang.
    child = await asyncio.wait_for(early.spawn_child(1), 5)
    assert not ready.done()
    await child.stop()
    await early.stop()
    await middle.stop()
    await asyncio.wait_for(ready, 5)
    await gang.remove()
