"""Shared test setup: the actorrt fixture, a check that no test leaves a process behind, and
the pieces several test folders use (a recording actor, a Ray-style cluster fixture)."""

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The suite tests the checkout it is run from, also where the venv's editable install
# points at another checkout of the project (a git worktree): this folder comes first on
# sys.path, here and in every process the tests start.
ROOT = str(Path(__file__).resolve().parent.parent)
sys.path.insert(0, ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

import actorrt  # noqa: E402
from actorrt import tune  # noqa: E402

pytest_plugins = ["actorrt.testing"]

# actorrt.init() with no address joins a cluster started on this machine, as ray.init()
# does: the suite runs on this machine alone unless a test makes a cluster of its own.
os.environ.pop("ACTORRT_ADDRESS", None)
os.environ["ACTORRT_CLUSTER_DIR"] = f"/tmp/actorrt-tests-{os.getpid()}-no-cluster"


# Files whose tests need the machine to themselves: they start hundreds of processes or
# measure how fast something answers under a load they make. `make test` runs the rest of
# the suite two at a time (pytest-xdist) and then these alone (`-m solo`).
SOLO = (
    "tests/processes/test_spawn_burst.py",
    "tests/deadlock/test_stall_log.py",
    "tests/cluster/test_cluster_burst.py",
    "tests/cluster/test_cluster_load.py",
    "tests/cluster/test_netns.py",
    "tests/resources/test_res_deadlock_scale.py",
    "tests/project/test_benchmarks_cluster_smoke.py",
    "tests/project/test_benchmarks_processes_smoke.py",
    "tests/project/test_benchmarks_smoke.py",
    "tests/project/test_benchmarks_suite_smoke.py",
    "tests/project/test_benchmarks_idioms_smoke.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.path).relative_to(ROOT).as_posix() in SOLO:
            item.add_marker(pytest.mark.solo)


def child_processes(pid: int | None = None) -> list[tuple[int, str]]:
    """(pid, state) of every process whose parent is ``pid`` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command may hold spaces and parentheses: fields start after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append((int(entry.name), fields[0]))
    return found


def rss_mib(pid: int | None = None) -> float:
    """The resident memory of process ``pid`` (default: this one), in MiB."""
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def proc_state(pid: int) -> str:
    """The one-letter state of process ``pid`` in /proc (``R``, ``S``, ``T``, ``Z``, ...), or
    ``"gone"`` once it is reaped (also when it goes while its stat is being read)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def wait_until(condition, timeout: float = 5.0, interval: float = 0.02) -> bool:  # type: ignore[no-untyped-def]
    """Poll ``condition`` until it holds or ``timeout`` passes (for OS state, no event exists)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


async def eventually(condition, within: float = 5.0, interval: float = 0.02) -> bool:  # type: ignore[no-untyped-def]
    """``wait_until`` for async tests: polls without blocking the event loop."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(interval)
    return bool(condition())


async def until_direct(
    runtime: Any, calls: Callable[[], Awaitable[object]], within: float = 30.0
) -> None:
    """Run ``calls`` (asks between worker processes) until one round of them passes nothing
    through the owning runtime (its ``relayed()`` count, what ``actorrt status`` shows)."""
    deadline = time.monotonic() + within
    while True:
        before = runtime.relayed()["calls"]
        await calls()
        if runtime.relayed()["calls"] == before:
            return
        assert time.monotonic() < deadline, "calls kept going through the owning runtime"
        await asyncio.sleep(0.05)


def restore_in_process(
    folder: Path, experiment: Path, module: str, monkeypatch: pytest.MonkeyPatch
) -> tune.ResultGrid:
    """``Tuner.restore(experiment, train).fit()`` in a fresh runtime of this process, with
    ``train`` from the script module ``module`` in ``folder`` (a killed sweep's trainable)."""
    import importlib

    monkeypatch.syspath_prepend(str(folder))
    lib = importlib.import_module(module)
    try:
        actorrt.init(num_cpus=2)
        try:
            return tune.Tuner.restore(str(experiment), lib.train).fit()
        finally:
            actorrt.shutdown()
    finally:
        sys.modules.pop(module, None)


def no_processes_left_by(what: str) -> Iterator[None]:
    """Around a test or a module: no child process it started outlives it."""
    before = {pid for pid, _ in child_processes()}
    yield
    # Processes are reaped asynchronously by the loop that ran them; give that a moment.
    left: list[tuple[int, str]] = []

    def clean() -> bool:
        nonlocal left
        left = [(p, s) for p, s in child_processes() if p not in before]
        return not left

    if not wait_until(clean, timeout=5.0):
        pytest.fail(f"{what} left child processes (pid, state): {left}")


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    yield from no_processes_left_by("the test")


@actorrt.actor
class Recorder:
    """Collects what each rank sends (an inline actor in the test's runtime)."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def record(self, item: Any) -> None:
        self.items.append(item)

    def all(self) -> list[Any]:
        return list(self.items)


@pytest.fixture
def facade() -> Iterator[actorrt.Runtime]:
    """A runtime of 4 CPUs started by ``actorrt.init()``, for synchronous tests."""
    runtime = actorrt.init(num_cpus=4)
    try:
        yield runtime
    finally:
        actorrt.shutdown()


@pytest.fixture
def ray_start_2_cpus() -> Iterator[None]:
    """Ray's test fixture of that name: a local cluster of 2 CPUs for the test."""
    actorrt.init(num_cpus=2)
    try:
        yield
    finally:
        actorrt.shutdown()


def run_config(tmp_path: Any, name: str = "exp", **kwargs: Any) -> tune.RunConfig:
    """A quiet ``tune.RunConfig`` that keeps the experiment under ``tmp_path``."""
    return tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0, **kwargs)
