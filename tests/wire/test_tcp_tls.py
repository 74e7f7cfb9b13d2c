"""Connections over TCP, plain and TLS, on real sockets on 127.0.0.1: round trips, the
cluster token, the handshake's binding to the server's certificate (a TLS-terminating relay
is refused on both ends), TLS/plain mismatches, version mismatches, connect errors, and the
certificate helpers. Every scenario runs on the default asyncio loop; the main ones also on
uvloop, the loop the runtime uses."""

from __future__ import annotations

import asyncio
import datetime
import hmac
import ipaddress
import logging
import os
import socket
import ssl
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import uvloop
from cryptography import x509

import actorrt
from actorrt._wire import _auth, _tls
from actorrt._wire._codec import Codec
from actorrt._wire._connection import HEADER, REQUEST
from actorrt._wire._messages import PROTOCOL_VERSION
from actorrt._wire._transport import (
    AuthenticationError,
    Connection,
    ConnectionLostError,
    WireServer,
    connect_tcp,
    make_private_dir,
    serve_tcp,
    serve_unix,
)

pytestmark = pytest.mark.timeout(30)

BOUND = 15.0  # every connect in here is bounded: a mismatch must fail, never hang
OTHER = PROTOCOL_VERSION + 97  # a version no release speaks


def echo(conn: Connection, request_id: int | None, payload: Any) -> None:
    if request_id is not None:
        conn.reply(request_id, payload)


class Recorder:
    """A handler that records every frame handed to it (and answers requests)."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, conn: Connection, request_id: int | None, payload: Any) -> None:
        self.calls.append(payload)
        echo(conn, request_id, payload)


class Marker:
    """Unpickling it creates a directory: proof that something was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.path,))


def exists(path: Path) -> bool:
    return path.exists()


def pickle_frame(path: str) -> bytes:
    flags, head, buffers = Codec().pack([Marker(path)])
    assert not buffers
    return HEADER.pack(len(head) + 9, 1, REQUEST | flags) + head


@pytest.fixture
def files(tmp_path: Path) -> _tls.TlsFiles:
    directory = tmp_path / "server-cert"
    directory.mkdir()
    return _tls.generate_self_signed(str(directory), ["127.0.0.1"])


@pytest.fixture
def secret() -> bytes:
    return _auth.new_secret()


async def serve(
    files: _tls.TlsFiles | None, secret: bytes, handler: Any = echo, **options: Any
) -> WireServer:
    """A TCP server on an ephemeral port of 127.0.0.1, with TLS when ``files`` is given."""
    if files is None:
        return await serve_tcp("127.0.0.1", 0, handler, secret, **options)
    return await serve_tcp(
        "127.0.0.1", 0, handler, secret, tls=_tls.server_context(files),
        binding=_tls.context_fingerprint(files), **options,
    )  # fmt: skip


async def connect(address: tuple[str, int], secret: bytes, tls: bool, **options: Any) -> Connection:
    context = _tls.client_context() if tls else None
    return await asyncio.wait_for(connect_tcp(*address, secret, tls=context, **options), BOUND)


def nodelay(conn: Connection) -> int:
    sock = conn._transport.get_extra_info("socket")  # type: ignore[union-attr]
    return int(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


async def opened(server: WireServer) -> Connection:
    """The server's side of the one connection it accepted, once its handshake is done."""
    while not server.connections:  # opens when the client's response arrives
        await asyncio.sleep(0)
    (conn,) = server.connections
    return conn


async def closed_port() -> int:
    """A port of 127.0.0.1 on which nothing listens (just bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario())


# -- round trips ----------------------------------------------------------------------------


async def round_trips(files: _tls.TlsFiles | None, secret: bytes) -> None:
    tls = files is not None
    server = await serve(files, secret)
    host, port = server.address
    assert host == "127.0.0.1" and port > 0
    client = await connect(server.address, secret, tls, handler=echo)
    peer = await opened(server)
    assert (client._transport.get_extra_info("ssl_object") is not None) is tls  # type: ignore[union-attr]
    assert nodelay(client) == 1 and nodelay(peer) == 1
    assert await client.request(("m", (1, "x"), {})) == ("m", (1, "x"), {})
    assert await peer.request("the server calls the client") == "the server calls the client"
    futures = [client.request(i) for i in range(2000)]  # pipelined, coalesced into batches
    assert await asyncio.gather(*futures) == list(range(2000))
    blob = os.urandom(6 << 20)  # a few MB in one frame, through the TLS records
    assert await client.request(blob) == blob
    array = np.random.default_rng(3).random((512, 1024))  # 4 MiB, out of band
    np.testing.assert_array_equal(await client.request(array), array)
    assert await peer.request(blob) == blob  # and the other way
    client.close()
    server.close()
    await client.wait_closed()
    await server.wait_closed()


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
async def test_requests_and_replies_round_trip(
    tls: bool, files: _tls.TlsFiles, secret: bytes
) -> None:
    await round_trips(files if tls else None, secret)


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
def test_requests_and_replies_round_trip_under_uvloop(
    tls: bool, files: _tls.TlsFiles, secret: bytes
) -> None:
    run_on_uvloop(lambda: round_trips(files if tls else None, secret))


async def test_a_client_that_verifies_the_certificate_connects_and_a_foreign_one_is_refused(
    files: _tls.TlsFiles, secret: bytes, tmp_path: Path
) -> None:
    server = await serve(files, secret)
    trusting = _tls.client_context(ca=files.cert)
    client = await asyncio.wait_for(connect_tcp(*server.address, secret, tls=trusting), BOUND)
    assert await client.request("verified") == "verified"
    client.close()
    other = _tls.generate_self_signed(str(tmp_path), ["127.0.0.1"])
    with pytest.raises(AuthenticationError, match=r"127\.0\.0\.1:\d+ presented failed verif"):
        await asyncio.wait_for(
            connect_tcp(*server.address, secret, tls=_tls.client_context(ca=other.cert)), BOUND
        )
    server.close()
    await server.wait_closed()


# -- the token ------------------------------------------------------------------------------


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
async def test_a_wrong_token_is_refused_on_both_ends(
    tls: bool, files: _tls.TlsFiles, secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    server = await serve(files if tls else None, secret, recorder)
    # A client with another token, through the API: refused.
    with (
        caplog.at_level(logging.WARNING, logger="actorrt"),
        pytest.raises(AuthenticationError) as caught,
    ):
        await connect(server.address, _auth.new_secret(), tls)
    text = str(caught.value)
    assert f"127.0.0.1:{server.address[1]}" in text
    if tls:  # the server says why: the certificate matched, so the token is wrong
        assert "the cluster token is wrong" in text, text
    assert "refused a connection from 127.0.0.1 port " in caplog.text
    assert "the client failed authentication" in caplog.text
    assert not server.connections
    # The server never proves itself to a client of another token either: a client whose
    # response is made with another token and followed by a pickle gets no proof and its
    # pickle is never loaded.
    marker = Path(make_private_dir()) / "unpickled"
    context = _tls.client_context() if tls else None
    reader, writer = await asyncio.open_connection(*server.address, ssl=context)
    hello = await reader.readexactly(_auth.HELLO_LEN)
    binding = b""
    if tls:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        binding = _tls.cert_fingerprint(der)
    response, proof = _auth.client_response(_auth.new_secret(), hello, binding=binding)
    writer.write(response + pickle_frame(str(marker)))
    answer = await asyncio.wait_for(reader.read(), BOUND)  # until the server hangs up
    assert proof not in answer
    assert answer == (_auth.REFUSAL + binding if tls else b"")
    writer.close()
    assert not marker.exists() and recorder.calls == []
    os.rmdir(marker.parent)
    server.close()
    await server.wait_closed()


# -- a man in the middle --------------------------------------------------------------------


class Relay:
    """A relay between clients and ``upstream``: it accepts on an ephemeral port and copies
    bytes both ways. With ``own_tls`` it terminates TLS with a certificate of its own and
    dials the server over TLS itself (a man in the middle); without, it copies the raw TCP
    bytes (a plain port forward, under which TLS stays end to end). A man in the middle also
    slips a pickle to the server right after the client's response."""

    def __init__(self, upstream: tuple[str, int], own_tls: _tls.TlsFiles | None, inject: bytes):
        self.upstream = upstream
        self.own_tls = own_tls
        self.inject = inject
        self.tasks: set[asyncio.Task[None]] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        context = None if self.own_tls is None else _tls.server_context(self.own_tls)
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        host, port = self.server.sockets[0].getsockname()[:2]
        return host, port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        context = None if self.own_tls is None else _tls.client_context()
        up_reader, up_writer = await asyncio.open_connection(*self.upstream, ssl=context)
        inject = self.inject if self.own_tls is not None else b""
        for task in (
            asyncio.create_task(self._copy(reader, up_writer, inject)),
            asyncio.create_task(self._copy(up_reader, writer, b"")),
        ):
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _copy(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, inject: bytes
    ) -> None:
        sent = 0
        try:
            while data := await reader.read(65536):
                writer.write(data)
                sent += len(data)
                if inject and sent >= _auth.RESPONSE_LEN:
                    writer.write(inject)  # right behind the client's response
                    inject = b""
                await writer.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()


async def man_in_the_middle(
    files: _tls.TlsFiles, secret: bytes, relay_files: _tls.TlsFiles, marker: Path
) -> None:
    recorder = Recorder()
    server = await serve(files, secret, recorder)
    # The control: a port forward that leaves TLS end to end passes, whatever it relays.
    forward = Relay(server.address, None, pickle_frame(str(marker)))
    client = await connect(await forward.start(), secret, tls=True)
    assert await client.request("through a port forward") == "through a port forward"
    client.close()
    await forward.close()
    recorder.calls.clear()
    # The man in the middle: a relay with a certificate of its own. The client sees the
    # relay's certificate; the handshake it relays is bound to that certificate, not the
    # server's, so the server refuses the client, and the client says why.
    middle = Relay(server.address, relay_files, pickle_frame(str(marker)))
    with pytest.raises(AuthenticationError) as caught:
        await connect(await middle.start(), secret, tls=True)
    text = str(caught.value)
    assert "is not the server's own" in text and "man in the middle" in text, text
    seen = _tls.context_fingerprint(relay_files).hex()[:16]
    own = _tls.context_fingerprint(files).hex()[:16]
    assert seen in text and own in text, text
    assert recorder.calls == [] and not server.connections  # no frame reached the handler
    assert not exists(marker)  # the relay's pickle was never loaded
    await middle.close()
    server.close()
    await server.wait_closed()


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_tls_terminating_relay_is_detected_on_both_ends(
    loop: str, files: _tls.TlsFiles, secret: bytes, tmp_path: Path
) -> None:
    relay_dir = tmp_path / "relay-cert"
    relay_dir.mkdir()
    relay_files = _tls.generate_self_signed(str(relay_dir), ["127.0.0.1"])
    marker = tmp_path / "unpickled"
    logger = logging.getLogger("actorrt")
    collect = _Collect()
    logger.addHandler(collect)
    try:
        scenario = lambda: man_in_the_middle(files, secret, relay_files, marker)  # noqa: E731
        if loop == "uvloop":
            run_on_uvloop(scenario)
        else:
            asyncio.run(scenario())
    finally:
        logger.removeHandler(collect)
    warnings = [record.getMessage() for record in collect.records]
    assert any("the certificate it saw is not this server's" in w for w in warnings), warnings


# -- TLS on one end only --------------------------------------------------------------------


async def test_a_plain_client_of_a_tls_server_is_told_so(
    files: _tls.TlsFiles, secret: bytes
) -> None:
    server = await serve(files, secret)
    with pytest.raises(ConnectionLostError) as caught:
        await connect(server.address, secret, tls=False)
    text = str(caught.value)
    assert f"127.0.0.1:{server.address[1]}" in text, text
    assert "if the server uses TLS, this end does not" in text, text
    server.close()
    await server.wait_closed()


async def test_a_tls_client_of_a_plain_server_is_told_so_on_both_ends(
    secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    server = await serve(None, secret, recorder)
    with caplog.at_level(logging.WARNING, logger="actorrt"):
        with pytest.raises(AuthenticationError) as caught:
            await connect(server.address, secret, tls=True)
        while "speaks TLS" not in caplog.text:  # the server logs it when the hello arrives
            await asyncio.sleep(0.01)
    text = str(caught.value)
    assert f"127.0.0.1:{server.address[1]}" in text, text
    assert "this end uses TLS and the server apparently does not" in text, text
    assert "the client speaks TLS and this end does not" in caplog.text
    assert recorder.calls == []
    server.close()
    await server.wait_closed()


# -- versions -------------------------------------------------------------------------------


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
async def test_a_server_of_another_version_is_refused_naming_both(
    tls: bool, files: _tls.TlsFiles, secret: bytes, tmp_path: Path
) -> None:
    marker = tmp_path / "unpickled"

    async def fake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A server that states another version, then sends a pickle."""
        hello, _ = _auth.server_hello(version=OTHER)
        writer.write(hello)
        await reader.read(_auth.RESPONSE_LEN)
        writer.write(os.urandom(_auth.PROOF_LEN) + pickle_frame(str(marker)))
        await reader.read()
        writer.close()

    context = _tls.server_context(files) if tls else None
    server = await asyncio.start_server(fake, "127.0.0.1", 0, ssl=context)
    address = server.sockets[0].getsockname()[:2]
    with pytest.raises(actorrt.ProtocolVersionError) as caught:
        await connect(address, secret, tls, codec=Codec())
    text = str(caught.value)
    assert f"version {OTHER}" in text and f"this end version {PROTOCOL_VERSION}" in text, text
    assert f"127.0.0.1:{address[1]}" in text, text
    assert not marker.exists()
    server.close()
    await server.wait_closed()


async def test_a_client_of_another_version_is_refused_over_tcp(
    files: _tls.TlsFiles, secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    server = await serve(files, secret, recorder)
    reader, writer = await asyncio.open_connection(*server.address, ssl=_tls.client_context())
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    hello = await reader.readexactly(_auth.HELLO_LEN)
    response, _ = _auth.client_response(
        secret, hello, version=OTHER, binding=_tls.cert_fingerprint(der)
    )
    with caplog.at_level(logging.WARNING, logger="actorrt"):
        writer.write(response)
        assert await asyncio.wait_for(reader.read(), BOUND) == b""  # hung up, no proof
    writer.close()
    assert f"the client speaks actorrt wire protocol version {OTHER}" in caplog.text
    assert f"this end version {PROTOCOL_VERSION}" in caplog.text
    assert recorder.calls == [] and not server.connections
    server.close()
    await server.wait_closed()


# -- connect errors -------------------------------------------------------------------------


async def test_connecting_to_a_closed_port_names_host_and_port(secret: bytes) -> None:
    port = await closed_port()
    for tls in (False, True):
        with pytest.raises(ConnectionRefusedError, match=rf"127\.0\.0\.1:{port}.*refused"):
            await connect(("127.0.0.1", port), secret, tls)


async def test_a_connect_that_gets_no_answer_times_out_naming_host_and_port(
    secret: bytes,
) -> None:
    """A listener whose backlog is full and never accepts: the kernel drops the SYN, as a
    firewall does."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        port = sock.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the accept queue (its size is backlog + 1)
                filler = socket.socket()
                filler.setblocking(False)
                fillers.append(filler)
                try:
                    filler.connect(("127.0.0.1", port))
                except BlockingIOError:
                    pass
            with pytest.raises(TimeoutError, match=rf"127\.0\.0\.1:{port}.*0\.5 s"):
                await connect(("127.0.0.1", port), secret, False, connect_timeout=0.5)
        finally:
            for filler in fillers:
                filler.close()


async def test_bad_arguments_are_refused_at_the_call(files: _tls.TlsFiles, secret: bytes) -> None:
    context = _tls.server_context(files)
    with pytest.raises(ValueError, match="needs binding=context_fingerprint"):
        await serve_tcp("127.0.0.1", 0, echo, secret, tls=context)
    with pytest.raises(ValueError, match="binding without tls"):
        await serve_tcp("127.0.0.1", 0, echo, secret, binding=b"x" * 32)
    with pytest.raises(ValueError, match="TCP port.*70000"):
        await serve_tcp("127.0.0.1", 70000, echo, secret)
    with pytest.raises(ValueError, match="TCP port.*'80'"):
        await connect_tcp("127.0.0.1", "80", secret)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="connect_timeout"):
        await connect_tcp("127.0.0.1", 80, secret, connect_timeout=0)
    with pytest.raises(ValueError, match="token is 32 bytes.*got str of length 64"):
        await connect_tcp("127.0.0.1", 80, _auth.secret_to_text(secret))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token is 32 bytes.*got bytes of length 5"):
        await serve_tcp("127.0.0.1", 0, echo, b"short")
    with pytest.raises(ValueError, match=r"this end needs client_context\(\)"):
        await connect_tcp("127.0.0.1", 80, secret, tls=context)
    with pytest.raises(ValueError, match=r"this end needs server_context\(files\)"):
        await serve_tcp("127.0.0.1", 0, echo, secret, tls=_tls.client_context(), binding=b"x" * 32)


async def test_a_port_in_use_names_the_address(secret: bytes) -> None:
    server = await serve(None, secret)
    host, port = server.address
    with pytest.raises(OSError, match=rf"cannot listen on 127\.0\.0\.1:{port}"):
        await serve_tcp(host, port, echo, secret)
    server.close()
    await server.wait_closed()


async def test_a_tcp_server_has_an_address_and_a_unix_one_a_path(secret: bytes) -> None:
    tcp = await serve(None, secret)
    with pytest.raises(AttributeError, match="TCP server has no path"):
        tcp.path  # noqa: B018
    tcp.close()  # nothing to unlink
    await tcp.wait_closed()
    directory = make_private_dir(base="/tmp")
    unix = await serve_unix(os.path.join(directory, "s"), echo, secret)
    with pytest.raises(AttributeError, match="Unix-socket server has no address"):
        unix.address  # noqa: B018
    unix.close()
    await unix.wait_closed()
    os.rmdir(directory)


# -- certificates ---------------------------------------------------------------------------


def test_generate_self_signed_writes_a_private_key_and_a_cert_naming_the_hosts(
    tmp_path: Path,
) -> None:
    files = _tls.generate_self_signed(str(tmp_path), ["10.1.2.3", "head.example", "::1"])
    assert files == _tls.TlsFiles(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    assert stat.S_IMODE(os.stat(files.key).st_mode) == 0o600
    cert = x509.load_pem_x509_certificate(Path(files.cert).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = names.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("10.1.2.3") in ips and ipaddress.ip_address("::1") in ips
    assert ipaddress.ip_address("127.0.0.1") in ips
    assert names.get_values_for_type(x509.DNSName) == ["head.example", "localhost"]
    assert cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(
        days=3640
    )
    der = ssl.PEM_cert_to_DER_cert(Path(files.cert).read_text())
    assert _tls.context_fingerprint(files) == _tls.cert_fingerprint(der)
    assert len(_tls.cert_fingerprint(der)) == 32
    # Written again: a new key and certificate, the key still private (also when the old
    # file was not).
    first = _tls.context_fingerprint(files)
    os.chmod(files.key, 0o644)
    again = _tls.generate_self_signed(str(tmp_path), ["10.1.2.3"])
    assert stat.S_IMODE(os.stat(again.key).st_mode) == 0o600
    assert _tls.context_fingerprint(again) != first
    with pytest.raises(ValueError, match="IP address or a DNS name, got ''"):
        _tls.generate_self_signed(str(tmp_path), [""])
    with pytest.raises(FileNotFoundError, match="no such directory"):
        _tls.generate_self_signed(str(tmp_path / "missing"))


def test_contexts_name_the_file_that_is_missing_or_wrong(tmp_path: Path) -> None:
    files = _tls.generate_self_signed(str(tmp_path))
    missing = str(tmp_path / "nothing.pem")
    with pytest.raises(FileNotFoundError, match="certificate file .*nothing.pem"):
        _tls.server_context(_tls.TlsFiles(missing, files.key))
    with pytest.raises(FileNotFoundError, match="key file .*nothing.pem"):
        _tls.server_context(_tls.TlsFiles(files.cert, missing))
    with pytest.raises(FileNotFoundError, match="CA file .*nothing.pem"):
        _tls.client_context(ca=missing)
    with pytest.raises(FileNotFoundError, match="certificate file .*nothing.pem"):
        _tls.context_fingerprint(_tls.TlsFiles(missing, files.key))
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = _tls.generate_self_signed(str(other_dir))
    with pytest.raises(ValueError, match="cert.pem.*with the key.*other/key.pem"):
        _tls.server_context(_tls.TlsFiles(files.cert, other.key))  # a key of another cert
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("no certificate here\n")
    with pytest.raises(ValueError, match="garbage.pem.*no PEM certificate"):
        _tls.context_fingerprint(_tls.TlsFiles(str(garbage), files.key))
    with pytest.raises(ValueError, match="garbage.pem"):
        _tls.client_context(ca=str(garbage))
    context = _tls.server_context(files)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert _tls.client_context().verify_mode == ssl.CERT_NONE
    assert _tls.client_context(ca=files.cert).verify_mode == ssl.CERT_REQUIRED


def test_refusals_under_uvloop(files: _tls.TlsFiles, secret: bytes) -> None:
    async def scenario() -> None:
        tls_server = await serve(files, secret)
        plain_server = await serve(None, secret)
        with pytest.raises(AuthenticationError, match="the cluster token is wrong"):
            await connect(tls_server.address, _auth.new_secret(), tls=True)
        with pytest.raises(AuthenticationError, match=r"did not complete.*token\) right"):
            await connect(plain_server.address, _auth.new_secret(), tls=False)
        with pytest.raises(ConnectionLostError, match="if the server uses TLS, this end does"):
            await connect(tls_server.address, secret, tls=False)
        with pytest.raises(AuthenticationError, match="this end uses TLS and the server appar"):
            await connect(plain_server.address, secret, tls=True)
        port = await closed_port()
        with pytest.raises(ConnectionRefusedError, match=rf"127\.0\.0\.1:{port}"):
            await connect(("127.0.0.1", port), secret, tls=True)
        for server in (tls_server, plain_server):
            assert not server.connections
            server.close()
            await server.wait_closed()

    run_on_uvloop(scenario)


async def test_ipv6_addresses_work_and_are_named_in_brackets(
    files: _tls.TlsFiles, secret: bytes
) -> None:
    server = await serve_tcp(
        "::1", 0, echo, secret, tls=_tls.server_context(files),
        binding=_tls.context_fingerprint(files),
    )  # fmt: skip
    host, port = server.address
    assert host == "::1"
    client = await connect(server.address, secret, tls=True)
    assert await client.request("over IPv6") == "over IPv6"
    client.close()
    with pytest.raises(AuthenticationError, match=rf"^\[::1\]:{port}: .*token is wrong"):
        await connect(server.address, _auth.new_secret(), tls=True)
    server.close()
    await server.wait_closed()


def test_the_binding_extends_both_macs_and_an_empty_one_leaves_the_plain_handshake() -> None:
    """The MACs, computed here from their definition: with an empty binding they are the
    Unix-socket handshake's, byte for byte; a binding is appended to what both cover."""
    secret = _auth.new_secret()
    hello, server_nonce = _auth.server_hello()
    for binding in (b"", os.urandom(32)):
        response, proof = _auth.client_response(secret, hello, binding=binding)
        client_nonce = response[len(_auth.MAGIC) : len(_auth.MAGIC) + 32]
        mac = response[len(_auth.MAGIC) + 32 :]
        data = b"actorrt client" + server_nonce + client_nonce + binding
        assert mac == hmac.digest(secret, data, "sha256")
        data = b"actorrt server" + client_nonce + server_nonce + binding
        assert proof == hmac.digest(secret, data, "sha256")
        assert _auth.check_client(secret, server_nonce, response, binding) == proof
        other = bytes(32) if binding else os.urandom(32)
        with pytest.raises(AuthenticationError):
            _auth.check_client(secret, server_nonce, response, other)
