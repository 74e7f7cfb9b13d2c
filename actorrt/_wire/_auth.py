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

Over TLS the handshake is bound to the channel: both MACs end with ``binding``, the sha256
fingerprint of the server's certificate as each end sees it (the server its own, the client the
one presented to it), so the client's MAC covers ``label + server_nonce + client_nonce +
binding`` and the server's proof likewise. A man in the middle that terminates TLS with its own
certificate and relays the handshake then fails on both ends: the server's MAC check and the
client's proof check each use a different fingerprint than the other end. Without TLS the
binding is empty and the bytes are those of the plain handshake above. A server with a binding
that refuses a client sends :data:`REFUSAL` and its fingerprint before it closes, so the client
can say whether the token or the certificate was wrong (see :func:`refused`); nothing is
trusted from it but the wording of the error.

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
    "BINDING_LEN",
    "HELLO_LEN",
    "MAGIC",
    "PROOF_LEN",
    "REFUSAL",
    "RESPONSE_LEN",
    "SECRET_LEN",
    "SECRET_VARIABLES",
    "TOKEN_FILE_VARIABLE",
    "TOKEN_VARIABLE",
    "AuthenticationError",
    "Handshake",
    "check_client",
    "check_server",
    "check_version",
    "client_response",
    "new_secret",
    "refused",
    "secret_from_text",
    "secret_to_text",
    "server_hello",
]

SECRET_LEN: Final = 32

# Where a driver or a node finds the cluster's token: the token itself, or a file holding it.
TOKEN_VARIABLE: Final = "ACTORRT_CLUSTER_TOKEN"
TOKEN_FILE_VARIABLE: Final = "ACTORRT_CLUSTER_TOKEN_FILE"
# Variables no worker process inherits: a worker is handed the one secret it needs on its
# stdin, so its actor's code (and what that runs) cannot read the cluster's token.
SECRET_VARIABLES: Final = (TOKEN_VARIABLE, TOKEN_FILE_VARIABLE)
NONCE_LEN: Final = 32
MAC_LEN: Final = 32
NAME: Final = b"actorrt"  # the protocol's name, at the start of both ends' first message
MAGIC: Final = NAME + bytes([PROTOCOL_VERSION])  # name and version
HELLO_LEN: Final = len(MAGIC) + NONCE_LEN
RESPONSE_LEN: Final = len(MAGIC) + NONCE_LEN + MAC_LEN
PROOF_LEN: Final = MAC_LEN

_CLIENT_LABEL: Final = b"actorrt client"
_SERVER_LABEL: Final = b"actorrt server"

# What a TLS peer's first bytes are (a handshake record, or an alert) in TLS 1.0 to 1.3.
_TLS_RECORDS: Final = frozenset({b"\x16\x03", b"\x15\x03"})

# What a server sends instead of its proof when it refuses a client on a TLS connection,
# followed by its own certificate's fingerprint, so the client can say whether the token or
# the certificate was wrong. Unauthenticated, hence only ever used to word the error.
REFUSAL: Final = b"actorrt: client refused".ljust(MAC_LEN, b"\0")
BINDING_LEN: Final = 32  # a sha256 certificate fingerprint

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


def _mac(secret: bytes, label: bytes, first: bytes, second: bytes, binding: bytes) -> bytes:
    return hmac.digest(secret, label + first + second + binding, "sha256")


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
    if magic[:2] in _TLS_RECORDS:
        raise AuthenticationError(
            f"{peer} speaks TLS and this end does not: start both ends with TLS (a server "
            "context on one, a client context on the other) or neither"
        )
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
    secret: bytes, hello: _Bytes, version: int = PROTOCOL_VERSION, binding: bytes = b""
) -> tuple[bytes, bytes]:
    """Answer a server's hello.

    Args:
        secret: the runtime's secret.
        hello: the :data:`HELLO_LEN` bytes the server sent.
        version: the protocol version to state (another one only to test a mismatch).
        binding: the fingerprint of the certificate the server presented (``b""`` without TLS).

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
    mac = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce, binding)
    response = _magic(version) + client_nonce + mac
    return response, _mac(secret, _SERVER_LABEL, client_nonce, server_nonce, binding)


def check_client(
    secret: bytes, server_nonce: bytes, response: _Bytes, binding: bytes = b""
) -> bytes:
    """Verify a client's response on the server side.

    Args:
        secret: the runtime's secret.
        server_nonce: the nonce from :func:`server_hello`.
        response: the :data:`RESPONSE_LEN` bytes the client sent.
        binding: the fingerprint of this server's own certificate (``b""`` without TLS).

    Returns:
        The proof to send back to the client.

    Raises:
        AuthenticationError: the client does not know the secret (or, with a binding, saw
            another certificate than this server's).
        ProtocolVersionError: the client speaks another protocol version.
    """
    check_version(response, "the client")
    client_nonce = bytes(response[len(MAGIC) : len(MAGIC) + NONCE_LEN])
    expected = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce, binding)
    mac = bytes(response[len(MAGIC) + NONCE_LEN : RESPONSE_LEN])
    if not hmac.compare_digest(expected, mac):
        if binding:
            raise AuthenticationError(
                "the client failed authentication: it holds another cluster token, or the "
                f"certificate it saw is not this server's (sha256 {binding.hex()[:16]}...): "
                "a man in the middle, or a proxy that terminates TLS"
            )
        raise AuthenticationError("the client failed authentication (wrong runtime secret)")
    return _mac(secret, _SERVER_LABEL, client_nonce, server_nonce, binding)


def check_server(expected_proof: bytes, proof: _Bytes) -> None:
    """Verify the server's proof on the client side.

    Raises:
        AuthenticationError: the server does not know the secret.
    """
    if not hmac.compare_digest(expected_proof, bytes(proof)):
        raise AuthenticationError("the server failed authentication (wrong runtime secret)")


def refused(server_binding: _Bytes, binding: bytes) -> AuthenticationError:
    """The client's error for a server's :data:`REFUSAL` that states ``server_binding``.

    Args:
        server_binding: the fingerprint the server stated as its own certificate's.
        binding: the fingerprint of the certificate this client saw.
    """
    server_binding = bytes(server_binding)
    if hmac.compare_digest(server_binding, binding):
        return AuthenticationError(
            "the server refused this client's proof: the cluster token is wrong (the "
            "certificate matched)"
        )
    return AuthenticationError(
        f"the certificate this client saw (sha256 {binding.hex()[:16]}...) is not the server's "
        f"own (sha256 {server_binding.hex()[:16]}...): a man in the middle relays the "
        "connection, or the address leads through a proxy that terminates TLS; the server "
        "refused the client, and nothing was sent"
    )


class Handshake:
    """One end's side of the handshake, as a state machine fed the bytes it receives.

    Args:
        secret: the runtime's secret.
        server: whether this end is the server (it speaks first).
        binding: the TLS channel binding, the sha256 fingerprint of the server's certificate
            as this end sees it (the server its own, the client the one presented to it),
            mixed into both MACs; ``b""`` without TLS (the Unix-socket handshake). Set the
            attribute before the first :meth:`feed` where it is known only then.
        announce: the client sends its magic at once instead of with its response (the
            bytes on the wire are the same, sent earlier), so a TLS server that a plain client
            reached fails at once instead of both ends waiting for the other to speak.
    """

    # __slots__ for speed and size: one per connection.
    __slots__ = (
        "_expected_proof",
        "_server",
        "_server_nonce",
        "announce",
        "binding",
        "done",
        "refusal",
        "secret",
        "started",
    )

    def __init__(
        self, secret: bytes, server: bool, binding: bytes = b"", announce: bool = False
    ) -> None:
        self.secret = secret
        self._server = server
        self.binding = binding
        self.announce = announce
        self._server_nonce = b""
        self._expected_proof = b""
        self.done = False
        self.started = False  # whether the peer has taken part (for the error message)
        self.refusal = b""  # what a refusing server sends before it closes (TLS only)

    def on_tcp(self, peer_binding: bytes) -> None:
        """The connection runs over TCP: a client announces itself and binds the handshake to
        the certificate the server presented (``peer_binding``; ``b""`` without TLS)."""
        if not self._server:
            self.announce = True
            self.binding = peer_binding

    def start(self) -> bytes:
        """Return what to send when the connection is made (the server's hello, the client's
        magic if it announces itself, or nothing)."""
        if not self._server:
            return MAGIC if self.announce else b""
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
            AuthenticationError: the peer failed the handshake (a refusing server with a
                binding has then set :attr:`refusal`: send it, then close).
            ProtocolVersionError: the peer speaks another protocol version.
        """
        if self._server:
            if len(data) >= len(MAGIC):
                check_version(data, "the client")  # at once: an older client sends less
            if len(data) < RESPONSE_LEN:
                return 0, b""
            self.started = True
            try:
                proof = check_client(
                    self.secret, self._server_nonce, data[:RESPONSE_LEN], self.binding
                )
            except AuthenticationError:
                if self.binding:
                    self.refusal = REFUSAL + self.binding
                raise
            self.done = True
            return RESPONSE_LEN, proof
        consumed, reply = 0, b""
        if not self._expected_proof:
            if len(data) < HELLO_LEN:
                return 0, b""
            self.started = True
            reply, self._expected_proof = client_response(
                self.secret, data[:HELLO_LEN], binding=self.binding
            )
            if self.announce:
                reply = reply[len(MAGIC) :]  # sent at the start
            consumed = HELLO_LEN
        if len(data) - consumed >= PROOF_LEN:
            proof = bytes(data[consumed : consumed + PROOF_LEN])
            if self.binding and proof == REFUSAL:
                stated = data[consumed + PROOF_LEN : consumed + PROOF_LEN + BINDING_LEN]
                if len(stated) < BINDING_LEN:
                    return consumed, reply
                raise refused(stated, self.binding)
            check_server(self._expected_proof, proof)
            consumed += PROOF_LEN
            self.done = True
        return consumed, reply
