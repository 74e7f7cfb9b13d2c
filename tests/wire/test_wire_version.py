"""Both ends of every connection state their protocol version in the handshake; a peer of
another version is refused at connect with ``actorrt.ProtocolVersionError``, naming both
versions, before anything is decoded. Real sockets, and the ``actorrt status`` command."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt._control import _discovery
from actorrt._control._server import fetch_status
from actorrt._wire import _auth
from actorrt._wire._codec import Codec
from actorrt._wire._connection import HEADER, REQUEST
from actorrt._wire._messages import PROTOCOL_VERSION
from actorrt._wire._transport import connect_unix, make_private_dir, serve_unix

pytestmark = pytest.mark.timeout(30)

OTHER = PROTOCOL_VERSION + 97  # a version no release speaks


class Marker:
    """Unpickling it creates a file: proof that something was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.path,))


def pickle_frame(path: str) -> bytes:
    flags, head, buffers = Codec().pack([Marker(path)])
    assert not buffers
    return HEADER.pack(len(head) + 9, 1, REQUEST | flags) + head


@pytest.fixture
def sock_dir() -> Any:
    directory = make_private_dir(base="/tmp")
    yield directory
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)


async def fake_server(path: str, version: int, marker: Path) -> asyncio.Server:
    """A server that knows the secret's shape but states ``version``, then sends a pickle."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello, _ = _auth.server_hello(version=version)
        writer.write(hello)
        await reader.read(_auth.RESPONSE_LEN)
        writer.write(os.urandom(_auth.PROOF_LEN) + pickle_frame(str(marker)))
        await writer.drain()
        await reader.read()
        writer.close()

    return await asyncio.start_unix_server(serve, path)


async def test_a_client_refuses_a_server_of_another_version(sock_dir: str, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    path = os.path.join(sock_dir, "other")
    server = await fake_server(path, OTHER, marker)
    with pytest.raises(actorrt.ProtocolVersionError) as caught:
        await connect_unix(path, _auth.new_secret(), codec=Codec())
    text = str(caught.value)
    assert f"version {OTHER}" in text and f"this end version {PROTOCOL_VERSION}" in text
    assert "same actorrt release" in text
    assert isinstance(caught.value, actorrt.WireError) and isinstance(caught.value, ConnectionError)
    assert not marker.exists()
    server.close()
    await server.wait_closed()


async def test_a_server_refuses_a_client_of_another_version_before_decoding_anything(
    sock_dir: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = _auth.new_secret()
    path = os.path.join(sock_dir, "s")
    calls: list[Any] = []
    server = await serve_unix(path, lambda *args: calls.append(args), secret)

    async def client(version: int, marker: Path) -> bytes:
        """A client that knows the secret and states ``version``; then it sends a pickle."""
        reader, writer = await asyncio.open_unix_connection(path)
        hello = await reader.readexactly(_auth.HELLO_LEN)
        response, _ = _auth.client_response(secret, hello, version=version)
        writer.write(response + pickle_frame(str(marker)))
        answer = await reader.read(_auth.PROOF_LEN)  # the proof, or end of file
        writer.close()
        return answer

    # The control: with this version, the same client is authenticated and its pickle loads.
    loaded = tmp_path / "loaded"
    assert len(await client(PROTOCOL_VERSION, loaded)) == _auth.PROOF_LEN
    while not loaded.exists():
        await asyncio.sleep(0.01)

    refused = tmp_path / "refused"
    with caplog.at_level(logging.WARNING, logger="actorrt"):
        assert await client(OTHER, refused) == b""  # hung up, no proof
    assert not refused.exists()
    assert len(calls) == 1  # only the control's frame reached the handler
    assert f"the client speaks actorrt wire protocol version {OTHER}" in caplog.text
    server.close()
    await server.wait_closed()


async def test_fetch_status_names_both_versions(sock_dir: str, tmp_path: Path) -> None:
    path = os.path.join(sock_dir, "status.sock")
    server = await fake_server(path, OTHER, tmp_path / "unpickled")
    entry = _discovery.RuntimeEntry(
        path="unused", pid=os.getpid(), runtime_id="r", socket=path, secret=_auth.new_secret(),
        started_at=0.0, proc_start=None, argv=(),
    )  # fmt: skip
    with pytest.raises(actorrt.ProtocolVersionError, match=f"version {OTHER}, this end"):
        await fetch_status(entry)
    server.close()
    await server.wait_closed()


async def test_actorrt_status_says_the_runtime_runs_another_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``actorrt status`` as a user runs it, against a registered runtime whose status socket
    speaks another protocol version (as a program started with another actorrt release)."""
    directory = tmp_path / "discovery"
    monkeypatch.setenv(_discovery.DIR_ENV, str(directory))
    prepared = _discovery.prepare()
    path = _discovery.socket_path(prepared, "oldrt")
    assert path is not None
    server = await fake_server(path, OTHER, tmp_path / "unpickled")
    entry = _discovery.register(prepared, "oldrt", path, _auth.new_secret())
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "actorrt", "status",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
    finally:
        _discovery.unregister(entry)
        server.close()
        await server.wait_closed()
    assert proc.returncode == 1, (out, err)
    text = err.decode()
    assert f"process {os.getpid()}" in text and "ProtocolVersionError" in text, text
    assert f"version {OTHER}" in text and f"version {PROTOCOL_VERSION}" in text, text
    assert "same actorrt release" in text, text


@actorrt.actor(process=True, num_cpus=0.01)
class Probe:
    def ping(self) -> str:
        return "pong"


async def test_a_worker_of_another_release_fails_to_start_and_the_spawn_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker process that imports an actorrt of another protocol version (the installed
    package changed under a running program) is refused at connect; the spawn fails naming
    both versions, instead of anything being decoded."""
    import shutil

    from actorrt._processes import _bootstrap

    copy = tmp_path / "other-release"
    shutil.copytree(
        Path(actorrt.__file__).parent, copy / "actorrt",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    messages = copy / "actorrt" / "_wire" / "_messages.py"
    text = messages.read_text()
    assert f"PROTOCOL_VERSION: Final = {PROTOCOL_VERSION}\n" in text
    messages.write_text(text.replace(
        f"PROTOCOL_VERSION: Final = {PROTOCOL_VERSION}\n", f"PROTOCOL_VERSION: Final = {OTHER}\n"
    ))  # fmt: skip
    monkeypatch.setattr(_bootstrap, "PACKAGE_PARENT", str(copy))  # workers import the copy
    async with actorrt.Runtime(num_cpus=1):
        with pytest.raises(ConnectionError) as caught:
            await Probe.spawn()
    text = str(caught.value)
    assert "failed to start" in text and "ProtocolVersionError" in text, text
    assert f"version {PROTOCOL_VERSION}, this end version {OTHER}" in text, text
    assert "same actorrt release" in text, text
