"""A heartbeat watch reads what its loop's sockets hold before it judges a peer silent: beats
that arrived while a callback held the loop count, on uvloop (which runs the timers that end
a round before it polls for I/O again) as on asyncio's own loop."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
import uvloop

from actorrt._cluster._beats import LoopWatch


class Heard(asyncio.DatagramProtocol):
    """The beats received."""

    def __init__(self) -> None:
        self.datagrams: list[bytes] = []

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.datagrams.append(data)


class Work(asyncio.DatagramProtocol):
    """A message whose handling holds the loop (as a burst of requests on the head's
    connections does), during which a beat arrives on another socket."""

    def __init__(self, beat_to: Any) -> None:
        self.beat_to = beat_to

    def datagram_received(self, data: bytes, addr: Any) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
            peer.sendto(b"beat", self.beat_to)
        time.sleep(0.2)  # longer than the round: it ends while the loop is held


async def _what_a_round_ending_in_a_held_loop_has_heard() -> list[bytes]:
    loop = asyncio.get_running_loop()
    beats, heard = await loop.create_datagram_endpoint(Heard, local_addr=("127.0.0.1", 0))
    beat_to = beats.get_extra_info("sockname")
    work, _ = await loop.create_datagram_endpoint(lambda: Work(beat_to),
                                                  local_addr=("127.0.0.1", 0))
    try:
        watch = LoopWatch(every=0.05, grace=10.0)

        async def judge() -> list[bytes]:
            await watch.round()
            return list(heard.datagrams)  # what the watch knows when it judges

        judging = asyncio.ensure_future(judge())
        await asyncio.sleep(0)  # the round has begun
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.sendto(b"work", work.get_extra_info("sockname"))
        return await judging
    finally:
        beats.close()
        work.close()


@pytest.mark.parametrize("run", [uvloop.run, asyncio.run], ids=["uvloop", "asyncio"])
def test_a_round_reads_the_beats_that_arrived_while_its_loop_was_held(
    run: Callable[[Any], list[bytes]],
) -> None:
    assert run(_what_a_round_ending_in_a_held_loop_has_heard()) == [b"beat"]
