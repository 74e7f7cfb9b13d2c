"""The wire transport: authenticated connections over Unix sockets and TCP.

This module is what the layers above import. The connection itself (framing, multiplexing,
write coalescing, flow control) lives in :mod:`actorrt._wire._connection`; this module adds the
socket plumbing: a private directory for a Unix socket (:func:`make_private_dir`), servers
whose every connection must pass the secret handshake (:func:`serve_unix`, :func:`serve_tcp`)
and the client sides (:func:`connect_unix`, :func:`connect_tcp`). Over TCP the connection may
run over TLS (:mod:`actorrt._wire._tls`), the handshake then bound to the server's certificate.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import socket
import ssl
import stat
import tempfile
from collections.abc import Callable
from typing import Any

from .._errors import ProtocolVersionError
from ._auth import AuthenticationError
from ._connection import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    ERROR,
    NOTIFY,
    REPLY,
    REQUEST,
    Connection,
    ConnectionLostError,
    FrameTooLargeError,
    Handler,
)

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
    factory = _server_factory(handler, secret, connections, options)
    server = await loop.create_unix_server(factory, path, backlog=LISTEN_BACKLOG)
    os.chmod(path, 0o600)
    return WireServer(server, path, connections)


def _server_factory(
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


# -- TCP ---------------------------------------------------------------------------------


def _check_port(port: int) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"a TCP port is an int from 0 (any free port) to 65535, got {port!r}")


async def serve_tcp(
    host: str,
    port: int,
    handler: Handler,
    secret: bytes,
    *,
    tls: ssl.SSLContext | None = None,
    binding: bytes = b"",
    **options: Any,
) -> WireServer:
    """Listen on TCP; every connection must prove it knows ``secret`` (the cluster token).

    Args:
        host: the address to listen on (``"0.0.0.0"`` for every IPv4 interface).
        port: the port; 0 picks a free one (read it from :attr:`WireServer.address`).
        handler: called with every request and notification of every connection.
        secret: the cluster token (:func:`actorrt._wire._auth.new_secret`).
        tls: a server context (:func:`actorrt._wire._tls.server_context`); ``None``: plain TCP.
        binding: with ``tls``, the fingerprint of the server's own certificate
            (:func:`actorrt._wire._tls.context_fingerprint`), which the handshake covers.
        **options: passed to :class:`Connection`, as for :func:`serve_unix`.

    Returns:
        The running server. Every accepted socket gets ``TCP_NODELAY``.

    Raises:
        ValueError: a bad port, ``tls`` without ``binding`` or the reverse.
        OSError: the address cannot be bound (in use, not this machine's); the message names it.
    """
    _check_port(port)
    if tls is not None and len(binding) != 32:
        raise ValueError(
            "serve_tcp with tls needs binding=context_fingerprint(files), the 32-byte "
            f"fingerprint of the server's certificate, got {binding!r}"
        )
    if tls is None and binding:
        raise ValueError("serve_tcp got a binding without tls: a binding is a TLS certificate's")
    loop = asyncio.get_running_loop()
    connections: set[Connection] = set()
    factory = _server_factory(handler, secret, connections, {**options, "binding": binding})
    timeout = options.get("handshake_timeout", DEFAULT_HANDSHAKE_TIMEOUT)
    try:
        server = await loop.create_server(
            factory, host, port, backlog=LISTEN_BACKLOG, ssl=tls,
            ssl_handshake_timeout=timeout if tls is not None else None,
        )  # fmt: skip
    except OSError as exc:
        raise _named(exc, f"cannot listen on {host}:{port}") from exc
    bound = server.sockets[0].getsockname()
    return WireServer(server, None, connections, (str(bound[0]), int(bound[1])))


async def connect_tcp(
    host: str,
    port: int,
    secret: bytes,
    handler: Handler | None = None,
    *,
    tls: ssl.SSLContext | None = None,
    connect_timeout: float = 10.0,
    **options: Any,
) -> Connection:
    """Connect to a :func:`serve_tcp` server and complete the handshake.

    Args:
        host: the server's address or name.
        port: its port.
        secret: the cluster token.
        handler: as for :func:`connect_unix`.
        tls: a client context (:func:`actorrt._wire._tls.client_context`); ``None``: plain TCP.
            Over TLS the handshake is bound to the certificate the server presented.
        connect_timeout: seconds for the TCP connect and the TLS handshake together.
        **options: passed to :class:`Connection`.

    Returns:
        The open connection, with ``TCP_NODELAY``.

    Raises:
        OSError: nothing listens there (``ConnectionRefusedError``), the host cannot be
            reached, or the connect timed out (``TimeoutError``); the message names
            ``host:port``.
        AuthenticationError: the server does not hold the token, or refused ours; the
            certificate seen is not the server's (a man in the middle); the server's
            certificate failed verification against ``ca``; this end uses TLS and the server
            does not.
        ProtocolVersionError: the server speaks another protocol version.
        ConnectionLostError: the connection ended before or during the handshake (for a plain
            client, the message says the server may use TLS).
    """
    _check_port(port)
    if not connect_timeout > 0:
        raise ValueError(
            f"connect_timeout must be a positive number of seconds, not {connect_timeout!r}"
        )
    where = f"{host}:{port}"
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(connect_timeout):
            _, conn = await loop.create_connection(
                lambda: Connection(handler, secret=secret, server=False, **options),
                host, port, ssl=tls,
                ssl_handshake_timeout=connect_timeout if tls is not None else None,
            )  # fmt: skip
    except TimeoutError as exc:
        raise TimeoutError(
            errno.ETIMEDOUT,
            f"cannot connect to {where}: no answer within {connect_timeout:g} s (the host is "
            "down or unreachable, or a firewall drops the packets)",
        ) from exc
    except ssl.SSLCertVerificationError as exc:
        raise AuthenticationError(
            f"the certificate that {where} presented failed verification against the CA "
            f"file: {exc.verify_message}"
        ) from exc
    except ssl.SSLError as exc:
        raise AuthenticationError(
            f"the TLS handshake with {where} failed ({exc.reason or exc}): this end uses TLS "
            "and the server apparently does not (start both ends with TLS or neither)"
        ) from exc
    except OSError as exc:
        raise _named(exc, f"cannot connect to {where}", tls is not None) from exc
    try:
        await conn.ready
    except (AuthenticationError, ProtocolVersionError) as exc:
        conn.abort()
        raise type(exc)(f"{where}: {exc}") from exc
    except ConnectionLostError as exc:
        conn.abort()
        hint = ""
        if tls is None:
            hint = ": if the server uses TLS, this end does not (connect with tls=client_context())"
        raise ConnectionLostError(
            f"{where} ended the connection before the handshake ({exc.reason}){hint}"
        ) from exc
    except BaseException:
        conn.abort()
        raise
    return conn


def _named(exc: OSError, what: str, tls: bool = False) -> OSError:
    """``exc`` again, of the same type, its message saying ``what`` failed."""
    if exc.errno is None:
        reason = str(exc)
    elif isinstance(exc, socket.gaierror):  # its errno is no errno: EAI_*
        reason = f"{exc.strerror} (cannot resolve the host)"
    else:
        reason = os.strerror(exc.errno)  # asyncio's own text repeats the address
    if isinstance(exc, ConnectionRefusedError):
        reason += " (nothing listens there)"
    elif tls and isinstance(exc, ConnectionResetError):
        reason += " during the TLS handshake (does the server use TLS?)"
    message = f"{what}: {reason}"
    try:
        return type(exc)(exc.errno, message) if exc.errno is not None else type(exc)(message)
    except TypeError:  # an OSError subclass with another constructor
        return OSError(exc.errno, message)
