"""The processes a worker's actor started, seen from the worker: finding and ending them.

A worker process is a child subreaper (``PR_SET_CHILD_SUBREAPER`` on Linux): a process its
actor started that double-forks, or whose parent exits, is re-parented to the worker rather
than to init, so it stays a descendant of the worker even when it has left the worker's
process group and session (``setsid``). When the hosted actor ends, the worker kills every
descendant and every member of its process group, except the processes of its own that it
names (its owner watcher), and reaps those that are its children, so none is left as a
zombie. A descendant forked while this runs is found by the next scan of ``/proc``.

Finding them walks down from the worker through ``/proc/<pid>/task/<tid>/children``, a few
reads when the actor started nothing, instead of reading every process's ``stat`` (about
9 µs each: 1 ms on a quiet machine, tens of ms on a busy node, at every actor's end). That
walk finds every member of the worker's process group too, because the worker leads its
own session: a process can only join a group of its own session, the session's processes
all descend from its leader, and the orphans among them are re-parented to the worker.
The whole table is still read where the kernel has no ``children`` files, where the worker
does not lead its session or is not the reaper of its orphans, and once more before a walk
that found descendants ends empty (a child being re-parented while its parent's file is
read may be missed by one walk).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Collection
from typing import Any

__all__ = ["become_subreaper", "end_descendants"]

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; whether it could."""
    if sys.platform != "linux":
        return False
    import ctypes

    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _processes() -> dict[int, tuple[int, int, str]]:
    """Every process in ``/proc``: pid to (parent pid, process group, state letter)."""
    found: dict[int, tuple[int, int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            found[int(entry)] = stat
    return found


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, process group, state letter) of ``pid``; ``None`` once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command may hold spaces and parentheses: the fields start after the last ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[2]), fields[0].decode()


@functools.cache
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _is_subreaper() -> bool:
    """Whether this process reaps its orphaned descendants (the setting is per process and
    not inherited through ``fork``, so it is asked of the kernel)."""
    if sys.platform != "linux":
        return False
    import ctypes

    flag = ctypes.c_int(0)
    try:
        libc = _libc()
        if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return flag.value != 0


def _children(pid: int) -> list[int] | None:
    """The children of ``pid`` (of each of its threads), ``[]`` once it is gone; ``None``
    where they cannot be read whole: no ``children`` files in this kernel, one that cannot
    be read, or a thread that ended while they were read (its children then move to
    another thread, whose file may have been read already)."""
    task = f"/proc/{pid}/task"
    try:
        threads = os.listdir(task)
    except OSError:
        return []
    found: list[int] = []
    for thread in threads:
        try:
            with open(f"{task}/{thread}/children", "rb") as f:
                found.extend(int(child) for child in f.read().split())
        except OSError:
            if not os.path.exists(task):
                return []  # the process itself is gone
            return None
    return found


def _walked(spare: Collection[int]) -> dict[int, tuple[int, str]] | None:
    """``_descendants`` by walking down from this process; ``None`` where that cannot be
    relied on (see the module docstring)."""
    me = os.getpid()
    if os.getsid(0) != me or not _is_subreaper():
        return None
    found: dict[int, tuple[int, str]] = {}
    todo = [me]
    while todo:
        children = _children(todo.pop())
        if children is None:
            return None
        for child in children:
            if child in spare or child in found or (stat := _stat(child)) is None:
                continue
            found[child] = (stat[0], stat[2])
            todo.append(child)
    return found


def _descendants(spare: Collection[int], whole_table: bool = False) -> dict[int, tuple[int, str]]:
    """This process's descendants and, when it leads its process group, the group's
    members (pid to (parent, state)), outside ``spare`` and the subtrees below them."""
    if not whole_table:
        walked = _walked(spare)
        if walked is not None:
            return walked
    me, group = os.getpid(), os.getpgid(0)
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _pgrp, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, tuple[int, str]] = {}
    todo = [me]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in spare and child not in found:
                found[child] = (table[child][0], table[child][2])
                todo.append(child)
    if group != me:  # the group is not this process's own (a worker leads its group)
        return found
    for pid, (ppid, pgrp, state) in table.items():
        if pgrp == group and pid != me and pid not in spare and pid not in found:
            found[pid] = (ppid, state)
    return found


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def end_descendants(spare: Collection[int] = (), within: float = 5.0) -> list[int]:
    """SIGKILL every descendant and process-group member outside ``spare`` and reap those
    that are this process's children; waits up to ``within`` seconds for all to be gone.

    Returns the pids still there at the deadline (a process stuck in the kernel, or a
    zombie whose parent is not this process and does not reap it), an empty list when all
    went.
    """
    me = os.getpid()
    deadline = time.monotonic() + within
    found_some = False
    while True:
        left = _descendants(spare)
        if not left and found_some:
            left = _descendants(spare, whole_table=True)  # see the module docstring
        if not left:
            return []
        found_some = True
        for pid, (ppid, state) in left.items():
            if state == "Z":
                if ppid == me:
                    _reap(pid)
            else:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            return sorted(_descendants(spare))
        time.sleep(0.002)  # polling the kernel's process table: no event tells of an exit
