"""The wire layer against the raw echo baseline, in one run (docs/benchmarks.md).

    python -m benchmarks.wire [--check] [--n-seq N] [--n-pipe N] [--reps R]

Baseline, shaped as docs/benchmarks.md fixes it: a child process (a fresh interpreter on uvloop,
``benchmarks._echo_server raw``) echoes length-prefixed msgpack frames over a Unix socket; a
minimal hand-written client (an ``asyncio.Protocol`` that msgpack-packs each request and
unpacks each reply) drives it
- sequentially: send one frame, await its reply, N times;
- pipelined: keep a window of 1,000 requests in flight (each reply read lets one more out).

actorrt: the same two workloads through :class:`actorrt._wire._transport.Connection` request/reply
against a child running ``serve_unix`` with an echo handler (``_echo_server conn``), payload
``("m", (1, "x"), {})``: ``await conn.request(msg)`` N times; and a window of 1,000 futures,
awaiting the oldest before issuing the next. Both ends pay the full codec and framing.

``--check`` fails when the connection is under 60% of raw sequential or 30% of raw pipelined.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import struct
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import msgpack
import uvloop

from actorrt._wire._auth import new_secret, secret_to_text
from actorrt._wire._transport import Connection, connect_unix, make_private_dir

from ._common import Figure, exit_for, report

WINDOW = 1000
MESSAGE: tuple[str, tuple[int, str], dict[str, Any]] = ("m", (1, "x"), {})
RAW_MESSAGE: list[Any] = ["m", [1, "x"], {}]  # the same data, as plain msgpack
_LENGTH = struct.Struct("!Q")
_ROOT = Path(__file__).resolve().parent.parent


async def start_server(mode: str, path: str, secret: bytes) -> asyncio.subprocess.Process:
    """Start ``_echo_server`` in a fresh interpreter and wait until it listens."""
    path_entries = [str(_ROOT), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path_entries)))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks._echo_server", mode, path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=_ROOT, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(secret_to_text(secret).encode() + b"\n")
    await proc.stdin.drain()
    line = await proc.stdout.readline()
    if line != b"ready\n":
        raise RuntimeError(f"echo server ({mode}) did not start: {line!r}")
    return proc


async def stop_server(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    await proc.wait()


class RawClient(asyncio.Protocol):
    """The hand-written baseline client: frames in, msgpack out, nothing else."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: Any = None
        self.packer = msgpack.Packer()
        self.waiter: asyncio.Future[Any] | None = None
        self.to_send = 0  # pipelined: requests still to issue
        self.to_receive = 0
        self.next_id = 0
        self.done: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def frame(self) -> bytes:
        body: bytes = self.packer.pack([self.next_id, RAW_MESSAGE])
        self.next_id += 1
        return _LENGTH.pack(len(body)) + body

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        end = len(buf)
        pos = 0
        view = memoryview(buf)
        unpack = _LENGTH.unpack_from
        replies = 0
        reply: Any = None
        while end - pos >= 8:
            frame_end = pos + 8 + unpack(buf, pos)[0]
            if frame_end > end:
                break
            reply = msgpack.unpackb(view[pos + 8 : frame_end])
            replies += 1
            pos = frame_end
        view.release()
        del buf[:pos]
        if self.waiter is not None:
            if replies:
                self.waiter.set_result(reply)
                self.waiter = None
            return
        self.to_receive -= replies
        more = min(replies, self.to_send)
        if more:
            self.to_send -= more
            self.transport.write(b"".join([self.frame() for _ in range(more)]))
        if self.to_receive == 0 and self.done is not None:
            self.done.set_result(None)


async def raw_sequential(client: RawClient, n: int) -> float:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for _ in range(n):
        client.waiter = loop.create_future()
        client.transport.write(client.frame())
        await client.waiter
    return n / (time.perf_counter() - start)


async def raw_pipelined(client: RawClient, n: int, window: int = WINDOW) -> float:
    client.done = asyncio.get_running_loop().create_future()
    first = min(n, window)
    client.to_send, client.to_receive = n - first, n
    start = time.perf_counter()
    client.transport.write(b"".join([client.frame() for _ in range(first)]))
    await client.done
    client.done = None
    return n / (time.perf_counter() - start)


async def conn_sequential(conn: Connection, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await conn.request(MESSAGE)
    return n / (time.perf_counter() - start)


async def conn_pipelined(conn: Connection, n: int) -> float:
    window: deque[asyncio.Future[Any]] = deque()
    start = time.perf_counter()
    for _ in range(n):
        if len(window) >= WINDOW:
            await window.popleft()
        window.append(conn.request(MESSAGE))
    for future in window:
        await future
    return n / (time.perf_counter() - start)


async def measure(n_seq: int, n_pipe: int, reps: int) -> list[Figure]:
    directory = make_private_dir(base="/tmp")  # short: socket paths are limited to ~100 bytes
    secret = new_secret()
    raw_path, conn_path = os.path.join(directory, "raw"), os.path.join(directory, "conn")
    raw_proc = await start_server("raw", raw_path, secret)
    conn_proc = await start_server("conn", conn_path, secret)
    try:
        loop = asyncio.get_running_loop()
        _, client = await loop.create_unix_connection(RawClient, raw_path)
        conn = await connect_unix(conn_path, secret)
        # Warm up both paths (first-call costs, socket buffers).
        await raw_sequential(client, 200)
        await conn_sequential(conn, 200)
        samples: list[list[float]] = [[], [], [], []]
        for _ in range(reps):
            samples[0].append(await raw_sequential(client, n_seq))
            samples[1].append(await conn_sequential(conn, n_seq))
            samples[2].append(await raw_pipelined(client, n_pipe))
            samples[3].append(await conn_pipelined(conn, n_pipe))
        client.transport.close()
        conn.close()
        await conn.wait_closed()
    finally:
        await stop_server(raw_proc)
        await stop_server(conn_proc)
        shutil.rmtree(directory, ignore_errors=True)
    return [
        Figure("Connection request, sequential", "req/s", samples[1], samples[0], 0.60),
        Figure("Connection request, pipelined 1000", "req/s", samples[3], samples[2], 0.30),
        Figure("raw echo, sequential", "req/s", samples[0]),
        Figure("raw echo, pipelined 1000", "req/s", samples[2]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    # Many short, alternating samples: drift on a shared machine hits both sides alike.
    parser.add_argument("--n-seq", type=int, default=3_000)
    parser.add_argument("--n-pipe", type=int, default=60_000)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    figures = uvloop.run(measure(args.n_seq, args.n_pipe, args.reps))
    extra = {"loop": "uvloop", "n_seq": args.n_seq, "n_pipe": args.n_pipe, "window": WINDOW}
    ok = report("actorrt wire: Connection vs raw echo", figures, "wire", extra)
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
