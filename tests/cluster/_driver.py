"""A driver program for cluster tests that need the driver in a process (and on a host) of
its own: ``python tests/cluster/_driver.py HOST:PORT``.

It joins the cluster, reserves a placement group of one ``{"one": 1}`` bundle, prints
``held``, and then waits for a line on stdin; at that line it asks for one more group and
prints what became of that request: ``result: granted``, or the error's type and message on
one line (``result: DriverDroppedError: ...``). Its log lines go to stderr. The token comes
from ``ACTORRT_CLUSTER_TOKEN_FILE``.
"""

from __future__ import annotations

import asyncio
import sys

import actorrt


async def main(address: str) -> None:
    async with actorrt.Runtime(address=address):
        held = actorrt.placement_group([{"one": 1}])
        await held.ready(timeout=60)
        print("held", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        try:
            more = actorrt.placement_group([{"CPU": 0.5}])
            await more.ready(timeout=30)
            print("result: granted", flush=True)
        except Exception as exc:
            print(f"result: {type(exc).__name__}: {exc}".replace("\n", " "), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
