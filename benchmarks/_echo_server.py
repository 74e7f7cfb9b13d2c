"""An echo server in a fresh interpreter on uvloop, for the wire benchmark and tests.

    python -m benchmarks._echo_server raw|conn SOCKET_PATH

The runtime secret arrives as the first line of stdin (hex); the server prints ``ready`` on
stdout once it listens, and exits when stdin reaches end of file (its parent went away).

- ``raw``: the baseline of docs/benchmarks.md: frames are an 8-byte big-endian length and a msgpack
  body; every complete frame is written back as it is, all frames of one read with one write.
  No handshake, no decoding: the least a frame echo can do.
- ``conn``: a :func:`actorrt._wire._transport.serve_unix` server whose handler replies to every
  request with its payload (decoded and encoded again) and ignores notifications, except that
  a notification ``("stats",)`` is answered with a notification of how many notifications it
  received before it.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from typing import Any

import uvloop

from actorrt._wire._auth import secret_from_text
from actorrt._wire._transport import Connection, serve_unix

_LENGTH = struct.Struct("!Q")


class RawEcho(asyncio.Protocol):
    """Writes back every complete length-prefixed frame it reads."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        end = len(buf)
        pos = 0
        unpack = _LENGTH.unpack_from
        while end - pos >= 8:
            frame_end = pos + 8 + unpack(buf, pos)[0]
            if frame_end > end:
                break
            pos = frame_end
        if pos:
            self.transport.write(bytes(buf[:pos]))
            del buf[:pos]


async def _serve(mode: str, path: str) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    secret = secret_from_text((await reader.readline()).decode())
    if mode == "raw":
        server: Any = await loop.create_unix_server(RawEcho, path)
    else:
        notified = 0

        def handler(conn: Connection, request_id: int | None, payload: Any) -> None:
            nonlocal notified
            if request_id is not None:
                conn.reply(request_id, payload)
            elif payload == ("stats",):
                conn.notify(("stats", notified))
            else:
                notified += 1

        server = await serve_unix(path, handler, secret)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await reader.read()  # until the parent closes our stdin
    server.close()


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    if mode not in ("raw", "conn"):
        raise SystemExit(f"usage: python -m benchmarks._echo_server raw|conn PATH (not {mode})")
    uvloop.run(_serve(mode, path))


if __name__ == "__main__":
    main()
