"""A runtime's status socket: how ``actorrt status`` reaches a runtime from another process.

When a user program's runtime starts, :meth:`StatusServer.start` opens a Unix socket (mode
0600) in the per-user discovery directory (mode 0700), makes a secret for it, and registers
the runtime there (``actorrt._control._discovery``: the pid, the socket's path and that secret, in a
0600 file). A client proves it knows the secret through the same
mutual HMAC handshake that worker processes use (``actorrt._wire._auth``), which also
refuses a client of another protocol version (``actorrt.ProtocolVersionError``, naming both),
then sends requests. The socket answers one message:

============  =============================================================================
message       reply
============  =============================================================================
``Status()``  :func:`actorrt._control._status.snapshot`: resources, placement groups, pending
              requests and actors, as plain data
============  =============================================================================

Anything else is refused (a ``MalformedMessage`` naming it).

The status socket is not the runtime's worker socket: it has its own secret, and neither
end decodes pickles (plain msgpack only), so the entry file lets a process of the same user
look at the runtime and nothing more. The socket is opened when the
runtime starts, whatever it runs (the worker socket opens only for worker-process actors),
and closed, with the entry removed, when the runtime shuts down. ``ACTORRT_DISCOVERY=0``
turns it off; worker processes never open one. A failure to open it (an unusable discovery
directory, say) is logged as a warning and the runtime runs on, undiscoverable.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from typing import Any

from .._wire import _auth
from .._wire._codec import Codec
from .._wire._dispatcher import Dispatcher, request
from .._wire._messages import Status
from .._wire._transport import Connection, WireServer, connect_unix, make_private_dir, serve_unix
from . import _discovery

__all__ = ["StatusServer", "fetch_status"]

logger = logging.getLogger("actorrt")

# A status request is small; so is the reply for any runtime a person reads (a reply with
# 100,000 actors is ~20 MB). The bound keeps a confused peer from making either side buffer
# gigabytes.
_MAX_FRAME = 256 << 20


class StatusServer:
    """One runtime's status socket and discovery entry (see the module docstring)."""

    def __init__(self, server: WireServer, entry: str, private: str | None) -> None:
        self.entry = entry
        self._server = server
        self._private = private  # the socket's own directory, when it needed one

    @classmethod
    async def start(
        cls, runtime_id: str, read_status: Callable[[], dict[str, Any]]
    ) -> StatusServer | None:
        """Open the socket and register the runtime; ``None`` when turned off or impossible.

        Args:
            runtime_id: the runtime's id, for the entry's and the socket's names.
            read_status: returns the runtime's status snapshot; called on the runtime's loop.
        """
        if not _discovery.registration_enabled():
            return None
        private: str | None = None
        server: WireServer | None = None
        try:
            directory = _discovery.prepare()
            path = _discovery.socket_path(directory, runtime_id)
            if path is None:
                private = make_private_dir()
                path = os.path.join(private, "status.sock")
            secret = _auth.new_secret()

            def answer(conn: Connection, request_id: int, message: Status) -> None:
                _answer(read_status, conn, request_id)

            dispatcher = Dispatcher("an actorrt status socket", requests=[request(Status, answer)])
            server = await serve_unix(
                path, dispatcher, secret, codec=Codec(allow_pickle=False), max_frame_size=_MAX_FRAME
            )
            entry = _discovery.register(directory, runtime_id, path, secret)
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
        return cls(server, entry, private)

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


def _answer(read_status: Callable[[], dict[str, Any]], conn: Connection, request_id: int) -> None:
    try:
        data = read_status()
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
        actorrt.AuthenticationError: the handshake failed.
        actorrt.ProtocolVersionError: the runtime runs another actorrt release (another
            protocol version); the message names both versions.
        actorrt._wire._codec.RemoteError: the runtime failed to build its status.
    """
    conn: Connection | None = None
    try:
        conn = await connect_unix(
            entry.socket, entry.secret, codec=Codec(allow_pickle=False), max_frame_size=_MAX_FRAME
        )
        reply = await conn.request(Status())
    finally:
        if conn is not None:
            conn.close()
    if not isinstance(reply, dict):
        raise ValueError(f"the runtime answered {type(reply).__name__}, not a status dict")
    return reply
