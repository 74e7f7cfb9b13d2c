"""The ``actorrt`` command, run as users run it: the console script in a subprocess, against
runtimes running in other processes and experiment folders written by real Tuner runs."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import actorrt
from actorrt._cli import _main as _cli
from actorrt._cli._experiment import JOURNAL_FILE, read_experiment, summarise_error
from actorrt._control._server import _discovery, fetch_status
from actorrt._wire._auth import AuthenticationError, new_secret
from actorrt._wire._messages import Status
from actorrt._wire._transport import connect_unix
from actorrt.resources import BACKEND_ENV, write_fake_gpu_spec

SCRIPT = os.path.join(os.path.dirname(sys.executable), "actorrt")

# A driver program: two running actors (one inline holding half a GPU, one in a worker
# process), a placement group held by the driver, and a spawn that cannot be granted yet.
# It prints "ready" with the worker's pid once the spawn is queued, and shuts down when its
# stdin has a line.
BUSY_RUNTIME = """
import asyncio, sys, time
import actorrt

@actorrt.actor
class Greeter:
    def hello(self):
        return "hi"

@actorrt.actor(num_cpus=1)
class Worker:
    def pid(self):
        import os
        return os.getpid()

@actorrt.actor(num_cpus=4)
class Hog:
    pass

async def main():
    await Greeter.options(name="greeter", num_gpus=0.5, process=False).spawn()
    worker = await Worker.options(name="w0").spawn()
    pg = actorrt.placement_group([{"CPU": 1}, {"CPU": 1}])
    await pg.ready()
    hog = asyncio.ensure_future(Hog.spawn())
    deadline = time.monotonic() + 30
    while not actorrt.pending_requests():
        assert time.monotonic() < deadline, "the Hog spawn never queued"
        await asyncio.sleep(0.01)
    print("ready", await worker.pid(), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    hog.cancel()

actorrt.run(main, num_cpus=4)
"""

# The sync facade's runtime and the embedded one, each idle until stdin has a line.
INIT_RUNTIME = """
import sys
import actorrt
actorrt.init(num_cpus=2)
print("ready", flush=True)
sys.stdin.readline()
actorrt.shutdown()
"""

EMBEDDED_RUNTIME = """
import asyncio, sys
import actorrt

async def main():
    async with actorrt.Runtime(num_cpus=3):
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

asyncio.run(main())
"""

# Three trials; x=2 reports once and then spawns a helper its trial never declared, bigger
# than the trial's placement group: an InfeasibleResourceError whose message says the fix.
TUNER_RUN = """
import sys
import actorrt
from actorrt import tune

@actorrt.actor
class Helper:
    pass

def train(config):
    for i in range(3):
        tune.report({"loss": config["x"] * 10 - i})
        if config["x"] == 2:
            actorrt.get(Helper.options(num_cpus=2).spawn())

tuner = tune.Tuner(
    train,
    param_space={"x": tune.grid_search([1, 2, 3])},
    run_config=tune.RunConfig(name="exp", storage_path=sys.argv[1], verbose=0),
)
grid = tuner.fit()
print("errors", len(grid.errors), flush=True)
"""


Starter = Callable[[str, str], tuple["subprocess.Popen[str]", str]]


def run_cli(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], env=env, capture_output=True, text=True, timeout=timeout)


def read_line(proc: subprocess.Popen[str], timeout: float = 45.0) -> str:
    """The child's next stdout line, failing (with its stderr) if none comes in time."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"the child printed nothing within {timeout} s; stderr:\n{err}")
    line = proc.stdout.readline()
    if not line:
        _, err = proc.communicate()
        pytest.fail(f"the child exited ({proc.returncode}) before printing; stderr:\n{err}")
    return line


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of runtimes and commands of one test: its own discovery directory,
    so runtimes that other tests on this machine run are not seen."""
    assert os.path.exists(SCRIPT), f"no console script at {SCRIPT}: pip install -e ."
    return {**os.environ, _discovery.DIR_ENV: str(tmp_path / "discovery")}


@pytest.fixture
def start_runtime(tmp_path: Path, env: dict[str, str]) -> Iterator[Starter]:
    """Start a driver program from source; every one is ended at teardown."""
    procs: list[subprocess.Popen[str]] = []

    def start(source: str, name: str) -> tuple[subprocess.Popen[str], str]:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        proc = subprocess.Popen(
            [sys.executable, str(path)], env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        procs.append(proc)
        return proc, read_line(proc)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.communicate("\n", timeout=30)


def stop(proc: subprocess.Popen[str]) -> None:
    _, err = proc.communicate("\n", timeout=30)
    assert proc.returncode == 0, err


def entries(env: dict[str, str]) -> list[str]:
    """What the discovery directory holds: each runtime's entry file and status socket."""
    directory = env[_discovery.DIR_ENV]
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


# -------------------------------------------------------------------------------- status


def test_status_shows_resources_groups_pending_and_actors(
    start_runtime: Starter, env: dict[str, str], tmp_path: Path
) -> None:
    env[BACKEND_ENV] = write_fake_gpu_spec(tmp_path / "gpus.json", 2)  # two fake devices
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc, ready = start_runtime(BUSY_RUNTIME, "busy")
    worker_pid = int(ready.split()[1])

    shown = run_cli("status", env=env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"pid {proc.pid}" in out
    rows = {r[0]: r for r in (line.split() for line in out.splitlines()) if len(r) == 4}
    assert rows["CPU"] == ["CPU", "4", "3", "1"]  # total, used (group 2 + worker 1), available
    assert rows["GPU"] == ["GPU", "2", "0.5", "1.5"]
    assert "GPU devices" in out
    assert rows["0"] == ["0", "1", "0.5", "0.5"] and rows["1"] == ["1", "1", "0", "1"]
    assert "Placement groups: 1 (1 reserved, 0 pending)" in out
    assert "driver program" in out
    assert "Pending requests: 1" in out
    assert "Hog(id=" in out and "asks for {CPU: 4}" in out
    words = " ".join(out.split())  # a reason is wrapped to the terminal's width
    assert "waiting for {CPU: 3} more, held by the driver program, Worker(id=" in words
    greeter = next(line for line in out.splitlines() if line.strip().startswith("greeter"))
    assert greeter.split()[1:4] == ["Greeter", "inline", "running"]
    w0 = next(line for line in out.splitlines() if line.strip().startswith("w0"))
    assert w0.split()[1:5] == ["Worker", "process", str(worker_pid), "running"]
    assert "Actors: 3 (2 running, 1 pending)" in out

    as_json = run_cli("status", "--json", "--pid", str(proc.pid), env=env)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    res = data["resources"]
    assert (res["total"]["CPU"], res["used"]["CPU"], res["available"]["CPU"]) == (4.0, 3.0, 1.0)
    actors = {a["name"]: a for a in data["actors"]}
    assert actors["w0"]["where"] == "process" and actors["w0"]["pid"] == worker_pid
    assert actors["w0"]["resources"] == {"CPU": 1.0}
    assert actors["greeter"]["where"] == "inline" and actors["greeter"]["pid"] == proc.pid
    assert actors["greeter"]["resources"] == {"GPU": 0.5}
    assert [(g["id"], g["free"]) for g in res["gpus"]] == [("0", 0.5), ("1", 1.0)]
    assert data["actor_counts"] == {"running": 2, "pending": 1}
    [group] = data["placement_groups"]
    assert group["state"] == "reserved" and group["bundles"] == [{"CPU": 1.0}, {"CPU": 1.0}]
    [pending] = data["pending"]
    assert pending["bundles"] == [{"CPU": 4.0}] and pending["short_of"] == {"CPU": 3.0}
    assert "waiting for {CPU: 3} more, held by the driver program" in pending["reason"]

    stop(proc)
    assert entries(env) == []  # the entry and the socket go with the runtime
    gone = run_cli("status", env=env)
    assert gone.returncode == 1
    assert "no actorrt runtime is running" in gone.stderr


class MakesDirWhenUnpickled:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.mkdir, (self.path,)


def test_status_socket_is_private_and_answers_only_status(
    start_runtime: Starter, env: dict[str, str], tmp_path: Path
) -> None:
    proc, _ = start_runtime(INIT_RUNTIME, "init")
    marker = tmp_path / "unpickled"
    directory = env[_discovery.DIR_ENV]
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    [name, sock] = entries(env)
    assert name.endswith(".json") and sock.endswith(".sock")
    assert stat.S_IMODE(os.stat(os.path.join(directory, name)).st_mode) == 0o600
    [entry] = _discovery.list_runtimes(directory)
    assert entry.pid == proc.pid
    assert stat.S_IMODE(os.stat(os.path.dirname(entry.socket)).st_mode) == 0o700
    # The secret lives in the entry file only, never in the runtime's environment.
    environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
    assert entry.secret.hex().encode() not in environ

    async def probe() -> None:
        with pytest.raises(AuthenticationError):
            await connect_unix(entry.socket, new_secret())
        conn = await connect_unix(entry.socket, entry.secret)
        try:
            with pytest.raises(ValueError, match="answers only"):
                await conn.request(("call", "some-actor", "method", (), {}))
            # Even an authenticated client cannot make the runtime unpickle anything.
            with pytest.raises(ValueError, match="pickle"):
                await conn.request(("status", MakesDirWhenUnpickled(str(marker))))
            assert not marker.exists()
            status = await conn.request(Status())
            assert status["pid"] == proc.pid and status["resources"]["total"]["CPU"] == 2.0
        finally:
            conn.close()

    asyncio.run(probe())
    stop(proc)


def test_status_with_several_runtimes_asks_for_pid(
    start_runtime: Starter, env: dict[str, str]
) -> None:
    synced, _ = start_runtime(INIT_RUNTIME, "init")
    embedded, _ = start_runtime(EMBEDDED_RUNTIME, "embedded")

    both = run_cli("status", env=env)
    assert both.returncode == 2
    assert "2 actorrt runtimes are running; choose one with --pid" in both.stderr
    assert f"--pid {synced.pid}" in both.stderr and f"--pid {embedded.pid}" in both.stderr

    for proc, cpus in ((synced, 2.0), (embedded, 3.0)):
        one = run_cli("status", "--pid", str(proc.pid), "--json", env=env)
        assert one.returncode == 0, one.stderr
        assert json.loads(one.stdout)["resources"]["total"]["CPU"] == cpus

    missing = run_cli("status", "--pid", "4999999", env=env)
    assert missing.returncode == 1
    assert "no actorrt runtime runs in process 4999999" in missing.stderr
    assert str(synced.pid) in missing.stderr  # the ones that do run are named
    stop(synced)
    stop(embedded)


def test_status_with_no_runtime_and_bad_input(
    tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    none = run_cli("status", env=env)
    assert none.returncode == 1
    assert "no actorrt runtime is running" in none.stderr
    assert env[_discovery.DIR_ENV] in none.stderr

    for bad in ("abc", "-3", "0"):
        with pytest.raises(SystemExit) as exited:
            _cli.main(["status", "--pid", bad])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "process id" in err and bad in err
    for bad in ("-1", "nan", "soon"):
        with pytest.raises(SystemExit):
            _cli.main(["status", "--timeout", bad])
        assert f"got {bad}" in capsys.readouterr().err.replace("'", "")

    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o755)
    refused = run_cli("status", env={**env, _discovery.DIR_ENV: str(loose)})
    assert refused.returncode == 1
    assert str(loose) in refused.stderr and "0700" in refused.stderr


def test_status_ignores_and_removes_the_entry_of_a_killed_runtime(
    start_runtime: Starter, env: dict[str, str]
) -> None:
    proc, _ = start_runtime(INIT_RUNTIME, "init")
    assert len(entries(env)) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(entries(env)) == 2  # a killed runtime cannot remove its entry and socket ...
    after = run_cli("status", env=env)
    assert after.returncode == 1
    assert "no actorrt runtime is running" in after.stderr
    assert entries(env) == []  # ... so whoever lists the directory does


def test_runtimes_register_only_when_discovery_is_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A directory whose path is too long for a socket in it: the socket gets its own.
    directory = tmp_path / ("d" * 90)
    monkeypatch.setenv(_discovery.DIR_ENV, str(directory))

    async def registered() -> list[str]:
        async with actorrt.Runtime(num_cpus=1):
            found = _discovery.list_runtimes()
            for entry in found:
                assert os.path.dirname(entry.socket) != str(directory)
                status = await fetch_status(entry)
                assert status["resources"]["total"]["CPU"] == 1.0
            return [entry.socket for entry in found]

    [socket] = asyncio.run(registered())
    assert _discovery.list_runtimes() == [] and not os.path.exists(os.path.dirname(socket))
    monkeypatch.setenv(_discovery.ENABLE_ENV, "0")
    assert asyncio.run(registered()) == []


# ------------------------------------------------------------------------------- results


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An experiment folder written by a real Tuner run (3 trials, one raising)."""
    root = tmp_path_factory.mktemp("results")
    script = root / "sweep.py"
    script.write_text(textwrap.dedent(TUNER_RUN))
    done = subprocess.run(
        [sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=120,
        env={**os.environ, _discovery.DIR_ENV: str(root / "discovery")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "errors 1" in done.stdout, done.stdout + done.stderr
    return str(root / "exp")


def test_results_summarises_a_tuner_experiment(experiment: str, env: dict[str, str]) -> None:
    shown = run_cli("results", experiment, env=env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "3 trial(s): 1 error, 2 terminated" in out
    [header] = [line for line in out.splitlines() if line.startswith("trial ")]
    assert header.split() == ["trial", "status", "iter", "loss", "x"]  # a column per key
    rows = [line.split() for line in out.splitlines() if line.startswith("train_")]
    by_x = {row[-1]: row[1:4] for row in rows}
    assert by_x == {
        "1": ["terminated", "3", "8"],
        "2": ["error", "1", "20"],
        "3": ["terminated", "3", "28"],
    }
    # The only metric reported is loss, but whether lower is better is not guessed.
    assert "pass --mode min or --mode max" in out
    assert "Errors: 1" in out and "InfeasibleResourceError" in out
    assert "fix: declare the workers as bundles of the trial's PlacementGroupFactory" in out

    best_low = run_cli(
        "results", experiment, "--metric", "loss", "--mode", "min", "--json", env=env
    )
    assert best_low.returncode == 0, best_low.stderr
    data = json.loads(best_low.stdout)
    by_name = {t["name"]: t for t in data["trials"]}
    assert data["best"] is not None and by_name[data["best"]]["config"] == {"x": 1}
    [errored] = [t for t in data["trials"] if t["status"] == "error"]
    assert errored["config"] == {"x": 2} and errored["error"]["type"] == "InfeasibleResourceError"
    assert errored["error"]["config_error"] and "PlacementGroupFactory" in errored["error"]["fix"]

    best_high = run_cli(
        "results", experiment, "--metric", "loss", "--mode", "max", "--json", env=env
    )
    high = json.loads(best_high.stdout)
    assert {t["name"]: t for t in high["trials"]}[high["best"]]["config"] == {"x": 3}


def test_results_bad_paths_and_metrics(
    experiment: str, tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("hello")
    empty = tmp_path / "empty"
    empty.mkdir()
    trial = next(p for p in Path(experiment).iterdir() if (p / "params.json").exists())
    cases = [
        (str(missing), "does not exist"),
        (str(a_file), "is a file, not an experiment folder"),
        (str(empty), "is not an experiment folder"),
        (
            str(trial),
            f"is a trial folder, not an experiment folder; pass the experiment "
            f"folder that holds it: {os.path.abspath(experiment)!r}",
        ),
        (os.path.dirname(experiment), "holds experiments, not trials; pass one of them: exp"),
    ]
    # The console script once; the same main() in this process for the other cases.
    done = run_cli("results", str(missing), env=env)
    assert done.returncode == 2 and f"{str(missing)!r} does not exist" in done.stderr
    for path, message in cases:
        assert _cli.main(["results", path]) == 2, path
        err = capsys.readouterr().err
        assert err.startswith("actorrt results: error: ") and repr(path) in err
        assert message in err, err

    assert _cli.main(["results", experiment, "--metric", "accuracy"]) == 2
    err = capsys.readouterr().err
    assert "'accuracy'" in err and "the trials report: loss" in err
    with pytest.raises(SystemExit) as exited:
        _cli.main(["results", experiment, "--mode", "best"])
    assert exited.value.code == 2 and "'best'" in capsys.readouterr().err


def test_results_infers_each_status_from_the_files(experiment: str, tmp_path: Path) -> None:
    copy = tmp_path / "exp"
    shutil.copytree(experiment, copy)
    journal = copy / JOURNAL_FILE
    lines = journal.read_text().splitlines()
    trials = {json.loads(x)["id"]: json.loads(x)["dir"] for x in lines if '"trial"' in x}
    ends = [json.loads(x) for x in lines if '"event": "end"' in x]
    first_ok = next(e for e in ends if e["status"] == "TERMINATED")
    cut = trials[first_ok["id"]]
    # As if the experiment had been killed before that trial ended.
    journal.write_text("\n".join(x for x in lines if first_ok["id"] not in x or '"end"' not in x))

    def statuses() -> dict[str, str]:
        return {t.name: t.status for t in read_experiment(str(copy)).trials}

    by_name = statuses()
    assert by_name[cut] == "unfinished"
    assert sorted(by_name.values()) == ["error", "terminated", "unfinished"]
    with open(copy / cut / "result.json", "a"):  # a live process writes it: it runs
        assert statuses()[cut] == "running"
        assert read_experiment(str(copy)).running

    journal.unlink()  # an experiment from before journals: the trial files alone
    (copy / "train_late").mkdir()
    (copy / "train_late" / "params.json").write_text('{"x": 4}')
    assert sorted(statuses().values()) == ["error", "terminated", "terminated", "unfinished"]
    with open(copy / cut / "progress.csv", "a"):
        now = statuses()
        assert now[cut] == "running" and now["train_late"] == "pending"
        # Its logs are open from the start, empty until its first report: still pending.
        with open(copy / "train_late" / "result.json", "a"):
            assert statuses()["train_late"] == "pending"


def test_error_summary_reads_the_final_exception_of_a_chain() -> None:
    try:
        try:
            raise KeyError("lr")
        except KeyError as exc:
            raise ValueError("bad config: lr is missing\nsecond line\nthird line") from exc
    except ValueError as exc:
        text = "".join(traceback.format_exception(exc))
    error = summarise_error(text)
    assert error.headline == "ValueError: bad config: lr is missing"
    assert error.more == ["second line", "third line"]
    assert error.kind == "ValueError" and error.fix is None and not error.config_error


# ---------------------------------------------------------------------------- help, demo


def test_help_of_every_command(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    top = run_cli("--help", env=env)
    assert top.returncode == 0
    for command in ("status", "results", "demo"):
        assert command in top.stdout
    status = run_cli("status", "--help", env=env)
    assert status.returncode == 0 and "--pid" in status.stdout and "--json" in status.stdout
    for command, option in (("results", "--metric"), ("status", "--timeout")):
        with pytest.raises(SystemExit) as exited:
            _cli.main([command, "--help"])
        assert exited.value.code == 0 and option in capsys.readouterr().out
    demo = run_cli("demo", "--help", env=env, timeout=120)
    assert demo.returncode == 0, demo.stderr
    assert "actorrt.examples.digits" in demo.stdout
    as_module = subprocess.run(
        [sys.executable, "-m", "actorrt._cli._main", "results", "--help"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert as_module.returncode == 0 and "--mode" in as_module.stdout
    with pytest.raises(SystemExit) as exited:
        _cli.main(["frobnicate"])
    assert exited.value.code == 2 and "frobnicate" in capsys.readouterr().err


def test_demo_dispatches_to_the_demo_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fake_demo_job.py").write_text(
        "seen = []\ndef main(argv=None):\n    seen.append(list(argv))\n    return 3\n"
    )
    (tmp_path / "demo_needing_a_package.py").write_text("import no_such_package_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    monkeypatch.setattr(_cli, "DEMO_MODULE", "fake_demo_job")
    assert _cli.main(["demo", "--trials", "2", "-v"]) == 3
    assert sys.modules["fake_demo_job"].seen == [["--trials", "2", "-v"]]

    monkeypatch.setattr(_cli, "DEMO_MODULE", "actorrt.examples.no_such_demo")
    assert _cli.main(["demo"]) == 1
    err = capsys.readouterr().err
    assert "actorrt.examples.no_such_demo is not part of this installation" in err

    monkeypatch.setattr(_cli, "DEMO_MODULE", "demo_needing_a_package")
    assert _cli.main(["demo"]) == 1
    assert "needs the package 'no_such_package_xyz'" in capsys.readouterr().err
    sys.modules.pop("fake_demo_job", None)


def test_status_times_out_on_a_blocked_runtime(start_runtime: Starter, env: dict[str, str]) -> None:
    # The runtime's loop is stuck in synchronous code: the command says so, within --timeout.
    proc, _ = start_runtime(
        """
        import sys, time
        import actorrt

        async def main():
            print("ready", flush=True)
            sys.stdin.readline()  # blocks the event loop (on purpose)

        actorrt.run(main, num_cpus=1)
        """,
        "blocked",
    )
    started = time.monotonic()
    done = run_cli("status", "--timeout", "0.5", env=env)
    assert done.returncode == 1
    assert "did not answer within 0.5 s" in done.stderr
    assert time.monotonic() - started < 30
    stop(proc)
