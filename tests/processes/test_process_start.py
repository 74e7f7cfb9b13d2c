"""Starting worker processes: bursts, start failures, file-descriptor limits, what they import."""

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

import actorrt
from actorrt._wire import _transport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@actorrt.actor(process=True, num_cpus=0.01)
class Probe:
    def pid(self) -> int:
        return os.getpid()

    def actorrt_file(self) -> str:
        return actorrt.__file__ or ""


async def test_a_burst_of_starts_all_connect_even_with_a_tiny_backlog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A backlog of 1 makes most of the burst's connects fail with EAGAIN: each must retry.
    monkeypatch.setattr(_transport, "LISTEN_BACKLOG", 1)
    async with actorrt.Runtime(num_cpus=4):
        refs = await asyncio.gather(*(Probe.spawn() for _ in range(30)))
        pids = await asyncio.gather(*(r.pid() for r in refs))
        assert len(set(pids)) == 30


async def test_a_worker_that_cannot_connect_is_a_start_failure_not_a_kill() -> None:
    async with actorrt.Runtime(num_cpus=4) as rt:
        await Probe.spawn()  # the socket is open
        os.unlink((await rt.workers.pool()).socket_path)  # now nothing listens there
        with pytest.raises(ConnectionError) as err:
            await Probe.spawn()
    text = str(err.value)
    assert "failed to start" in text and "exit code 3" in text, text
    assert "could not connect to its runtime" in text and "FileNotFoundError" in text, text
    assert "SIGKILL" not in text and "out-of-memory" not in text, text


LOW_FD_DRIVER = textwrap.dedent(
    """
    import asyncio, os, resource
    import actorrt

    @actorrt.actor(process=True, num_cpus=0.01)
    class W:
        def pid(self):
            return os.getpid()

    async def main():
        results = await asyncio.gather(*(W.spawn() for _ in range(SPAWNS)), return_exceptions=True)
        errors = {str(r) for r in results if isinstance(r, BaseException)}
        print(sum(not isinstance(r, BaseException) for r in results))
        for text in errors:
            print(text)

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, hard))
    actorrt.run(main, num_cpus=4)
    """
)


# A few spawns, and a burst of them in flight at once (all checked before any has opened
# its descriptors): each that does not fit fails naming the limit, none at its connection.
@pytest.mark.parametrize(("spawns", "limit"), [(40, 80), (1000, 1024)])
def test_under_a_low_fd_limit_the_error_says_so(
    tmp_path: object, spawns: int, limit: int
) -> None:
    script = os.path.join(str(tmp_path), "driver.py")
    with open(script, "w") as f:
        f.write(f"SPAWNS, LIMIT = {spawns}, {limit}\n" + LOW_FD_DRIVER)
    out = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=50, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    started, *errors = out.stdout.splitlines()
    assert 0 < int(started) < spawns
    assert errors, out.stdout
    for text in errors:
        assert "too many open files" in text and f"RLIMIT_NOFILE is {limit}" in text, text
        assert "ulimit -n" in text, text


DECOY = 'raise SystemExit("the decoy actorrt package in the working directory was imported")\n'


def test_workers_import_their_owners_actorrt_not_one_in_the_working_directory(
    tmp_path: object,
) -> None:
    cwd = os.path.join(str(tmp_path), "project")
    os.makedirs(os.path.join(cwd, "actorrt"))
    with open(os.path.join(cwd, "actorrt", "__init__.py"), "w") as f:
        f.write(DECOY)
    with open(os.path.join(cwd, "actorrt", "_worker.py"), "w") as f:
        f.write(DECOY)
    driver = textwrap.dedent(
        """
        import os, sys
        sys.path.insert(0, sys.argv[1])  # the real package, ahead of the working directory
        import actorrt

        @actorrt.actor(process=True, num_cpus=0.01)
        class Probe:
            def where(self):
                return actorrt.__file__, os.getcwd()

        async def main():
            ref = await Probe.spawn()
            print(actorrt.__file__)
            print(*(await ref.where()), sep="\\n")

        actorrt.run(main, num_cpus=2)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", driver, ROOT],
        capture_output=True, text=True, timeout=50, cwd=cwd, env=env,
    )
    assert out.returncode == 0, out.stderr
    owner_file, worker_file, worker_cwd = out.stdout.splitlines()
    assert owner_file == worker_file == os.path.join(ROOT, "actorrt", "__init__.py")
    assert os.path.realpath(worker_cwd) == os.path.realpath(cwd)  # it still runs there


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
def test_a_worker_output_pipe_is_closed_once_and_only_by_its_owner(loop_kind: str) -> None:
    # uvloop's pipe transport closes the descriptor itself and then the file object it was
    # given: if that object owned the descriptor too, the second close() would close
    # whatever another thread opened under the same number meanwhile (a Tune storage
    # thread's file). Under either loop the descriptor must end closed, by one owner.
    import uvloop

    from actorrt._processes._worker_process import _pipe_reader

    async def run() -> None:
        r, w = os.pipe()
        reader = await _pipe_reader(r)
        transport = reader._transport  # type: ignore[attr-defined]
        pipe = transport.get_extra_info("pipe")
        assert pipe.closefd == (loop_kind == "asyncio")
        os.write(w, b"line\n")
        os.close(w)
        assert await reader.read() == b"line\n"
        transport.close()
        await asyncio.sleep(0.05)
        with pytest.raises(OSError):
            os.fstat(r)  # closed: not leaked

    if loop_kind == "uvloop":
        uvloop.run(run())
    else:
        asyncio.run(run())
