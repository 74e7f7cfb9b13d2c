"""iproute2 and /proc for the test networks of ``netns.py``: names, commands, processes.

Names encode the creating pid, so that a run that died before cleaning up can be recognised
and its leftovers removed by the next one (``remove_stale``).
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

SUBNETS = ipaddress.IPv4Network("10.231.0.0/16")
LINK = re.compile(r"^art([0-9a-z]{1,5})\.([0-9a-z]{1,3})(\.[0-9a-z]{1,2})?$")
NETNS = re.compile(r"^art([0-9a-z]{1,5})\.([0-9a-z]{1,3})\.h[0-9]{1,3}$")
KILL_WAIT_S = 10.0
LOCK_PATH = os.path.join("/run" if os.path.isdir("/run") else "/tmp", "actorrt-netns.lock")


class NetnsUnavailable(Exception):
    """Network namespaces (or the part of them asked for) cannot be made on this machine."""


@contextmanager
def creation_lock() -> Iterator[None]:
    """Held (across processes) while a network picks its /24 and while leftovers go."""
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if not value:
            return out


def stem(pid: int, k: int) -> str:
    return f"art{base36(pid)}.{base36(k % 36**3)}"


def tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None
    )


def run(argv: list[str], stdin: str | None = None, check: bool = True) -> str:
    """Run an iproute2 command; a failure raises ``NetnsUnavailable`` with what it said."""
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        raise NetnsUnavailable(f"`{' '.join(argv)}` failed ({done.returncode}): {said}")
    return done.stdout


def batch(lines: Iterable[str], netns: str | None = None, force: bool = False) -> None:
    """Many ``ip`` commands in one process: ``ip [-n NETNS] [-force] -batch -``."""
    argv = [ip()] + (["-n", netns] if netns else []) + (["-force"] if force else [])
    run([*argv, "-batch", "-"], "\n".join(lines) + "\n", check=not force)


def ip() -> str:
    path = tool("ip")
    if path is None:
        raise NetnsUnavailable("iproute2's `ip` is not installed (apt-get install iproute2)")
    return path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pids_in(netns: str) -> list[int]:
    """Live processes whose network namespace is ``netns`` (what ``ip netns pids`` lists)."""
    try:
        target = os.stat(f"/run/netns/{netns}")
    except FileNotFoundError:
        return []
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:  # gone, or a zombie (its namespaces are already released)
            continue
        if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            found.append(int(entry.name))
    return found


def kill_all_in(netns: str) -> None:
    """SIGKILL every process in ``netns`` until none is left (they may fork meanwhile)."""
    deadline = time.monotonic() + KILL_WAIT_S
    while pids := pids_in(netns):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} in namespace {netns} outlived SIGKILL")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)  # SIGKILL is delivered asynchronously; there is no event for it


def existing(stem: str | None = None) -> tuple[set[str], set[str]]:
    """``(namespaces, links)`` this module made, all of them or those of network ``stem``."""
    listed = run([ip(), "netns", "list"]).split()  # "NAME (id: 3)" lines
    namespaces = {n for n in listed if NETNS.match(n)}
    links = set()
    for line in run([ip(), "-o", "link", "show"]).splitlines():
        name = line.split(":", 2)[1].strip().split("@")[0]  # "7: NAME@if2: <UP,...> ..."
        if LINK.match(name):
            links.add(name)
    if stem is None:
        return namespaces, links
    return (
        {n for n in namespaces if n.rsplit(".", 1)[0] == stem},
        {n for n in links if n == stem or n.rsplit(".", 1)[0] == stem},
    )


def creator_alive(name: str, pattern: re.Pattern[str]) -> bool:
    match = pattern.match(name)
    assert match is not None
    return alive(int(match.group(1), 36))


def remove_stale() -> None:
    """Remove the namespaces and links of earlier runs whose creating process is dead,
    killing whatever still runs in those namespaces first."""
    namespaces, links = existing()
    namespaces = {n for n in namespaces if not creator_alive(n, NETNS)}
    links = {n for n in links if not creator_alive(n, LINK)}
    for name in namespaces:
        kill_all_in(name)
    if namespaces or links:
        lines = [f"link del {n}" for n in sorted(links, key=len, reverse=True)]  # veths first
        batch(lines + [f"netns del {n}" for n in namespaces], force=True)


def pick_subnet(start: int) -> ipaddress.IPv4Network:
    """A /24 of ``SUBNETS`` that overlaps nothing routed or addressed here yet."""
    taken = []
    text = run([ip(), "-4", "route", "show", "table", "all"])
    text += run([ip(), "-4", "-o", "addr", "show"])
    for word in re.findall(r"\b\d+\.\d+\.\d+\.\d+(?:/\d+)?\b", text):
        taken.append(ipaddress.IPv4Interface(word).network)
    subnets = list(SUBNETS.subnets(new_prefix=24))
    for i in range(len(subnets)):
        candidate = subnets[(start + i) % len(subnets)]
        if not any(candidate.overlaps(t) for t in taken if t.prefixlen > 0):
            return candidate
    raise NetnsUnavailable(f"every /24 of {SUBNETS} is in use on this machine")
