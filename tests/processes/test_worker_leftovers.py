"""What a worker-process actor started ends with it: its subprocesses (double-forked ones and
those in a session of their own too) are killed and reaped when it stops, a worker that still
holds one of its threads is retired rather than pooled, a Tune trial's subprocess ends with
the trial; and a worker that loses its connection to the runtime says so, not "SIGKILL"."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import pytest
from conftest import eventually, proc_state, run_config, wait_until

import actorrt
from actorrt import tune

pytestmark = pytest.mark.timeout(90)

# Forks twice with a new session in between, as a daemon does: the grandchild is orphaned
# and outside the worker's process group. It writes its pid to the file argv[1] names.
DAEMON = """
import os, sys, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
"""


def start_processes(folder: str) -> list[int]:
    """A plain child, one in a session of its own, and a double-forked daemon: their pids."""
    plain = subprocess.Popen(["sleep", "300"])
    session = subprocess.Popen(["sleep", "300"], start_new_session=True)
    pid_file = os.path.join(folder, f"daemon.{os.getpid()}.{time.monotonic_ns()}")
    subprocess.run([sys.executable, "-c", DAEMON, pid_file], check=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(pid_file):
        assert time.monotonic() < deadline, "the daemon did not start"
        time.sleep(0.01)  # another process writes the file: no event to wait on
    with open(pid_file) as f:
        daemon = int(f.read())
    return [plain.pid, session.pid, daemon]


def descendants(root: int) -> list[int]:
    """Pids below ``root`` in the process tree (states other than gone)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(") ", 1)[1].split()[1])
            except (OSError, IndexError):
                pass
    found, todo = [], [root]
    while todo:
        parent = todo.pop()
        kids = [pid for pid, ppid in parents.items() if ppid == parent]
        found.extend(kids)
        todo.extend(kids)
    return found


@actorrt.actor(num_cpus=1)
class Starter:
    def __init__(self) -> None:
        self.release = threading.Event()

    def start(self, folder: str, thread: bool) -> list[int]:
        if thread:  # a thread the actor never ends
            threading.Thread(target=self.release.wait, name="left-behind", daemon=True).start()
        return start_processes(folder)

    def look(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "threads": [t.name for t in threading.enumerate()],
            "descendants": descendants(os.getpid()),
        }


async def all_gone(pids: list[int]) -> bool:
    return await eventually(lambda: all(proc_state(p) == "gone" for p in pids), within=20.0)


@pytest.mark.actorrt(num_cpus=2)
async def test_an_actors_processes_end_with_it_and_its_clean_worker_is_reused(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    first = await Starter.spawn()
    before = await first.look()
    pids = await first.start(str(tmp_path), False)
    assert all(proc_state(p) != "gone" for p in pids)
    await first.stop()
    assert await all_gone(pids), {p: proc_state(p) for p in pids}
    # Nothing was left that could not be ended: the next actor gets the same worker, and
    # nothing of the first actor's below it.
    second = await Starter.spawn()
    now = await second.look()
    assert now["pid"] == before["pid"]
    assert not set(now["descendants"]) & set(pids)
    assert sorted(now["descendants"]) == sorted(before["descendants"])  # its own watcher
    await second.stop()


@pytest.mark.actorrt(num_cpus=2)
async def test_a_worker_left_holding_an_actors_thread_is_retired(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    first = await Starter.spawn()
    first_pid = (await first.look())["pid"]
    pids = await first.start(str(tmp_path), True)
    await first.stop()
    assert await all_gone(pids), {p: proc_state(p) for p in pids}
    second = await Starter.spawn()
    now = await second.look()
    assert now["pid"] != first_pid  # a fresh worker: the thread could not be ended
    assert "left-behind" not in now["threads"]
    # The retired worker itself is gone too.
    assert await eventually(lambda: proc_state(first_pid) == "gone", within=20.0)
    await second.stop()


def trainable_with_a_subprocess(config: dict[str, Any]) -> None:
    child = subprocess.Popen(["sleep", "300"])
    tune.report({"child": child.pid, "worker": os.getpid()})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_trials_subprocess_ends_with_the_trial(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    tuner = tune.Tuner(
        trainable_with_a_subprocess,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=run_config(tmp_path),
    )
    results = await tuner.fit_async()
    children = [int(r.metrics["child"]) for r in results]
    assert len(children) == 2
    # The runtime is still running: the trials ended, their subprocesses with them.
    assert await all_gone(children), {p: proc_state(p) for p in children}


@actorrt.actor(num_cpus=1)
class Cutter:
    def cut_runtime_connection(self) -> None:
        """Shut the worker's socket to its runtime down under it."""
        for fd in os.listdir("/proc/self/fd"):
            try:
                if not stat.S_ISSOCK(os.fstat(int(fd)).st_mode):
                    continue
                sock = socket.socket(fileno=int(fd))
            except OSError:
                continue
            try:
                if sock.family == socket.AF_UNIX and str(sock.getpeername()).endswith("rt.sock"):
                    sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.detach()


@pytest.mark.actorrt(num_cpus=2)
async def test_a_worker_that_lost_its_connection_says_so(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Cutter.spawn()
    with pytest.raises(actorrt.ActorDiedError) as died:
        await ref.cut_runtime_connection()
    text = str(died.value)
    assert "lost its connection to the runtime" in text, text
    assert "SIGKILL" not in text and "out-of-memory" not in text, text
    assert died.value.signal is None and died.value.exitcode == 4


def test_a_direct_listener_over_tls_leaves_no_key_in_the_temporary_folder(tmp_path: Any,
                                                                          monkeypatch: Any) -> None:
    """A worker of a cluster listens for its peers over TLS with a certificate of its own:
    once listening, its key is in memory only, so a worker SIGKILLed later (a lost node)
    leaves no folder with a private key behind."""
    import asyncio
    import ssl
    import tempfile

    from actorrt._processes._direct import DirectRoutes, PeerSide
    from actorrt._wire._codec import Codec
    from actorrt._wire._dispatcher import Dispatcher

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    async def listen() -> None:
        routes = DirectRoutes(PeerSide("tcp", "127.0.0.1", b"s" * 32), "w1", None,  # type: ignore[arg-type]
                              Dispatcher("peer"), Codec())
        endpoint = await routes.endpoint()
        assert endpoint is not None
        host, port = endpoint["tcp"]
        assert os.listdir(tmp_path) == []  # listening, and nothing on disk
        client = ssl.create_default_context()
        client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
        _, writer = await asyncio.open_connection(host, port, ssl=client)  # a TLS listener
        writer.close()
        await routes.close()

    asyncio.run(listen())


@actorrt.actor(num_cpus=1)
class TempUser:
    def leave_temporary_files(self) -> tuple[str, str, int]:
        """What user code does: a temporary folder and file, never removed; the worker's
        TMPDIR as a subprocess sees it; the worker's pid."""
        folder = tempfile.mkdtemp(prefix="user-")
        with open(os.path.join(folder, "model.bin"), "wb") as f:
            f.write(b"x" * 1000)
        child_tmp = subprocess.run(
            [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        return folder, child_tmp, os.getpid()


@pytest.mark.actorrt(num_cpus=2)
async def test_a_sigkilled_workers_temporary_files_are_removed(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await TempUser.spawn()
    folder, child_tmp, pid = await ref.leave_temporary_files()
    worker_tmp = os.path.dirname(folder)
    # The worker's own folder, this user's alone, is TMPDIR for what it starts too.
    assert child_tmp == worker_tmp
    assert os.path.basename(worker_tmp).startswith("actorrt-worker-")
    info = os.stat(worker_tmp)
    assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(actorrt.ActorDiedError):
        await ref.leave_temporary_files()
    assert await eventually(lambda: not os.path.exists(worker_tmp), within=10), worker_tmp
    # A worker that ends the ordinary way (its runtime shut down) leaves nothing either.
    again = await TempUser.spawn()
    folder, _, _ = await again.leave_temporary_files()
    await actorrt_runtime.shutdown()
    assert not os.path.exists(os.path.dirname(folder))  # noqa: ASYNC240 (gone by then)


OWNER = """
import asyncio, os, tempfile, actorrt

@actorrt.actor(process=True)
class Leaver:
    def leave(self) -> str:
        return tempfile.mkdtemp(prefix="user-")

async def main():
    async with actorrt.Runtime(num_cpus=1):
        ref = await Leaver.spawn()
        print(await ref.leave(), flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


def test_a_killed_runtimes_worker_temporary_files_are_removed() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        folder = owner.stdout.readline().strip()  # type: ignore[union-attr]
        assert os.path.isdir(folder), folder
    finally:
        owner.kill()
        owner.wait()
    # The worker's watcher outlives the runtime just long enough to remove it.
    assert wait_until(lambda: not os.path.exists(os.path.dirname(folder)), timeout=10), folder
