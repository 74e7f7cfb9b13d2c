"""The raw msgpack echo baseline over TCP, for figures between hosts (cluster mode).

    python -m benchmarks._tcp_echo serve --host H --port P [--tls]
    python -m benchmarks._tcp_echo client --host H --port P [--tls] [--n-seq N] [--n-pipe N]
                                          [--window W]

The Unix-socket baseline of :mod:`benchmarks.wire`, moved onto TCP and nothing else changed,
so that ratios against either are comparable: the server is the same ``RawEcho`` protocol
(8-byte big-endian length, msgpack body; every complete frame written back as it is), the
client the same ``RawClient`` (msgpack-packs ``[id, ["m", [1, "x"], {}]]``, unpacks each
reply), measured the same way: sequential round trips, and a sliding window of requests in
flight (each reply read lets one more out). asyncio and uvloop both set ``TCP_NODELAY`` on
TCP transports, so a small frame goes out at once.

``--tls`` runs the same echo over TLS, with Python's :mod:`ssl` on both ends as the loop
drives it (the server a fresh self-signed certificate, the client verifying none), the
contexts a cluster's connections use (``actorrt._wire._tls``): a baseline that pays the
encryption a cluster's calls pay, beside the plain one.

``serve`` listens on uvloop, prints ``ready PORT`` (the port it got, also for ``--port 0``)
and serves until SIGTERM or SIGINT. ``client`` prints one JSON line of both rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import ssl
import sys
import tempfile

import uvloop

from actorrt._wire import _tls

from ._echo_server import RawEcho
from .wire import WINDOW, RawClient, raw_pipelined, raw_sequential

WARMUP = 200  # round trips before a measurement, as benchmarks.wire and .processes warm up


async def connect(host: str, port: int, tls: bool = False) -> RawClient:
    """A client connected to a ``serve`` at ``host:port`` (``tls``: a ``serve --tls``),
    warmed up by 200 round trips."""
    context = _tls.client_context() if tls else None
    _, client = await asyncio.get_running_loop().create_connection(
        RawClient, host, port, ssl=context)
    await raw_sequential(client, WARMUP)
    return client


async def echo_sequential(host: str, port: int, n: int, *, tls: bool = False) -> float:
    """Round trips per second of ``n`` sequential frames to a ``serve`` at ``host:port``
    (after a warm-up of 200 on the same connection, not counted); ``tls``: to a
    ``serve --tls``."""
    _check_count(n)
    client = await connect(host, port, tls)
    try:
        return await raw_sequential(client, n)
    finally:
        client.transport.close()


async def echo_pipelined(
    host: str, port: int, n: int, window: int = WINDOW, *, tls: bool = False
) -> float:
    """Frames per second echoed with ``window`` of them in flight, ``n`` in all."""
    _check_count(n)
    if window < 1:
        raise ValueError(f"window must be at least 1 frame in flight, not {window!r}")
    client = await connect(host, port, tls)
    try:
        return await raw_pipelined(client, n, window)
    finally:
        client.transport.close()


def _check_count(n: int) -> None:
    if n < 1:
        raise ValueError(f"n must be at least 1 round trip to measure, not {n!r}")


def _server_context(directory: str, host: str) -> ssl.SSLContext:
    return _tls.server_context(_tls.generate_self_signed(directory, [host]))


async def _serve(host: str, port: int, tls: bool) -> None:
    loop = asyncio.get_running_loop()
    directory = tempfile.mkdtemp(prefix="actorrt-echo-tls-")
    try:
        context = _server_context(directory, host) if tls else None
    finally:
        shutil.rmtree(directory)  # the context holds the certificate and key now
    server = await loop.create_server(RawEcho, host, port, ssl=context)
    stop = loop.create_future()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: stop.done() or stop.set_result(None))
    sys.stdout.write(f"ready {server.sockets[0].getsockname()[1]}\n")
    sys.stdout.flush()
    await stop
    server.close()
    await server.wait_closed()


async def _client(
    host: str, port: int, n_seq: int, n_pipe: int, window: int, tls: bool
) -> dict[str, float]:
    return {
        "sequential_per_s": await echo_sequential(host, port, n_seq, tls=tls),
        "pipelined_per_s": await echo_pipelined(host, port, n_pipe, window, tls=tls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["serve", "client"])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-seq", type=int, default=3_000)
    parser.add_argument("--n-pipe", type=int, default=60_000)
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument("--tls", action="store_true", help="the echo over TLS")
    args = parser.parse_args()
    if args.mode == "serve":
        uvloop.run(_serve(args.host, args.port, args.tls))
    else:
        rates = uvloop.run(
            _client(args.host, args.port, args.n_seq, args.n_pipe, args.window, args.tls))
        print(json.dumps({"host": args.host, "port": args.port, "window": args.window,
                          "tls": args.tls, **rates}))


if __name__ == "__main__":
    main()
