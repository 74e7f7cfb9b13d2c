"""Per-runtime secrets and the handshake that proves both ends of a connection know one.

A runtime makes a random secret (:func:`new_secret`) and hands it to the worker processes it
starts (never through the socket). Every connection then runs a mutual HMAC-SHA256
challenge-response before a single frame is decoded, so nothing is ever unpickled from a peer
that has not proven it knows the secret, and a worker never unpickles from a server that has not
proven it either:

1. server -> client, :data:`HELLO_LEN` bytes: :data:`MAGIC` (protocol name and version), then
   a fresh 32-byte server nonce.
2. client -> server, :data:`RESPONSE_LEN` bytes: a fresh 32-byte client nonce, then
   ``HMAC(secret, b"actorrt client" + server_nonce + client_nonce)``.
3. server -> client, :data:`PROOF_LEN` bytes:
   ``HMAC(secret, b"actorrt server" + client_nonce + server_nonce)``. A server that rejects the
   client closes the connection instead of answering.

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

__all__ = [
    "HELLO_LEN",
    "MAGIC",
    "PROOF_LEN",
    "RESPONSE_LEN",
    "AuthenticationError",
    "Handshake",
    "check_client",
    "check_server",
    "client_response",
    "new_secret",
    "secret_from_text",
    "secret_to_text",
    "server_hello",
]

SECRET_LEN: Final = 32
NONCE_LEN: Final = 32
MAC_LEN: Final = 32
MAGIC: Final = b"actorrt\x01"  # protocol name and version: a mismatch fails the handshake
HELLO_LEN: Final = len(MAGIC) + NONCE_LEN
RESPONSE_LEN: Final = NONCE_LEN + MAC_LEN
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


def server_hello() -> tuple[bytes, bytes]:
    """Start a handshake on the server side.

    Returns:
        ``(message, server_nonce)``: the hello to send and the nonce to keep for
        :func:`check_client`.
    """
    nonce = os.urandom(NONCE_LEN)
    return MAGIC + nonce, nonce


def client_response(secret: bytes, hello: _Bytes) -> tuple[bytes, bytes]:
    """Answer a server's hello.

    Args:
        secret: the runtime's secret.
        hello: the :data:`HELLO_LEN` bytes the server sent.

    Returns:
        ``(message, expected_proof)``: the response to send and the proof the server must send
        back (for :func:`check_server`).

    Raises:
        AuthenticationError: the hello is not from an actorrt server of this version.
    """
    if hello[: len(MAGIC)] != MAGIC:
        raise AuthenticationError(
            "the socket's server is not an actorrt runtime of this version "
            f"(expected hello {MAGIC!r}, got {bytes(hello[: len(MAGIC)])!r})"
        )
    server_nonce = bytes(hello[len(MAGIC) : HELLO_LEN])
    client_nonce = os.urandom(NONCE_LEN)
    mac = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce)
    return client_nonce + mac, _mac(secret, _SERVER_LABEL, client_nonce, server_nonce)


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
    """
    client_nonce = bytes(response[:NONCE_LEN])
    expected = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce)
    if not hmac.compare_digest(expected, bytes(response[NONCE_LEN:RESPONSE_LEN])):
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
        """
        if self._server:
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
