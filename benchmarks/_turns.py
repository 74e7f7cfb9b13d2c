"""Running one benchmark turn in a subprocess: a hard time bound, and no process left behind.

A turn runs in a session of its own (``start_new_session``), so at its bound the whole
process group is killed and the suite goes on. Ray starts some processes in sessions of
their own (its workers), which a process-group kill does not reach; so every Ray turn runs
with a marker in its environment (``ACTORRT_BENCH_RAY_TURN=<token>``), which every process
Ray starts inherits, and :func:`sweep_marked` finds them by scanning ``/proc/*/environ`` (no
``ps``, no psutil), waits for them to exit and kills what is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

MARKER = "ACTORRT_BENCH_RAY_TURN"


@dataclass
class Turn:
    """How one subprocess ended."""

    cmd: list[str]
    rc: int | None
    seconds: float
    timed_out: bool
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    def tail(self, lines: int = 25) -> str:
        text = (self.stdout.rstrip() + "\n" + self.stderr.rstrip()).strip()
        return "\n".join(text.splitlines()[-lines:])


def run_bounded(cmd: list[str], *, timeout: float, env: dict[str, str] | None = None,
                cwd: str | Path | None = None) -> Turn:
    """Run ``cmd`` in a new session; at ``timeout`` seconds kill its process group."""
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
    except OSError as exc:  # a missing interpreter is a failed turn, not a crashed suite
        return Turn(cmd, None, time.perf_counter() - start, False, "",
                    f"{type(exc).__name__}: {exc}")
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc.pid)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a grandchild keeps the pipes open
            proc.kill()
            out, err = proc.communicate()
    else:
        kill_group(proc.pid)  # whatever the turn left in its group (it should be nothing)
    return Turn(cmd, proc.returncode, time.perf_counter() - start, timed_out, out, err)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return "?"


def marked_pids(token: str | None = None, var: str = MARKER) -> dict[int, str]:
    """Live processes whose environment has ``var`` (``=token`` when given): pid -> command."""
    prefix = f"{var}=".encode()
    wanted = None if token is None else prefix + token.encode()
    found: dict[int, str] = {}
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()  # empty for a zombie: it holds nothing any more
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item == wanted or (wanted is None and item.startswith(prefix)):
                found[int(name)] = _cmdline(int(name))
                break
    return found


def sweep_marked(token: str | None, grace: float = 20.0, var: str = MARKER) -> dict[str, str]:
    """Wait up to ``grace`` seconds for marked processes to exit, then SIGKILL the rest.

    Returns what had to be killed (pid -> command), empty when everything exited by itself.
    Raises ``RuntimeError`` if a marked process is still alive 10 seconds after its kill.
    """
    deadline = time.monotonic() + grace
    left = marked_pids(token, var)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_pids(token, var)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 10
    while marked_pids(token, var):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of a Ray turn survived SIGKILL: {marked_pids(token)}")
        time.sleep(0.2)
    return {str(pid): cmd for pid, cmd in left.items()}
