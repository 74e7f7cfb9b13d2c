"""The wire transport: authenticated connections over Unix sockets and TCP.

This module is what the layers above import. The connection itself (framing, multiplexing,
write coalescing, flow control) lives in :mod:`actorrt._wire._connection`; this module adds the
Unix-socket plumbing: a private directory for the socket (:func:`make_private_dir`), a server
whose every connection must pass the secret handshake (:func:`serve_unix`) and the client side
(:func:`connect_unix`). It re-exports the TCP ones of :mod:`actorrt._wire._tcp`
(:func:`serve_tcp`, :func:`connect_tcp`; plain or TLS, the handshake then bound to the
server's certificate) and :class:`~actorrt._wire._server.WireServer`, which serves both.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import stat
import tempfile
from typing import Any

from ._auth import AuthenticationError
from ._connection import (
    ERROR,
    NOTIFY,
    REPLY,
    REQUEST,
    Connection,
    ConnectionLostError,
    FrameTooLargeError,
    Handler,
)
from ._server import WireServer, server_factory
from ._tcp import connect_tcp as connect_tcp
from ._tcp import serve_tcp as serve_tcp

__all__ = [
    "ERROR",
    "NOTIFY",
    "REPLY",
    "REQUEST",
    "AuthenticationError",
    "Connection",
    "ConnectionLostError",
    "FrameTooLargeError",
    "Handler",
    "WireServer",
    "connect_tcp",
    "connect_unix",
    "make_private_dir",
    "serve_tcp",
    "serve_unix",
]

# sockaddr_un.sun_path holds 108 bytes on Linux (104 on macOS), NUL included.
_MAX_SOCKET_PATH = 103

# Connections a listener queues before accepting them. A burst of worker starts connects all
# at once; the kernel caps this at net.core.somaxconn (4096 on current Linux).
LISTEN_BACKLOG = 4096

# A full backlog makes a Unix socket's connect fail with EAGAIN at once (it does not wait as
# TCP does): the client retries with a growing, jittered delay for this long.
CONNECT_RETRY_FOR = 60.0


def make_private_dir(prefix: str = "actorrt-", base: str | None = None) -> str:
    """Create a directory only the current user can enter (mode 0700) and return its path.

    Args:
        prefix: the start of the directory's name.
        base: where to create it; the system's temporary directory by default.

    Returns:
        The directory's absolute path. The caller removes it when done (``shutil.rmtree``).
    """
    path = tempfile.mkdtemp(prefix=prefix, dir=base)
    os.chmod(path, 0o700)  # mkdtemp already uses 0700; say it, in case that ever changes
    return path


def _check_socket_path(path: str) -> None:
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        raise ValueError(
            f"the socket path {path!r} is {len(os.fsencode(path))} bytes long; Unix sockets "
            f"allow at most {_MAX_SOCKET_PATH}: use a shorter directory "
            "(make_private_dir(base='/tmp'))"
        )
    directory = os.path.dirname(os.path.abspath(path))
    st = os.stat(directory)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(
            f"the socket's directory {directory!r} (mode {stat.S_IMODE(st.st_mode):#o}, owner "
            f"uid {st.st_uid}) is open to other users; put the socket in a directory made by "
            "make_private_dir()"
        )


async def serve_unix(
    path: str,
    handler: Handler,
    secret: bytes,
    **options: Any,
) -> WireServer:
    """Listen on a Unix socket; every connection must prove it knows ``secret``.

    Args:
        path: the socket's path, inside a private directory (see :func:`make_private_dir`).
        handler: called with every request and notification of every connection.
        secret: the runtime's secret (:func:`actorrt._wire._auth.new_secret`).
        **options: passed to :class:`Connection` (``codec``, ``max_frame_size``,
            ``write_limits``, ``incoming_limits``, ``handshake_timeout``, ``on_open``,
            ``on_close``). A ``codec`` given here is shared by all the server's connections.

    Returns:
        The running server.

    Raises:
        PermissionError: the socket's directory is open to other users.
        ValueError: the path is too long for a Unix socket.
    """
    _check_socket_path(path)
    loop = asyncio.get_running_loop()
    connections: set[Connection] = set()
    factory = server_factory(handler, secret, connections, options)
    server = await loop.create_unix_server(factory, path, backlog=LISTEN_BACKLOG)
    os.chmod(path, 0o600)
    return WireServer(server, path, connections)


async def connect_unix(
    path: str,
    secret: bytes,
    handler: Handler | None = None,
    **options: Any,
) -> Connection:
    """Connect to a :func:`serve_unix` server and complete the handshake.

    Args:
        path: the server's socket path.
        secret: the runtime's secret.
        handler: called with requests and notifications the server sends (``None``: this end
            takes none; a request then fails at the server with ``RuntimeError``).
        **options: passed to :class:`Connection`.

    Returns:
        The open connection.

    A connect refused with EAGAIN (the server's listen backlog is full, as in a burst of
    worker starts) is retried with backoff for up to :data:`CONNECT_RETRY_FOR` seconds.

    Raises:
        AuthenticationError: the server does not know the secret, or refused ours.
        ConnectionLostError: the connection ended during the handshake.
        OSError: nothing listens at ``path``, or its backlog stayed full.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONNECT_RETRY_FOR
    delay = 0.002
    while True:
        try:
            _, conn = await loop.create_unix_connection(
                lambda: Connection(handler, secret=secret, server=False, **options), path
            )
            break
        except OSError as exc:
            if exc.errno != errno.EAGAIN:
                raise
            if loop.time() + delay > deadline:
                raise OSError(
                    errno.EAGAIN,
                    f"the server at {path} kept refusing connections for "
                    f"{CONNECT_RETRY_FOR:.0f} s: its listen backlog stayed full",
                ) from exc
        await asyncio.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.25)
    try:
        await conn.ready
    except BaseException:
        conn.abort()
        raise
    return conn
