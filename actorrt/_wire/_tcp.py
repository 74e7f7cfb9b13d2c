"""Authenticated connections over TCP, plain or TLS: :func:`serve_tcp` and
:func:`connect_tcp` (imported by the layers above from :mod:`actorrt._wire._transport`).

Over TLS the secret handshake is bound to the server's certificate (see
:mod:`actorrt._wire._auth` and :mod:`actorrt._wire._tls`). Every connect error names
``host:port`` and says what happened; a TLS client of a plain server, or a plain client of a
TLS server, fails at once with a message saying so.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
from typing import Any

from .._errors import ProtocolVersionError
from ._auth import SECRET_LEN, AuthenticationError
from ._connection import DEFAULT_HANDSHAKE_TIMEOUT, Connection, ConnectionLostError, Handler
from ._server import WireServer, server_factory

__all__ = ["connect_tcp", "serve_tcp"]

# What OpenSSL says when the bytes it reads are no TLS records (a plain server answering).
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "UNKNOWN_PROTOCOL"}
)

# Connections a listener queues before accepting them (the kernel caps it at somaxconn).
LISTEN_BACKLOG = 4096


def _check(port: int, secret: bytes, tls: ssl.SSLContext | None, server: bool) -> None:
    """Refuse a bad port, token or context at the call, naming it."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"a TCP port is an int from 0 (any free port) to 65535, got {port!r}")
    if not isinstance(secret, bytes) or len(secret) != SECRET_LEN:
        shown = type(secret).__name__  # never the value: it may be a token
        if isinstance(secret, bytes | bytearray | str):
            shown += f" of length {len(secret)}"
        raise ValueError(
            f"the cluster token is {SECRET_LEN} bytes (secret_from_text() decodes its text "
            f"form), got {shown}"
        )
    if tls is not None and not isinstance(tls, ssl.SSLContext):
        raise TypeError(f"tls is an ssl.SSLContext or None, got {type(tls).__name__}")
    other = ssl.PROTOCOL_TLS_CLIENT if server else ssl.PROTOCOL_TLS_SERVER
    if tls is not None and tls.protocol == other:
        wanted = "server_context(files)" if server else "client_context()"
        raise ValueError(f"tls is the other end's kind of context: this end needs {wanted}")


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
    _check(port, secret, tls, server=True)
    if tls is not None and len(binding) != 32:
        raise ValueError(
            "serve_tcp with tls needs binding=context_fingerprint(files), the 32-byte "
            f"fingerprint of the server's certificate, got {binding!r}"
        )
    if tls is None and binding:
        raise ValueError("serve_tcp got a binding without tls: a binding is a TLS certificate's")
    loop = asyncio.get_running_loop()
    connections: set[Connection] = set()
    factory = server_factory(handler, secret, connections, {**options, "binding": binding})
    timeout = options.get("handshake_timeout", DEFAULT_HANDSHAKE_TIMEOUT)
    try:
        server = await loop.create_server(
            factory, host, port, backlog=LISTEN_BACKLOG, ssl=tls,
            ssl_handshake_timeout=timeout if tls is not None else None,
        )  # fmt: skip
    except OSError as exc:
        raise _named(exc, f"cannot listen on {_where(host, port)}") from exc
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
            reached, or the connect or the handshake timed out (``TimeoutError``); the
            message names ``host:port``.
        AuthenticationError: the server does not hold the token, or refused ours; the
            certificate seen is not the server's (a man in the middle); the server's
            certificate failed verification against ``ca``; this end uses TLS and the server
            does not.
        ProtocolVersionError: the server speaks another protocol version.
        ConnectionLostError: the connection ended before or during the handshake (for a plain
            client, the message says the server may use TLS).
    """
    _check(port, secret, tls, server=False)
    if not connect_timeout > 0:
        raise ValueError(
            f"connect_timeout must be a positive number of seconds, not {connect_timeout!r}"
        )
    where = _where(host, port)
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
        hint = ""
        if exc.reason in _NOT_TLS or isinstance(exc, ssl.SSLEOFError):
            hint = (
                ": this end uses TLS and the server apparently does not (start both ends with "
                "TLS or neither)"
            )
        raise AuthenticationError(
            f"the TLS handshake with {where} failed ({exc.reason or exc}){hint}"
        ) from exc
    except OSError as exc:
        raise _named(exc, f"cannot connect to {where}", tls is not None) from exc
    try:
        await conn.ready
    except (AuthenticationError, ProtocolVersionError) as exc:
        conn.abort()
        raise type(exc)(f"{where}: {exc}") from exc
    except TimeoutError as exc:  # connected, and the peer did not finish the handshake
        conn.abort()
        raise TimeoutError(exc.errno, f"{where}: {exc.strerror}") from exc
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
