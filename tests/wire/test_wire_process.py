"""The wire across a real process boundary: a fresh interpreter running the echo server."""

from __future__ import annotations

import asyncio
import os
import struct
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from actorrt._wire import _auth
from actorrt._wire._transport import Connection, connect_unix, make_private_dir

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


class Child:
    def __init__(self, proc: asyncio.subprocess.Process, path: str, secret: bytes) -> None:
        self.proc = proc
        self.path = path
        self.secret = secret


async def start(mode: str, directory: str) -> Child:
    secret = _auth.new_secret()
    path = os.path.join(directory, mode)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks._echo_server", mode, path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_auth.secret_to_text(secret).encode() + b"\n")
    assert await proc.stdout.readline() == b"ready\n"
    return Child(proc, path, secret)


async def stop(child: Child) -> None:
    assert child.proc.stdin is not None
    child.proc.stdin.close()  # the child exits when its parent's pipe closes
    assert await child.proc.wait() == 0


@pytest.fixture
async def child() -> AsyncIterator[Child]:
    directory = make_private_dir(base="/tmp")
    c = await start("conn", directory)
    yield c
    await stop(c)
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)


class Unimportable:
    """Pickled by reference to this test module, which the child cannot import."""


async def test_echo_across_processes(child: Child) -> None:
    conn = await connect_unix(child.path, child.secret)
    assert await conn.request(("m", (1, "x"), {})) == ("m", (1, "x"), {})
    array = np.random.default_rng(3).random((1024, 1024))
    np.testing.assert_array_equal(await conn.request(array), array)
    assert (await conn.request(lambda x: x * 3))(2) == 6  # code travels by value
    try:
        raise ValueError("sent as a value")
    except ValueError as exc:
        echoed = await conn.request(exc)
    assert type(echoed) is ValueError and "sent as a value" in echoed.remote_traceback
    with pytest.raises(ModuleNotFoundError, match="test_wire_process"):
        await conn.request(Unimportable())  # the child cannot decode it: the caller hears why
    futures = [conn.request(i) for i in range(20_000)]
    assert await asyncio.gather(*futures) == list(range(20_000))
    conn.close()
    await conn.wait_closed()


async def test_notifications_keep_their_order_across_processes(child: Child) -> None:
    stats: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_message(conn: Connection, request_id: int | None, payload: Any) -> None:
        if payload[0] == "stats":
            stats.set_result(payload[1])

    conn = await connect_unix(child.path, child.secret, on_message)
    for i in range(10_000):
        conn.notify(("n", i))
    conn.notify(("stats",))  # the child answers after every notification sent before it
    assert await stats == 10_000
    conn.close()
    await conn.wait_closed()


async def test_the_child_refuses_a_wrong_secret(child: Child) -> None:
    with pytest.raises(_auth.AuthenticationError):
        await connect_unix(child.path, _auth.new_secret())


async def test_the_raw_echo_server_echoes_frames() -> None:
    directory = make_private_dir(base="/tmp")
    raw = await start("raw", directory)
    reader, writer = await asyncio.open_unix_connection(raw.path)
    bodies = [msgpack.packb([i, ["m", [1, "x"], {}]]) for i in range(1000)]
    writer.write(b"".join(struct.pack("!Q", len(b)) + b for b in bodies))
    for body in bodies:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
        assert await reader.readexactly(length) == body
    writer.close()
    await stop(raw)
    os.unlink(raw.path)
    os.rmdir(directory)
