"""Finding the runtimes that run on this machine: one entry file per runtime.

Every runtime of a user program (``async with actorrt.Runtime()``, ``actorrt.run``,
``actorrt.init``; not the runtimes inside worker processes) writes an entry file while it
runs, so that ``actorrt status`` in another shell can find it and connect to it. The entry
lives in a per-user directory:

1. ``$ACTORRT_DISCOVERY_DIR`` when set (tests use their own);
2. else ``$XDG_RUNTIME_DIR/actorrt`` when ``XDG_RUNTIME_DIR`` is a directory of this user;
3. else ``<tempdir>/actorrt-<uid>``.

The directory must be a real directory (not a link), owned by this user, with mode 0700: one
that is not is refused (a warning at the runtime, an error at the CLI), so another user can
neither read the entries nor plant one. The runtime's status socket, ``<pid>-<runtime
id>.sock``, lives there too (in a private directory of its own when that path would be too
long for a Unix socket). An entry, ``<pid>-<runtime id>.json``, is written
to a temporary name with mode 0600 and renamed into place, so a reader never sees half of
one. It holds the runtime's pid, the start time of that process (to tell a reused pid from
the runtime's own), the path of its status socket, the secret of that socket's handshake,
when it started and its command line. The secret is the status socket's own, not the
secret the runtime gives its worker processes: the status socket answers only ``status``,
so reading an entry lets a process of the same user see the runtime, never run code in it.

The runtime removes its entry when it shuts down. A runtime killed with SIGKILL cannot: its
entry is *stale* once its process is gone (or the pid belongs to a newer process, or its
socket has gone), and
whoever lists the directory (the CLI, or the next runtime that registers) removes it, along
with its socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
import time
from dataclasses import dataclass

from .._owned import check_owned_dir, ensure_owned_dir
from .._wire import _auth

__all__ = [
    "DIR_ENV",
    "ENABLE_ENV",
    "RuntimeEntry",
    "discovery_dir",
    "ensure_private_dir",
    "forget",
    "list_runtimes",
    "prepare",
    "process_start_time",
    "register",
    "registration_enabled",
    "socket_path",
    "unregister",
]

DIR_ENV = "ACTORRT_DISCOVERY_DIR"
ENABLE_ENV = "ACTORRT_DISCOVERY"  # "0", "off", "false" or "no": runtimes do not register
_SUFFIX = ".json"
_FORMAT = 1
_MAX_SOCKET_PATH = 103  # sockaddr_un.sun_path: 108 bytes on Linux, 104 on macOS, NUL included


@dataclass(frozen=True)
class RuntimeEntry:
    """One registered runtime, as read from its entry file."""

    path: str
    pid: int
    runtime_id: str
    socket: str
    secret: bytes
    started_at: float
    proc_start: int | None
    argv: tuple[str, ...]

    def command(self, width: int = 60) -> str:
        """The runtime's command line, shortened to ``width`` characters."""
        text = " ".join(self.argv) or "?"
        return text if len(text) <= width else text[: width - 3] + "..."


def registration_enabled() -> bool:
    """Whether runtimes register themselves (``ACTORRT_DISCOVERY=0`` turns it off)."""
    return os.environ.get(ENABLE_ENV, "1").strip().lower() not in {"0", "off", "false", "no"}


def discovery_dir() -> str:
    """The directory where this user's runtimes register (see the module docstring)."""
    chosen = os.environ.get(DIR_ENV)
    if chosen:
        return os.path.abspath(os.path.expanduser(chosen))
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        try:
            st = os.stat(xdg)
        except OSError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            return os.path.join(xdg, "actorrt")
    return os.path.join(tempfile.gettempdir(), f"actorrt-{os.getuid()}")


_ADVICE = f"remove it, or set {DIR_ENV} to a directory of your own"


def ensure_private_dir(path: str) -> str:
    """Create ``path`` with mode 0700 if needed and check that only this user can use it.

    Raises:
        PermissionError: it is a link or a file, another user's, or open to other users
            and not this user's to tighten.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(path, 0o700)  # ours, made under a loose umask: tighten it
    return ensure_owned_dir(path, "the runtime discovery directory", _ADVICE, private=True)


def _proc_stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command may hold spaces and parentheses: the fields start after the last ')'.
    return data[data.rindex(b")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``None`` if unknown)."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def _alive(pid: int, proc_start: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process now has the pid: ours has gone
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc: the signal check is all there is
    if fields[0] in (b"Z", b"X"):
        return False  # exited, not yet reaped by its parent
    return proc_start is None or process_start_time(pid) == proc_start


def prepare() -> str:
    """Make (or check) the discovery directory and clear stale entries; return its path.

    Raises:
        OSError: the directory cannot be made (``PermissionError`` when it is not private to
            this user).
    """
    directory = ensure_private_dir(discovery_dir())
    _clean_stale(directory)
    return directory


def socket_path(directory: str, runtime_id: str) -> str | None:
    """Where a runtime's status socket goes in the discovery directory; ``None`` when that
    path is too long for a Unix socket (the caller then makes a private directory)."""
    path = os.path.join(directory, f"{os.getpid()}-{runtime_id}.sock")
    return path if len(os.fsencode(path)) <= _MAX_SOCKET_PATH else None


def register(directory: str, runtime_id: str, socket_path: str, secret: bytes) -> str:
    """Write this process's entry for a runtime into ``directory`` (from :func:`prepare`);
    return the entry's path.

    Raises:
        OSError: the entry cannot be written.
    """
    pid = os.getpid()
    entry = {
        "format": _FORMAT,
        "pid": pid,
        "runtime_id": runtime_id,
        "socket": socket_path,
        "secret": _auth.secret_to_text(secret),
        "started_at": time.time(),
        "proc_start": process_start_time(pid),
        "argv": [sys.executable, *sys.argv],
    }
    final = os.path.join(directory, f"{pid}-{runtime_id}{_SUFFIX}")
    tmp = os.path.join(directory, f".{pid}-{runtime_id}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(entry, f)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return final


def forget(entry: RuntimeEntry) -> None:
    """Remove the entry of a runtime found gone (its socket refuses connections)."""
    _remove_stale(entry)


def unregister(path: str) -> None:
    """Remove an entry (missing is fine)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def list_runtimes(directory: str | None = None) -> list[RuntimeEntry]:
    """The live runtimes registered in ``directory`` (default: :func:`discovery_dir`), oldest
    first. Stale entries are removed; unreadable ones are skipped.

    Raises:
        PermissionError: the directory exists but is not private to this user.
    """
    directory = directory or discovery_dir()
    try:
        check_owned_dir(directory, "the runtime discovery directory", _ADVICE, private=True)
    except FileNotFoundError:
        return []
    return _clean_stale(directory)


def _clean_stale(directory: str) -> list[RuntimeEntry]:
    live: list[RuntimeEntry] = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.startswith(".") and name.endswith(".tmp"):
            _remove_stale_tmp(path, name)
            continue
        if not name.endswith(_SUFFIX):
            continue
        entry = _read(path)
        if entry is None:
            continue
        if _alive(entry.pid, entry.proc_start) and os.path.exists(entry.socket):
            live.append(entry)
        else:
            _remove_stale(entry)
    live.sort(key=lambda e: (e.started_at, e.pid))
    return live


def _read(path: str) -> RuntimeEntry | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None  # removed meanwhile, or a link
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
            return None  # not written by a runtime of this user
        try:
            data = json.loads(f.read())
            return RuntimeEntry(
                path=path,
                pid=int(data["pid"]),
                runtime_id=str(data["runtime_id"]),
                socket=str(data["socket"]),
                secret=_auth.secret_from_text(str(data["secret"])),
                started_at=float(data["started_at"]),
                proc_start=None if data.get("proc_start") is None else int(data["proc_start"]),
                argv=tuple(str(a) for a in data.get("argv", ())),
            )
        except (ValueError, KeyError, TypeError):
            return None


def _remove_stale(entry: RuntimeEntry) -> None:
    unregister(entry.path)
    # The dead runtime's socket (and the private directory it had one in), if still ours.
    socket_dir = os.path.dirname(entry.socket)
    try:
        st = os.lstat(entry.socket)
        if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid():
            os.unlink(entry.socket)
        own_dir = socket_dir != os.path.dirname(entry.path)
        if own_dir and os.path.basename(socket_dir).startswith("actorrt-"):
            os.rmdir(socket_dir)  # only if empty
    except OSError:
        pass


def _remove_stale_tmp(path: str, name: str) -> None:
    try:
        pid = int(name[1:].split("-", 1)[0])
    except ValueError:
        return
    if not _alive(pid, None):
        with contextlib.suppress(OSError):
            os.unlink(path)
