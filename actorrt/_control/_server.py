"""A runtime's status socket: how ``actorrt status`` reaches a runtime from another process.

When a user program's runtime starts, :meth:`StatusServer.start` opens a Unix socket (mode
0600) in the per-user discovery directory (mode 0700), makes a secret for it, and registers
the runtime there (``actorrt._control._discovery``: the pid, the socket's path and that secret, in a
0600 file). A client proves it knows the secret through the same
mutual HMAC handshake that worker processes use (``actorrt._wire._auth``), then sends requests.
The socket answers one operation:

=========  ================================================================================
operation  reply
=========  ================================================================================
``status`` :func:`actorrt._control._status.snapshot`: resources, placement groups, pending requests
           and actors, as plain data
=========  ================================================================================

Anything else is refused. The status socket is not the runtime's worker socket: it has its
own secret, and neither end decodes pickles (plain msgpack only), so the entry file lets a
process of the same user look at the runtime and nothing more. The socket is opened when the
runtime starts, whatever it runs (the worker socket opens only for worker-process actors),
and closed, with the entry removed, when the runtime shuts down. ``ACTORRT_DISCOVERY=0``
turns it off; worker processes never open one. A failure to open it (an unusable discovery
directory, say) is logged as a warning and the runtime runs on, undiscoverable.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any

from .._wire import _auth
from .._wire._codec import Codec
from .._wire._transport import Connection, WireServer, connect_unix, make_private_dir, serve_unix
from . import _discovery
from ._status import StatusSource, snapshot

__all__ = ["StatusServer", "fetch_status"]

logger = logging.getLogger("actorrt")

# A status request is small; so is the reply for any runtime a person reads (a reply with
# 100,000 actors is ~20 MB). The bound keeps a confused peer from making either side buffer
# gigabytes.
_MAX_FRAME = 256 << 20


class StatusServer:
    """One runtime's status socket and discovery entry (see the module docstring)."""

    def __init__(
        self, runtime: StatusSource, server: WireServer, entry: str, private: str | None
    ) -> None:
        self.runtime = runtime
        self.entry = entry
        self._server = server
        self._private = private  # the socket's own directory, when it needed one

    @classmethod
    async def start(cls, runtime: StatusSource) -> StatusServer | None:
        """Open the socket and register the runtime; ``None`` when turned off or impossible."""
        if not _discovery.registration_enabled():
            return None
        private: str | None = None
        server: WireServer | None = None
        try:
            directory = _discovery.prepare()
            path = _discovery.socket_path(directory, runtime.runtime_id)
            if path is None:
                private = make_private_dir()
                path = os.path.join(private, "status.sock")
            secret = _auth.new_secret()

            def handle(conn: Connection, request_id: int | None, payload: Any) -> None:
                _answer(runtime, conn, request_id, payload)

            server = await serve_unix(
                path, handle, secret, codec=Codec(allow_pickle=False), max_frame_size=_MAX_FRAME
            )
            entry = _discovery.register(directory, runtime.runtime_id, path, secret)
        except BaseException as exc:
            if server is not None:
                server.close()  # removes the socket file
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)
            if not isinstance(exc, Exception):
                raise  # cancelled: the runtime does not start
            logger.warning(
                "this runtime cannot be found by `actorrt status`: %s (set %s=0 to stop trying)",
                exc,
                _discovery.ENABLE_ENV,
            )
            return None
        return cls(runtime, server, entry, private)

    async def close(self) -> None:
        """Unregister first (so nobody finds a closing socket), then close the socket."""
        try:
            _discovery.unregister(self.entry)
        except OSError as exc:  # the shutdown goes on; the entry is stale once we exit
            logger.warning("cannot remove the runtime's entry %s: %s", self.entry, exc)
        for conn in self._server.connections:
            conn.abort()  # a status client that stopped reading must not delay shutdown
        self._server.close()
        await self._server.wait_closed()
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)


def _answer(runtime: StatusSource, conn: Connection, request_id: int | None, payload: Any) -> None:
    if request_id is None:
        return  # notifications mean nothing here
    if payload != ("status",):
        conn.reply_error(
            request_id,
            ValueError(f"the status socket answers only ('status',), not {payload!r:.80}"),
        )
        return
    try:
        data = snapshot(runtime)
    except Exception as exc:  # a bug here must reach the client, not kill the connection
        logger.exception("building the runtime status failed")
        conn.reply_error(request_id, exc)
        return
    conn.reply(request_id, data, context="the runtime status")


async def fetch_status(entry: _discovery.RuntimeEntry) -> dict[str, Any]:
    """Connect to a registered runtime and return its :func:`~actorrt._control._status.snapshot`.

    Bound it with ``asyncio.timeout``: a runtime whose event loop is blocked never answers.

    Raises:
        OSError: the socket cannot be reached (``ConnectionError`` subclasses included).
        actorrt._wire._auth.AuthenticationError: the handshake failed.
        actorrt._wire._codec.RemoteError: the runtime failed to build its status.
    """
    conn: Connection | None = None
    try:
        conn = await connect_unix(
            entry.socket, entry.secret, codec=Codec(allow_pickle=False), max_frame_size=_MAX_FRAME
        )
        reply = await conn.request(("status",))
    finally:
        if conn is not None:
            conn.close()
    if not isinstance(reply, dict):
        raise ValueError(f"the runtime answered {type(reply).__name__}, not a status dict")
    return reply
