"""Refs carry the address of the process that hosts their actor: real runtimes and workers."""

from __future__ import annotations

import os
from typing import Any

import msgpack
import pytest

import actorrt
from actorrt._wire._refs import RefAddress, WireRef, decode_ref

pytestmark = pytest.mark.timeout(60)


@actorrt.actor(process=False)
class Helper:
    """An inline actor; started inside a worker, it lives in that worker's process."""

    def where(self) -> int:
        return os.getpid()

    def add(self, a: int, b: int) -> int:
        return a + b


@actorrt.actor(process=True, num_cpus=0.01)
class Host:
    def __init__(self) -> None:
        self.helper: actorrt.ActorRef[Helper] | None = None

    async def start_helper(self) -> actorrt.ActorRef[Helper]:
        self.helper = await Helper.spawn()
        return self.helper

    def pid(self) -> int:
        return os.getpid()


@actorrt.actor(process=True, num_cpus=0.01)
class Caller:
    async def call(self, ref: actorrt.ActorRef[Helper]) -> tuple[int, int]:
        return await ref.where(), await ref.add(2, 3)


async def test_a_helper_inside_a_worker_is_reachable_from_the_driver_and_other_workers(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    host = await Host.spawn()
    helper = await host.start_helper()
    host_pid = await host.pid()
    # The owner routes to the worker that hosts the helper, as the ref's address says.
    assert await helper.where() == host_pid
    assert await helper.add(1, 2) == 3
    # Passed on to another worker: it goes through the owner, which routes it on.
    caller = await Caller.spawn()
    assert await caller.call(helper) == (host_pid, 5)
    died = await helper.stop()
    assert died.reason == "stopped"
    with pytest.raises(actorrt.ActorDiedError, match="no longer exists"):
        await helper.add(1, 1)
    with pytest.raises(actorrt.ActorDiedError, match="no longer exists"):
        await caller.call(helper)


async def test_a_ref_says_which_process_hosts_its_actor(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    rt = actorrt_runtime
    inline = await Helper.spawn()
    host = await Host.spawn()
    helper = await host.start_helper()

    def wire_form(ref: actorrt.ActorRef[Any]) -> WireRef:
        payload = rt.workers.codec.encode(ref)[1:]  # after the flag byte: one ext record
        return decode_ref(msgpack.unpackb(payload, ext_hook=lambda code, data: data))

    here = wire_form(inline)
    assert here.address == RefAddress(rt.runtime_id, None) and here.cls_name == "Helper"
    supervised = wire_form(host)
    assert supervised.address == RefAddress(rt.runtime_id, None)  # its owner re-homes it
    inside = wire_form(helper)
    assert inside.address.runtime == rt.runtime_id
    assert inside.address.worker is not None  # the worker that hosts it


async def test_a_ref_to_an_actor_of_a_runtime_that_is_gone_says_so() -> None:
    async with actorrt.Runtime(num_cpus=1) as first:
        old = await Helper.spawn()
        assert await old.add(1, 1) == 2
        data = first.workers.codec.encode(old)
        first_id = first.runtime_id
    async with actorrt.Runtime(num_cpus=1) as second:
        stale = second.workers.codec.decode(data)
        with pytest.raises(actorrt.ActorDiedError) as caught:
            await stale.add(1, 1)
        text = str(caught.value)
        assert f"belonged to runtime {first_id}, which is gone" in text, text
        assert second.runtime_id in text and caught.value.reason == "runtime shut down"
        assert (await stale.stop()).reason == "runtime shut down"
