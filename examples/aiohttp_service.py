"""Embedding actorrt in an aiohttp web service: request handlers ask actors.

    python examples/aiohttp_service.py               # serve on http://127.0.0.1:8080
    python examples/aiohttp_service.py --self-test   # serve on a free port, query it, exit

The runtime runs inside aiohttp's own event loop: ``async with actorrt.Runtime()`` is entered
when the app starts (a cleanup context) and left when it stops, which stops every actor and
worker process. Handlers just ``await`` refs.

- ``GET /visit/{name}`` asks an inline actor that counts visits (state without locks).
- ``GET /squares?n=...`` asks an actor in a worker process to do CPU work, so the server's
  event loop stays free for other requests while it runs.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator

from aiohttp import ClientSession, web

import actorrt


@actorrt.actor
class Visits:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def visit(self, name: str) -> int:
        self.counts[name] = self.counts.get(name, 0) + 1
        return self.counts[name]


@actorrt.actor(num_cpus=1)
class Squares:
    def sum_of_squares(self, n: int) -> int:
        return sum(i * i for i in range(n))


VISITS = web.AppKey("visits", actorrt.ActorRef)
SQUARES = web.AppKey("squares", actorrt.ActorRef)


async def actor_runtime(app: web.Application) -> AsyncIterator[None]:
    """Start the runtime and the service's actors with the app; stop them with it."""
    async with actorrt.Runtime(num_cpus=1):
        app[VISITS] = await Visits.spawn()
        app[SQUARES] = await Squares.spawn()
        yield


async def visit(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    count = await request.app[VISITS].visit(name)
    return web.json_response({"name": name, "visits": count})


async def squares(request: web.Request) -> web.Response:
    try:
        n = int(request.query.get("n", "1000"))
    except ValueError:
        raise web.HTTPBadRequest(text="n must be an integer") from None
    # A bounded ask: a slow worker turns into a 504, not a request that hangs.
    try:
        total = await request.app[SQUARES].sum_of_squares.options(timeout=10)(n)
    except actorrt.AskTimeoutError:
        raise web.HTTPGatewayTimeout(text="the worker took too long") from None
    return web.json_response({"n": n, "sum_of_squares": total})


def make_app() -> web.Application:
    app = web.Application()
    app.cleanup_ctx.append(actor_runtime)
    app.router.add_get("/visit/{name}", visit)
    app.router.add_get("/squares", squares)
    return app


async def self_test() -> None:
    """Serve on a free port, make real HTTP requests, print the replies, shut down."""
    runner = web.AppRunner(make_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    base = f"http://127.0.0.1:{port}"
    print(f"serving on {base}")
    async with ClientSession() as session:
        for path in ["/visit/ada", "/visit/ada", "/visit/grace", "/squares?n=1000"]:
            async with session.get(base + path) as response:
                print(f"GET {path} -> {response.status} {await response.json()}")
        # Requests are answered while the worker process crunches a big one.
        loop = asyncio.get_running_loop()
        start = loop.time()
        slow = asyncio.ensure_future(session.get(base + "/squares?n=3000000"))
        for _ in range(20):
            async with session.get(base + "/visit/load") as response:
                await response.json()
        visits_ms = (loop.time() - start) * 1000
        async with await slow as response:
            await response.json()
        slow_ms = (loop.time() - start) * 1000
        print(f"20 visits answered in {visits_ms:.0f} ms, beside a request that took "
              f"{slow_ms:.0f} ms in the worker process")
    await runner.cleanup()  # leaves the runtime: actors stop, the worker process exits
    print("stopped cleanly")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--self-test", action="store_true", help="query itself, then exit")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    if args.self_test:
        asyncio.run(self_test())
    else:
        web.run_app(make_app(), host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
