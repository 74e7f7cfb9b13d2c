"""Faults: killed workers, killed runtimes, and processes that must not outlive them."""

import asyncio
import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import child_processes, eventually, proc_state, wait_until

import actorrt


def state(pid: int) -> str:
    return proc_state(pid)


def alive(pid: int) -> bool:
    return proc_state(pid) not in ("Z", "gone")


@actorrt.actor(process=True, max_restarts=1)
class Victim:
    def pid(self) -> int:
        return os.getpid()

    def slow(self, seconds: float) -> str:
        time.sleep(seconds)
        return "done"

    def start_child(self) -> int:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        self.child = child
        return child.pid


async def test_sigkill_fails_every_pending_ask_and_restarts(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Victim.spawn()
    pid = await ref.pid()
    pending = [ref.slow(5) for _ in range(5)]
    await asyncio.sleep(0)
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    for handle in pending:
        with pytest.raises(actorrt.ActorDiedError) as err:
            await handle
        assert err.value.signal == signal.SIGKILL
        assert "SIGKILL" in str(err.value) and "out-of-memory" in str(err.value)
    assert time.monotonic() - started < 1.0
    new_pid = await ref.pid()  # restarted (max_restarts=1) in a new process
    assert new_pid != pid
    assert not alive(pid)
    os.kill(new_pid, signal.SIGKILL)
    died = await ref.wait_stopped()
    assert died.reason == "process died"
    with pytest.raises(actorrt.ActorDiedError):
        await ref.pid()  # later asks fail too
    assert await eventually(lambda: all(p != new_pid for p, _ in child_processes()))


async def test_a_workers_children_go_with_it(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Victim.options(max_restarts=0).spawn()
    pid, child = await ref.pid(), await ref.start_child()
    assert alive(child)
    os.kill(pid, signal.SIGKILL)
    await ref.wait_stopped()
    assert await eventually(lambda: not alive(child), within=5)


async def test_no_worker_survives_the_runtime() -> None:
    async with actorrt.Runtime():
        refs = [await Victim.spawn() for _ in range(3)]
        pids = [await r.pid() for r in refs]
        child = await refs[0].start_child()
    assert not any(alive(p) for p in pids)
    assert await eventually(lambda: not alive(child), within=5)


DRIVER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    import actorrt

    @actorrt.actor(process=True)
    class Holder:
        def start(self):
            self.child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            return os.getpid(), self.child.pid

        def hog(self):
            print("holding the GIL", flush=True)
            sum(range(10**14))  # one C call that never lets the GIL go

    async def main():
        ref = await Holder.spawn()
        worker, child = await ref.start()
        print(worker, child, flush=True)
        if sys.argv[2] == "gil":
            ref.hog.tell()
        await asyncio.sleep(120)

    if sys.argv[1] == "async":
        import asyncio
        actorrt.run(main)
    else:
        actorrt.init()
        ref = actorrt.get(Holder.spawn())
        worker, child = actorrt.get(ref.start())
        print(worker, child, flush=True)
        if sys.argv[2] == "gil":
            ref.hog.tell()
        time.sleep(120)
    """
)


@pytest.mark.parametrize("worker_state", ["idle", "gil", "stopped"])
@pytest.mark.parametrize("mode", ["async", "sync facade"])
def test_killing_the_runtime_process_ends_its_workers(
    tmp_path: object, mode: str, worker_state: str
) -> None:
    """However its worker is stuck (holding the GIL in C, or SIGSTOPped), it and its
    child die with the runtime's process, also when the runtime runs on a thread."""
    script = os.path.join(str(tmp_path), "driver.py")
    with open(script, "w") as f:
        f.write(DRIVER)
    tmp = os.path.join(str(tmp_path), "t")  # where the runtime makes its socket's folder
    os.mkdir(tmp)
    driver = subprocess.Popen(
        [sys.executable, script, mode.split()[0], worker_state],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        env={**os.environ, "TMPDIR": tmp},
    )
    try:
        assert driver.stdout is not None
        worker, child = map(int, driver.stdout.readline().split())
        assert alive(worker) and alive(child)
        if worker_state == "gil":
            assert "holding the GIL" in driver.stdout.readline()
        elif worker_state == "stopped":
            os.kill(worker, signal.SIGSTOP)
            assert wait_until(lambda: state(worker) == "T")
        driver.kill()
        driver.wait()
        gone = wait_until(lambda: not alive(worker) and not alive(child), timeout=10)
        assert gone, f"still alive after 10 s: worker {alive(worker)}, its child {alive(child)}"
        # The killed runtime could not remove its socket: its workers did, on the way out.
        sockets = glob.glob(os.path.join(tmp, "actorrt-*", "rt.sock"))
        assert sockets == [], f"the dead runtime's socket was left behind: {sockets}"
    finally:
        driver.kill()
        driver.wait()
