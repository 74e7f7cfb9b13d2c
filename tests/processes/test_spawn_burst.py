"""Many process-actor spawns in flight at once: every one starts, or fails saying why, and a
spawn that runs out of time says where it was."""

import asyncio
import os
import signal
import time

import pytest

import actorrt

BURST = int(os.environ.get("BURST", "500"))  # spawns in flight at once (BURST=1000 for more)


@actorrt.actor(process=True)
class Member:
    def pid(self) -> int:
        return os.getpid()


@pytest.mark.timeout(300)
@pytest.mark.actorrt(num_cpus=2)
async def test_hundreds_of_process_spawns_in_flight_all_start(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # All at once: their fork requests queue at the fork server's control socket, which
    # fills; each one is sent in turn, none is forgotten.
    began = time.monotonic()
    results = await asyncio.wait_for(
        asyncio.gather(*(Member.spawn() for _ in range(BURST)), return_exceptions=True),
        240,
    )
    took = time.monotonic() - began
    failed = [r for r in results if isinstance(r, BaseException)]
    assert not failed, f"{len(failed)} of {BURST} spawns failed, e.g. {failed[0]!r}"
    refs = [r for r in results if not isinstance(r, BaseException)]
    pids = await asyncio.gather(*(ref.pid() for ref in refs))
    assert len(set(pids)) == BURST  # each in a worker process of its own
    forks = (await actorrt_runtime.workers.pool()).forks
    assert forks is not None and forks.lost_reason is None, "the fork server gave up"
    await asyncio.gather(*(ref.stop() for ref in refs))
    print(f"{BURST} process spawns in flight at once started in {took:.1f} s")


async def fork_server_pid(rt: actorrt.Runtime) -> int:
    forks = (await rt.workers.pool()).forks
    assert forks is not None and forks.pid is not None, "no fork server runs"
    return forks.pid


@pytest.mark.actorrt(num_cpus=2)
async def test_a_spawn_that_times_out_at_the_fork_server_says_so(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    first = await Member.spawn()  # the fork server runs now
    server = await fork_server_pid(actorrt_runtime)
    os.kill(server, signal.SIGSTOP)  # it reads no request until it is continued
    try:
        with pytest.raises(TimeoutError) as caught:
            await Member.options(spawn_timeout=1.0).spawn()
    finally:
        os.kill(server, signal.SIGCONT)
    message = str(caught.value)
    assert "spawn_timeout=1.0 s" in message and "withdrawn" in message
    assert f"waiting for the fork server (pid {server}) to fork its worker process" in message
    # The fork answered after the spawn gave up is ended; the fork server still serves.
    assert await (await Member.spawn()).pid() != await first.pid()


@pytest.mark.actorrt(num_cpus=1)
async def test_a_spawn_that_times_out_waiting_for_resources_says_so(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    holder = await Member.options(num_cpus=1).spawn()
    with pytest.raises(TimeoutError, match="waiting for its resources to be granted"):
        await Member.options(num_cpus=1, spawn_timeout=0.5).spawn()
    await holder.stop()
