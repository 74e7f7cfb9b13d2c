"""The fork server: worker processes forked from a single-threaded template interpreter, each
in exactly the environment a fresh interpreter would have had, reaped and reported like any
worker, and gone with their runtime."""

import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import child_processes, eventually, proc_state, wait_until

import actorrt
from actorrt._processes import _forkserver


@actorrt.actor(process=True)
class Probe:
    def facts(self, *names: str) -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "main": sys.modules["__main__"].__spec__.name,  # type: ignore[union-attr]
            "env": {name: os.environ.get(name) for name in names},
            "cwd": os.getcwd(),
        }

    def pid(self) -> int:
        return os.getpid()

    def exit(self, code: int) -> None:
        os._exit(code)

    def nap(self, seconds: float) -> None:
        time.sleep(seconds)

    def torch_threads(self) -> int:
        import torch

        return int(torch.get_num_threads())


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(") ", 1)[1].split()[1])


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


async def fork_server_pid(rt: actorrt.Runtime) -> int:
    forks = (await rt.workers.pool()).forks
    assert forks is not None and forks.pid is not None, "no fork server runs"
    return forks.pid


def gone(pid: int) -> bool:
    # Reparented to init when their parent died: reaped there, or a zombie until it reaps.
    return proc_state(pid) in ("gone", "Z")


@pytest.mark.actorrt(num_cpus=4)
async def test_workers_are_forked_by_a_single_threaded_template(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    refs = [await Probe.options(num_cpus=0.5).spawn() for _ in range(3)]
    server = await fork_server_pid(actorrt_runtime)
    assert parent_of(server) == os.getpid()  # the template is this runtime's child
    for ref in refs:
        facts = await ref.facts()
        assert facts["ppid"] == server  # forked by it
        assert facts["pgid"] == facts["pid"]  # in its own process group
        assert facts["main"] == "actorrt._processes._worker_main"
    # Its children run threads of their own; the template never has one, fork after fork.
    assert threads_of(server) == 1
    more = await Probe.options(num_cpus=0.5).spawn()
    assert (await more.facts())["ppid"] == server
    assert threads_of(server) == 1


async def test_a_preloaded_module_that_starts_a_thread_means_no_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "threaded_at_import.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(_forkserver.PRELOAD_VARIABLE, "threaded_at_import")
    caplog.set_level(logging.WARNING, logger="actorrt")
    async with actorrt.Runtime(num_cpus=2):
        ref = await Probe.spawn()
        assert (await ref.facts())["ppid"] == os.getpid()  # started the plain way
        again = await Probe.options(worker_env={"ACTORRT_TEST_VAR": "x"}).spawn()
        assert (await again.facts())["ppid"] == os.getpid()
    warnings = [r.getMessage() for r in caplog.records if "fork server" in r.getMessage()]
    assert len(warnings) == 1, warnings  # said once, with why
    assert "2 threads" in warnings[0] and "unsafe" in warnings[0], warnings[0]


@pytest.mark.actorrt(num_cpus=4, num_gpus=2)
async def test_each_forked_worker_gets_its_own_environment(
    actorrt_runtime: actorrt.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    names = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS", "ACTORRT_TEST_VAR")
    gpu = await Probe.options(num_cpus=2, num_gpus=1).spawn()
    server = await fork_server_pid(actorrt_runtime)
    facts = await gpu.facts(*names)
    assert facts["ppid"] == server
    assert facts["env"] == {
        "CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "OMP_NUM_THREADS": "2", "ACTORRT_TEST_VAR": None,
    }
    # A variable the driver sets after the template started reaches new workers too.
    monkeypatch.setenv("ACTORRT_TEST_VAR", "late")
    cpu = await Probe.options(num_cpus=1, worker_env={"OMP_NUM_THREADS": "3"}).spawn()
    facts = await cpu.facts(*names)
    assert facts["ppid"] == server
    assert facts["env"] == {
        "CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "OMP_NUM_THREADS": "3", "ACTORRT_TEST_VAR": "late",
    }


async def test_an_environment_the_template_cannot_give_starts_the_plain_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        forked = await Probe.spawn()
        server = await fork_server_pid(rt)
        assert (await forked.facts())["ppid"] == server
        # The interpreter reads PYTHON* variables as it starts: only a fresh one honours them.
        seeded = await Probe.options(worker_env={"PYTHONHASHSEED": "0"}).spawn()
        facts = await seeded.facts("PYTHONHASHSEED")
        assert facts["ppid"] == os.getpid() and facts["env"] == {"PYTHONHASHSEED": "0"}
        # Another sys.path: the template imported from the one it started with.
        monkeypatch.syspath_prepend("/nonexistent-actorrt-test-path")
        moved = await Probe.spawn()
        assert (await moved.facts())["ppid"] == os.getpid()


async def test_with_preloaded_modules_only_the_templates_own_environment_is_forked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(_forkserver.PRELOAD_VARIABLE, "torch")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    async with actorrt.Runtime(num_cpus=4) as rt:
        first = await Probe.options(num_cpus=1).spawn()  # the template takes its environment
        server = await fork_server_pid(rt)
        assert (await first.facts())["ppid"] == server
        assert await first.torch_threads() == 1
        # torch read OMP_NUM_THREADS when the template imported it: 2 threads need a fresh one.
        two = await Probe.options(num_cpus=2).spawn()
        assert (await two.facts())["ppid"] == os.getpid()
        assert await two.torch_threads() == 2


async def test_the_fork_server_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_forkserver.DISABLE_VARIABLE, "0")
    async with actorrt.Runtime(num_cpus=2) as rt:
        ref = await Probe.spawn()
        assert (await ref.facts())["ppid"] == os.getpid()
        assert (await rt.workers.pool()).forks is None


@pytest.mark.parametrize(
    ("value", "says"),
    [("torch;os", "is not a module name"), ("no_such_module_for_actorrt", "no module named")],
)
async def test_a_bad_preload_list_fails_the_spawn_saying_why(
    monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    monkeypatch.setenv(_forkserver.PRELOAD_VARIABLE, value)
    async with actorrt.Runtime(num_cpus=2):
        with pytest.raises(ValueError, match=says) as err:
            await Probe.spawn()
    assert _forkserver.PRELOAD_VARIABLE in str(err.value) and repr(value) in str(err.value)


@pytest.mark.actorrt(num_cpus=2)
async def test_a_forked_workers_exit_code_and_sigkill_are_reported(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    exits = await Probe.spawn()
    server = await fork_server_pid(actorrt_runtime)
    assert (await exits.facts())["ppid"] == server
    with pytest.raises(actorrt.ActorDiedError) as err:
        await exits.exit(7)
    assert err.value.exitcode == 7 and err.value.signal is None
    assert "exit code 7" in str(err.value)

    killed = await Probe.spawn()
    pid = await killed.pid()
    pending = killed.nap(30)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(actorrt.ActorDiedError) as err:
        await pending
    assert err.value.signal == signal.SIGKILL
    assert "SIGKILL" in str(err.value) and "out-of-memory" in str(err.value)
    assert await eventually(lambda: proc_state(pid) == "gone")  # reaped by the template


async def test_the_fork_servers_death_takes_its_workers_with_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="actorrt")
    async with actorrt.Runtime(num_cpus=2) as rt:
        refs = [await Probe.options(num_cpus=0.5).spawn() for _ in range(2)]
        pids = [await r.pid() for r in refs]
        server = await fork_server_pid(rt)
        pending = [r.nap(30) for r in refs]
        os.kill(server, signal.SIGKILL)
        for handle in pending:
            with pytest.raises(actorrt.ActorDiedError) as err:
                await handle
            assert err.value.signal == signal.SIGKILL
        assert await eventually(lambda: all(gone(p) for p in pids), within=10)
        # New workers start the plain way from now on, and the user is told once why.
        after = await Probe.spawn()
        assert (await after.facts())["ppid"] == os.getpid()
    said = [r.getMessage() for r in caplog.records if "fork server" in r.getMessage()]
    assert len(said) == 1 and "start as fresh interpreters" in said[0], said


async def test_nothing_is_left_after_shutdown() -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        refs = [await Probe.options(num_cpus=0.5).spawn() for _ in range(3)]
        pids = [await r.pid() for r in refs]
        await refs[0].stop()  # one idles in the pool
        server = await fork_server_pid(rt)
    # The template is reaped by its runtime, and its workers by the template before it.
    assert proc_state(server) == "gone"
    assert all(proc_state(p) == "gone" for p in pids), [(p, proc_state(p)) for p in pids]


STOPPABLE_DRIVER = """
import asyncio, os, sys
import actorrt

@actorrt.actor(process=True, num_cpus=0.5)
class Idle:
    def pids(self):
        return os.getpid(), os.getppid()

async def main():
    refs = [await Idle.spawn() for _ in range(2)]
    pids = [await r.pids() for r in refs]
    assert len({parent for _, parent in pids}) == 1, pids  # one fork server forked both
    print(pids[0][1], *(pid for pid, _ in pids), flush=True)
    await asyncio.sleep(120)

actorrt.run(main, num_cpus=2)
"""


def test_workers_die_with_their_fork_server_even_when_the_runtime_cannot_act(
    tmp_path: Path,
) -> None:
    """PR_SET_PDEATHSIG in each forked worker: with its runtime stopped (SIGSTOP), killing
    the fork server still takes every worker with it."""
    import subprocess

    script = tmp_path / "driver.py"
    script.write_text(STOPPABLE_DRIVER)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    driver = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=root
    )
    try:
        assert driver.stdout is not None
        server, *workers = map(int, driver.stdout.readline().split())
        assert all(parent_of(w) == server for w in workers)
        os.kill(driver.pid, signal.SIGSTOP)
        os.kill(server, signal.SIGKILL)
        assert wait_until(lambda: all(gone(w) for w in workers), timeout=10), [
            (w, proc_state(w)) for w in workers
        ]
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        os.kill(driver.pid, signal.SIGCONT)
        driver.wait()


async def test_a_runtime_that_ends_while_its_fork_server_starts_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow_at_import.py").write_text("import time\ntime.sleep(30)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(_forkserver.PRELOAD_VARIABLE, "slow_at_import")
    started = time.monotonic()
    async with actorrt.Runtime(num_cpus=2) as rt:
        spawn = asyncio.ensure_future(Probe.spawn())
        pool = await rt.workers.pool()
        assert await eventually(lambda: pool._forks_starting is not None)
        assert await eventually(lambda: bool(child_processes()))  # the template imports
    # The spawn waiting for it is killed after the runtime's stop timeout (10 s); the
    # template is killed at once, not left to finish its 30 s import.
    with pytest.raises(actorrt.ActorDiedError):
        await spawn
    assert time.monotonic() - started < 25
