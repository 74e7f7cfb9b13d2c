"""A listening socket and the connections it accepted, for Unix sockets and TCP alike.

:func:`~actorrt._wire._transport.serve_unix` and :func:`~actorrt._wire._tcp.serve_tcp` build
their :class:`WireServer` from a protocol factory made by :func:`server_factory`, which keeps
the server's set of authenticated connections up to date.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from ._connection import Connection, ConnectionLostError, Handler

__all__ = ["WireServer", "server_factory"]


class WireServer:
    """A listening socket (Unix or TCP) and the authenticated connections it accepted.

    Use it as an async context manager, or call :meth:`close` and :meth:`wait_closed`.
    """

    __slots__ = ("_address", "_connections", "_path", "_server")

    def __init__(
        self,
        server: asyncio.Server,
        path: str | None,
        connections: set[Connection],
        address: tuple[str, int] | None = None,
    ) -> None:
        self._server = server
        self._path = path
        self._connections = connections
        self._address = address

    @property
    def path(self) -> str:
        """The socket's path (a Unix server's; a TCP server has :attr:`address` instead)."""
        if self._path is None:
            raise AttributeError(f"a TCP server has no path; its address is {self._address}")
        return self._path

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` a TCP server listens on, the port the actual one (also for 0)."""
        if self._address is None:
            raise AttributeError(f"a Unix-socket server has no address; its path is {self._path}")
        return self._address

    @property
    def connections(self) -> frozenset[Connection]:
        """The open connections that passed the handshake."""
        return frozenset(self._connections)

    def close(self) -> None:
        """Stop listening, remove a Unix socket's file and close every connection."""
        self._server.close()
        if self._path is not None:
            try:
                os.unlink(self._path)
            except FileNotFoundError:
                pass
        for conn in list(self._connections):
            conn.close()

    async def wait_closed(self) -> None:
        """Wait until the listener and every connection have closed."""
        for conn in list(self._connections):
            await conn.wait_closed()
        await self._server.wait_closed()

    async def __aenter__(self) -> WireServer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
        await self.wait_closed()


def server_factory(
    handler: Handler, secret: bytes, connections: set[Connection], options: dict[str, Any]
) -> Callable[[], Connection]:
    """The protocol factory of a server that keeps ``connections`` up to date."""
    user_on_open = options.pop("on_open", None)
    user_on_close = options.pop("on_close", None)

    def opened(conn: Connection) -> None:
        connections.add(conn)
        if user_on_open is not None:
            user_on_open(conn)

    def closed(conn: Connection, error: ConnectionLostError) -> None:
        if conn in connections:
            connections.discard(conn)
            if user_on_close is not None:
                user_on_close(conn, error)

    def factory() -> Connection:
        return Connection(
            handler, secret=secret, server=True, on_open=opened, on_close=closed, **options
        )

    return factory
