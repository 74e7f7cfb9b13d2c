"""One record per placement group, kept by the broker and dropped with the group.

Groups reserved inside actors (inline, and in worker processes through the owner), granted
or still waiting, go when their holder ends: afterwards the broker holds no group, no request
waits, the scheduler awaits nothing, and everything is available again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import eventually

import actorrt


@actorrt.actor
class Reserver:
    """Reserves groups and keeps them: the groups are this actor's."""

    def __init__(self) -> None:
        self.groups: list[actorrt.PlacementGroup] = []
        self.child: Any = None

    async def reserve(self, bundles: list[dict[str, float]], wait: bool = True) -> str:
        group = actorrt.placement_group(bundles, strategy="SPREAD")
        if wait:
            await group.ready()
        self.groups.append(group)
        return group.id

    async def nested(self) -> str:
        """A child of this actor reserves a group too (it is the child's)."""
        self.child = await Reserver.spawn()
        return str(await self.child.reserve([{"CPU": 1}]))


def assert_no_group_left(rt: actorrt.Runtime) -> None:
    broker = rt.grants.broker
    assert broker.groups() == []
    assert broker.waiting_count == 0
    assert rt.grants._waiters == {}  # no future kept for a request that no longer exists
    assert actorrt.pending_requests() == []
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=4)
async def test_groups_reserved_by_an_inline_actor_go_when_it_ends(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    rt = actorrt_runtime
    reserver = await Reserver.spawn()
    gid = await reserver.reserve([{"CPU": 1}])
    info = rt.grants.broker.group_info(gid)
    assert info is not None and info.strategy == "SPREAD" and info.holder != "driver"
    child_gid = await reserver.nested()
    assert rt.grants.broker.group_info(child_gid).holder != info.holder  # type: ignore[union-attr]
    await reserver.reserve([{"CPU": 4}], wait=False)
    assert len(actorrt.pending_requests()) == 1  # this one waits
    assert len(rt.grants.broker.groups()) == 2
    await reserver.stop()
    await eventually(lambda: rt.grants.broker.groups() == [])
    assert_no_group_left(rt)


@pytest.mark.actorrt(num_cpus=4)
async def test_groups_reserved_in_a_worker_process_go_when_its_actor_ends(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    rt = actorrt_runtime
    stopped = await Reserver.options(num_cpus=1).spawn()
    killed = await Reserver.options(num_cpus=1).spawn()
    for worker in (stopped, killed):
        gid = await worker.reserve([{"CPU": 0.5}])
        assert rt.grants.broker.group_info(gid) is not None  # the owner keeps the record
    for worker in (stopped, killed):
        await worker.reserve([{"CPU": 4}], wait=False)
    assert len(rt.grants.broker.groups()) == 2
    assert len(actorrt.pending_requests()) == 2
    await stopped.stop()
    await killed.kill()
    assert await eventually(lambda: not rt.actors(), within=30)
    assert_no_group_left(rt)


@pytest.mark.actorrt(num_cpus=4)
async def test_a_trial_holding_its_group_leaves_nothing_behind(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    """An actor spawned with its own placement group holds it; a group it reserves from
    inside goes to the cluster and is its too."""
    rt = actorrt_runtime

    @actorrt.actor
    class Trial:
        def placement(self) -> Any:
            context = actorrt.get_context()
            return context.placement.bundle_specs, context.placement.strategy

        async def reserve(self) -> None:
            await actorrt.placement_group([{"CPU": 1}]).ready()

    trial = await Trial.options(placement_group=[{"CPU": 1}, {"CPU": 1}], strategy="PACK").spawn()
    assert await trial.placement() == ([{"CPU": 1.0}, {"CPU": 1.0}], "PACK")
    await trial.reserve()
    assert len(rt.grants.broker.groups()) == 2
    await trial.stop()
    assert_no_group_left(rt)


@pytest.mark.actorrt(num_cpus=2)
async def test_awaiting_a_group_whose_holder_ended_fails_instead_of_hanging(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    @actorrt.actor
    class Holder:
        def reserve(self) -> actorrt.PlacementGroup:
            return actorrt.placement_group([{"CPU": 2}])

    blocker = actorrt.placement_group([{"CPU": 2}])
    await blocker.ready()
    holder = await Holder.spawn()
    pending = await holder.reserve()  # an inline ask hands the handle over
    waiting = asyncio.ensure_future(pending.ready())
    assert await eventually(lambda: len(actorrt.pending_requests()) == 1)
    await holder.stop()
    with pytest.raises(actorrt.ResourceError, match="its holder ended"):
        await asyncio.wait_for(waiting, 10)
    await blocker.remove()
    assert_no_group_left(actorrt_runtime)


@pytest.mark.actorrt(num_cpus=2)
async def test_actors_holding_grants_on_a_lost_node_stop_and_nothing_is_left(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    """The scheduler acts on the broker's node events (what cluster mode builds on): a node
    joins, actors get grants on it, the node is lost, and they stop."""
    from actorrt.resources import NodeInventory

    rt = actorrt_runtime
    rt.grants.add_node(NodeInventory("remote", {"CPU": 1, "remote": 2}))
    assert actorrt.cluster_resources() == {"CPU": 3.0, "memory": rt.broker.total()["memory"],
                                           "remote": 2.0}  # fmt: skip

    @actorrt.actor
    class OnRemote:
        def placed(self) -> dict[str, float]:
            return actorrt.get_context().get_assigned_resources()

    there = await OnRemote.options(resources={"remote": 1}).spawn()
    group = actorrt.placement_group([{"remote": 1}])
    await group.ready()
    assert await there.placed() == {"remote": 1.0}
    here = await Reserver.spawn()
    deaths = rt.grants.node_lost("remote")
    assert len(deaths) == 1  # the actor placed there; the driver's group has no actor
    with pytest.raises(actorrt.ActorDiedError):
        await there.placed()
    with pytest.raises(actorrt.InfeasibleResourceError, match="can never hold"):
        await OnRemote.options(resources={"remote": 1}).spawn()
    assert rt.broker.groups() == []  # its bundle was on the lost node
    await here.stop()
    assert_no_group_left(rt)
    assert "remote" not in actorrt.cluster_resources()
