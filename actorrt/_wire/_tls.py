"""TLS for connections over TCP: certificates, contexts, and the channel binding.

A cluster's connections cross machines, so they run over TLS (Python's :mod:`ssl`), and the
secret handshake of :mod:`actorrt._wire._auth` still decides who may talk: the cluster token
(the runtime's 32-byte secret) is what authenticates, not the certificate. A head needs no
certificate authority: :func:`generate_self_signed` writes a certificate and key for it, and a
client that does not verify that certificate (:func:`client_context` without ``ca``) is still
safe from a man in the middle, because the handshake's MACs cover the fingerprint of the
server's certificate as each end sees it (:func:`cert_fingerprint`): a relay that terminates
TLS with a certificate of its own makes the two ends compute different MACs, and both refuse.
A deployment with its own authority passes ``ca`` and gets the chain verified as well. The
private key stays secret too (whoever holds it can present the server's own certificate and
relay a connection undetected); the certificate and its fingerprint are public.

``cryptography`` is imported only by :func:`generate_self_signed`, so a worker process that
only connects never loads it.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import socket
import ssl
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = [
    "TlsFiles",
    "cert_fingerprint",
    "client_context",
    "context_fingerprint",
    "generate_self_signed",
    "server_context",
    "tcp_channel",
]

CERT_NAME = "cert.pem"
KEY_NAME = "key.pem"
VALID_DAYS = 3650  # ten years: a cluster's own certificate is pinned, not trusted by date


class TlsFiles(NamedTuple):
    """Where a server's certificate and private key are (PEM files)."""

    cert: str
    key: str


def generate_self_signed(directory: str, hosts: Sequence[str] = ()) -> TlsFiles:
    """Write a fresh self-signed certificate and its key into ``directory``.

    The key is EC P-256, written with mode 0600; the certificate is valid for ten years and
    names ``hosts`` (IP addresses as IP SANs, other names as DNS SANs) plus ``localhost`` and
    ``127.0.0.1``.

    Args:
        directory: an existing directory; ``cert.pem`` and ``key.pem`` are (over)written there.
        hosts: the addresses and names clients will dial.

    Returns:
        The two files' paths.

    Raises:
        ValueError: a host is empty or not a string.
        FileNotFoundError: the directory does not exist.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot write a certificate into {directory!r}: no such directory")
    names: list[x509.GeneralName] = []
    for host in [*hosts, "localhost", "127.0.0.1"]:
        if not isinstance(host, str) or not host.strip():
            raise ValueError(f"a host must be an IP address or a DNS name, got {host!r}")
        host = host.strip()
        try:
            name: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            name = x509.DNSName(host)
        if name not in names:
            names.append(name)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "actorrt cluster")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # clocks a little apart
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = TlsFiles(os.path.join(directory, CERT_NAME), os.path.join(directory, KEY_NAME))
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    if os.path.exists(files.key):
        os.unlink(files.key)  # O_CREAT's mode applies only to a new file
    fd = os.open(files.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem)
    with open(files.cert, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return files


def _check_readable(kind: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise type(exc)(
            exc.errno, f"the TLS {kind} file {path!r} cannot be read: {exc.strerror}"
        ) from exc


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """A server's TLS context (TLS 1.2 or later) with its certificate and key loaded.

    Raises:
        FileNotFoundError: a file is missing (the message names it).
        PermissionError: a file cannot be read (the message names it).
        ValueError: a file is not a PEM certificate or key, or the key does not belong to the
            certificate (the message names both files).
    """
    _check_readable("certificate", files.cert)
    _check_readable("key", files.key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert, files.key)
    except ssl.SSLError as exc:
        raise ValueError(
            f"cannot load the TLS certificate {files.cert!r} with the key {files.key!r}: "
            f"{exc.reason or exc} (both must be PEM files, and the key the certificate's own)"
        ) from exc
    return context


def client_context(ca: str | None = None) -> ssl.SSLContext:
    """A client's TLS context (TLS 1.2 or later).

    Args:
        ca: a PEM file of the certificates to trust (a self-signed server's own certificate, or
            the authority that signed it): the server's chain is verified against it. Host
            names are not checked, since nodes dial by IP address. ``None``: the certificate
            is not verified; the server is then pinned by the handshake's channel binding
            (only a server that holds the cluster token and the certificate presented passes).

    Raises:
        FileNotFoundError: ``ca`` is missing (the message names it).
        ValueError: ``ca`` holds no PEM certificate.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    if ca is None:
        context.verify_mode = ssl.CERT_NONE
        return context
    _check_readable("CA", ca)
    try:
        context.load_verify_locations(cafile=ca)
    except ssl.SSLError as exc:
        raise ValueError(
            f"the TLS CA file {ca!r} holds no PEM certificate: {exc.reason or exc}"
        ) from exc
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def cert_fingerprint(der: bytes) -> bytes:
    """The sha256 of a DER certificate: the handshake's channel binding."""
    return hashlib.sha256(der).digest()


def context_fingerprint(files: TlsFiles) -> bytes:
    """The fingerprint of the certificate in ``files.cert`` (the first one of a chain).

    Raises:
        FileNotFoundError: the file is missing (the message names it).
        ValueError: the file holds no PEM certificate.
    """
    _check_readable("certificate", files.cert)
    with open(files.cert, encoding="ascii", errors="replace") as f:
        text = f.read()
    end = text.find(ssl.PEM_FOOTER)
    if text.find(ssl.PEM_HEADER) < 0 or end < 0:
        raise ValueError(f"the TLS certificate file {files.cert!r} holds no PEM certificate")
    try:
        der = ssl.PEM_cert_to_DER_cert(text[text.find(ssl.PEM_HEADER) : end + len(ssl.PEM_FOOTER)])
    except ValueError as exc:
        raise ValueError(f"the TLS certificate file {files.cert!r} is malformed: {exc}") from exc
    return cert_fingerprint(der)


TCP_THIN_LINEAR_TIMEOUTS = 16  # Linux's <netinet/tcp.h>; the socket module lacks the name


def tcp_channel(transport: Any) -> bytes | None:
    """What a connection needs to know of its transport, once it is made.

    For a TCP transport: sets ``TCP_NODELAY`` (small requests must not wait for the last
    one's acknowledgement) and returns the fingerprint of the certificate the peer presented,
    ``b""`` without TLS or without a peer certificate. For a Unix socket: ``None``.
    """
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sys.platform == "linux":
            # Heartbeats are a thin stream: retransmit them at a steady pace, not with
            # exponential backoff, or a link that drops out for a moment delays them past
            # the silence after which a peer counts as lost.
            sock.setsockopt(socket.IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, 1)
    except OSError:  # already closed: the connection fails on its own
        pass
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return b""
    der = ssl_object.getpeercert(binary_form=True)
    return b"" if der is None else cert_fingerprint(der)
