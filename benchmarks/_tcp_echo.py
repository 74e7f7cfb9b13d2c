"""The raw msgpack echo baseline over TCP, for figures between hosts (cluster mode).

    python -m benchmarks._tcp_echo serve --host H --port P
    python -m benchmarks._tcp_echo client --host H --port P [--n-seq N] [--n-pipe N] [--window W]

The Unix-socket baseline of :mod:`benchmarks.wire`, moved onto TCP and nothing else changed,
so that ratios against either are comparable: the server is the same ``RawEcho`` protocol
(8-byte big-endian length, msgpack body; every complete frame written back as it is), the
client the same ``RawClient`` (msgpack-packs ``[id, ["m", [1, "x"], {}]]``, unpacks each
reply), measured the same way: sequential round trips, and a sliding window of requests in
flight (each reply read lets one more out). asyncio and uvloop both set ``TCP_NODELAY`` on
TCP transports, so a small frame goes out at once.

``serve`` listens on uvloop, prints ``ready PORT`` (the port it got, also for ``--port 0``)
and serves until SIGTERM or SIGINT. ``client`` prints one JSON line of both rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

import uvloop

from ._echo_server import RawEcho
from .wire import WINDOW, RawClient, raw_pipelined, raw_sequential

WARMUP = 200  # round trips before a measurement, as benchmarks.wire and .processes warm up


async def _connect(host: str, port: int) -> RawClient:
    _, client = await asyncio.get_running_loop().create_connection(RawClient, host, port)
    await raw_sequential(client, WARMUP)
    return client


async def echo_sequential(host: str, port: int, n: int) -> float:
    """Round trips per second of ``n`` sequential frames to a ``serve`` at ``host:port``
    (after a warm-up of 200 on the same connection, not counted)."""
    _check_count(n)
    client = await _connect(host, port)
    try:
        return await raw_sequential(client, n)
    finally:
        client.transport.close()


async def echo_pipelined(host: str, port: int, n: int, window: int = WINDOW) -> float:
    """Frames per second echoed with ``window`` of them in flight, ``n`` in all."""
    _check_count(n)
    if window < 1:
        raise ValueError(f"window must be at least 1 frame in flight, not {window!r}")
    client = await _connect(host, port)
    try:
        return await raw_pipelined(client, n, window)
    finally:
        client.transport.close()


def _check_count(n: int) -> None:
    if n < 1:
        raise ValueError(f"n must be at least 1 round trip to measure, not {n!r}")


async def _serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(RawEcho, host, port)
    stop = loop.create_future()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: stop.done() or stop.set_result(None))
    sys.stdout.write(f"ready {server.sockets[0].getsockname()[1]}\n")
    sys.stdout.flush()
    await stop
    server.close()
    await server.wait_closed()


async def _client(host: str, port: int, n_seq: int, n_pipe: int, window: int) -> dict[str, float]:
    return {
        "sequential_per_s": await echo_sequential(host, port, n_seq),
        "pipelined_per_s": await echo_pipelined(host, port, n_pipe, window),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["serve", "client"])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-seq", type=int, default=3_000)
    parser.add_argument("--n-pipe", type=int, default=60_000)
    parser.add_argument("--window", type=int, default=WINDOW)
    args = parser.parse_args()
    if args.mode == "serve":
        uvloop.run(_serve(args.host, args.port))
    else:
        rates = uvloop.run(_client(args.host, args.port, args.n_seq, args.n_pipe, args.window))
        print(json.dumps({"host": args.host, "port": args.port, "window": args.window, **rates}))


if __name__ == "__main__":
    main()
