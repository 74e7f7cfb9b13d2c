"""Per-runtime secrets and the handshake that proves both ends of a connection know one.

A runtime makes a random secret (:func:`new_secret`) and hands it to the worker processes it
starts (never through the socket). Every connection then runs a mutual HMAC-SHA256
challenge-response before a single frame is decoded, so nothing is ever unpickled from a peer
that has not proven it knows the secret, and a worker never unpickles from a server that has not
proven it either:

1. server -> client, :data:`HELLO_LEN` bytes: :data:`MAGIC` (the protocol's name, ``actorrt``,
   and one byte: the server's :data:`~actorrt._wire._messages.PROTOCOL_VERSION`), then a fresh
   32-byte server nonce.
2. client -> server, :data:`RESPONSE_LEN` bytes: the client's own magic (name and version),
   a fresh 32-byte client nonce, then
   ``HMAC(secret, b"actorrt client" + server_nonce + client_nonce)``.
3. server -> client, :data:`PROOF_LEN` bytes:
   ``HMAC(secret, b"actorrt server" + client_nonce + server_nonce)``. A server that rejects the
   client closes the connection instead of answering.

Each end checks the other's version before anything else: a peer that states another
version is refused with :class:`~actorrt.ProtocolVersionError` naming both versions (the
client raises it on the server's hello; the server on the client's response, and closes),
before a single frame is read, let alone unpickled. Bytes that do not start with ``actorrt``
are no actorrt peer at all: :class:`AuthenticationError`.

MACs are compared with :func:`hmac.compare_digest` (constant time). The secret itself never
crosses the socket, so a process that merely guessed the socket path learns nothing from a
connection attempt. The messages have fixed lengths and are read before the frame parser
starts; the transport drops a connection that does not finish within its handshake timeout.
"""

from __future__ import annotations

import hmac
import os
import secrets
from typing import Final, TypeAlias

from .._errors import AuthenticationError as AuthenticationError
from .._errors import ProtocolVersionError
from ._messages import PROTOCOL_VERSION

__all__ = [
    "HELLO_LEN",
    "MAGIC",
    "PROOF_LEN",
    "RESPONSE_LEN",
    "AuthenticationError",
    "Handshake",
    "check_client",
    "check_server",
    "check_version",
    "client_response",
    "new_secret",
    "secret_from_text",
    "secret_to_text",
    "server_hello",
]

SECRET_LEN: Final = 32
NONCE_LEN: Final = 32
MAC_LEN: Final = 32
NAME: Final = b"actorrt"  # the protocol's name, at the start of both ends' first message
MAGIC: Final = NAME + bytes([PROTOCOL_VERSION])  # name and version
HELLO_LEN: Final = len(MAGIC) + NONCE_LEN
RESPONSE_LEN: Final = len(MAGIC) + NONCE_LEN + MAC_LEN
PROOF_LEN: Final = MAC_LEN

_CLIENT_LABEL: Final = b"actorrt client"
_SERVER_LABEL: Final = b"actorrt server"

_Bytes: TypeAlias = bytes | bytearray | memoryview


def new_secret() -> bytes:
    """Return a fresh random per-runtime secret (32 bytes)."""
    return secrets.token_bytes(SECRET_LEN)


def secret_to_text(secret: bytes) -> str:
    """Encode a secret as hex, to hand it to a child process (on its stdin, say)."""
    return secret.hex()


def secret_from_text(text: str) -> bytes:
    """Decode :func:`secret_to_text`'s output.

    Raises:
        ValueError: the text is not a hex secret of the right length.
    """
    secret = bytes.fromhex(text.strip())
    if len(secret) != SECRET_LEN:
        raise ValueError(f"a secret has {SECRET_LEN} bytes, got {len(secret)}")
    return secret


def _mac(secret: bytes, label: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.digest(secret, label + first + second, "sha256")


def _magic(version: int) -> bytes:
    return NAME + bytes([version])


def check_version(magic: _Bytes, peer: str) -> None:
    """Check the name and version a peer stated (the first :data:`MAGIC` bytes it sent).

    Args:
        magic: the bytes the peer sent where its magic belongs.
        peer: who the peer is, for the message (``"the server"``, ``"the client"``).

    Raises:
        AuthenticationError: the bytes are not an actorrt magic at all.
        ProtocolVersionError: the peer speaks another protocol version; the message names
            both versions.
    """
    magic = bytes(magic[: len(MAGIC)])
    if magic[: len(NAME)] != NAME or len(magic) != len(MAGIC):
        raise AuthenticationError(
            f"{peer} is not an actorrt peer (expected its first bytes to be {NAME!r} and a "
            f"version, got {magic!r})"
        )
    version = magic[-1]
    if version != PROTOCOL_VERSION:
        raise ProtocolVersionError(
            f"{peer} speaks actorrt wire protocol version {version}, this end version "
            f"{PROTOCOL_VERSION}: both ends must run the same actorrt release (upgrade or "
            "downgrade one of them; worker processes import actorrt from where their runtime "
            "did, so a mismatch there means the installed package changed under a running "
            "program)"
        )


def server_hello(version: int = PROTOCOL_VERSION) -> tuple[bytes, bytes]:
    """Start a handshake on the server side.

    Args:
        version: the protocol version to state (another one only to test a mismatch).

    Returns:
        ``(message, server_nonce)``: the hello to send and the nonce to keep for
        :func:`check_client`.
    """
    nonce = os.urandom(NONCE_LEN)
    return _magic(version) + nonce, nonce


def client_response(
    secret: bytes, hello: _Bytes, version: int = PROTOCOL_VERSION
) -> tuple[bytes, bytes]:
    """Answer a server's hello.

    Args:
        secret: the runtime's secret.
        hello: the :data:`HELLO_LEN` bytes the server sent.
        version: the protocol version to state (another one only to test a mismatch).

    Returns:
        ``(message, expected_proof)``: the response to send and the proof the server must send
        back (for :func:`check_server`).

    Raises:
        AuthenticationError: the hello is not from an actorrt server.
        ProtocolVersionError: the server speaks another protocol version.
    """
    check_version(hello, "the server")
    server_nonce = bytes(hello[len(MAGIC) : HELLO_LEN])
    client_nonce = os.urandom(NONCE_LEN)
    mac = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce)
    response = _magic(version) + client_nonce + mac
    return response, _mac(secret, _SERVER_LABEL, client_nonce, server_nonce)


def check_client(secret: bytes, server_nonce: bytes, response: _Bytes) -> bytes:
    """Verify a client's response on the server side.

    Args:
        secret: the runtime's secret.
        server_nonce: the nonce from :func:`server_hello`.
        response: the :data:`RESPONSE_LEN` bytes the client sent.

    Returns:
        The proof to send back to the client.

    Raises:
        AuthenticationError: the client does not know the secret.
        ProtocolVersionError: the client speaks another protocol version.
    """
    check_version(response, "the client")
    client_nonce = bytes(response[len(MAGIC) : len(MAGIC) + NONCE_LEN])
    expected = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce)
    mac = bytes(response[len(MAGIC) + NONCE_LEN : RESPONSE_LEN])
    if not hmac.compare_digest(expected, mac):
        raise AuthenticationError("the client failed authentication (wrong runtime secret)")
    return _mac(secret, _SERVER_LABEL, client_nonce, server_nonce)


def check_server(expected_proof: bytes, proof: _Bytes) -> None:
    """Verify the server's proof on the client side.

    Raises:
        AuthenticationError: the server does not know the secret.
    """
    if not hmac.compare_digest(expected_proof, bytes(proof)):
        raise AuthenticationError("the server failed authentication (wrong runtime secret)")


class Handshake:
    """One end's side of the handshake, as a state machine fed the bytes it receives.

    Args:
        secret: the runtime's secret.
        server: whether this end is the server (it speaks first).
    """

    # __slots__ for speed and size: one per connection.
    __slots__ = ("_expected_proof", "_server", "_server_nonce", "done", "secret", "started")

    def __init__(self, secret: bytes, server: bool) -> None:
        self.secret = secret
        self._server = server
        self._server_nonce = b""
        self._expected_proof = b""
        self.done = False
        self.started = False  # whether the peer has taken part (for the error message)

    def start(self) -> bytes:
        """Return what to send when the connection is made (the server's hello, or nothing)."""
        if not self._server:
            return b""
        hello, self._server_nonce = server_hello()
        return hello

    def feed(self, data: _Bytes) -> tuple[int, bytes]:
        """Consume what has been received so far.

        Args:
            data: every handshake byte received and not yet consumed.

        Returns:
            ``(consumed, reply)``: how many bytes of ``data`` were used, and what to send back
            (possibly nothing). :attr:`done` turns true once the peer is authenticated; bytes
            after the handshake are left unconsumed: they are frames.

        Raises:
            AuthenticationError: the peer failed the handshake.
            ProtocolVersionError: the peer speaks another protocol version.
        """
        if self._server:
            if len(data) >= len(MAGIC):
                check_version(data, "the client")  # at once: an older client sends less
            if len(data) < RESPONSE_LEN:
                return 0, b""
            self.started = True
            proof = check_client(self.secret, self._server_nonce, data[:RESPONSE_LEN])
            self.done = True
            return RESPONSE_LEN, proof
        consumed, reply = 0, b""
        if not self._expected_proof:
            if len(data) < HELLO_LEN:
                return 0, b""
            self.started = True
            reply, self._expected_proof = client_response(self.secret, data[:HELLO_LEN])
            consumed = HELLO_LEN
        if len(data) - consumed >= PROOF_LEN:
            check_server(self._expected_proof, data[consumed : consumed + PROOF_LEN])
            consumed += PROOF_LEN
            self.done = True
        return consumed, reply
