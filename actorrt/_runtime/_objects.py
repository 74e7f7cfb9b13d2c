"""Shared objects: ``actorrt.put(value)`` stores a value once on this machine, in shared memory.

The value is pickled (protocol 5) into one POSIX shared-memory segment (``/dev/shm``): the
pickle stream, then each out-of-band buffer (a numpy array's data, an Arrow buffer, any
``pickle.PickleBuffer``) aligned to 64 bytes. The ``ObjectRef`` that ``put`` returns travels
in messages as the segment's name only, so passing it to many actors and tasks sends the
value to none of them; a process that reads it maps the segment and unpickles with its
buffers pointing into the mapping (read-only), so large arrays are not copied per reader.

Lifetime: the object lives while a ref to it lives in any process of the machine. Each
process that holds a ref holds a name of the segment's file of its own (a hard link: the
owner's is the name ``put`` made, a borrower's a pin made when the ref first arrives there)
and removes it when its last ref is collected, or when it exits; the memory goes with the
last name. A ref pickled to travel carries a ticket, one more name made by the sender, which
the receiver turns into its pin (or drops, holding one already), so an object whose sender
drops its ref while the message is on its way is still there when it arrives. A ticket that
no one receives lasts until its sender exits. A reader's mapping stays valid for as long as
the values it read are alive. A process that died without removing its names (SIGKILL)
leaves them behind only until another process's first ``put`` on the machine, which removes
every name whose process is gone.
"""

from __future__ import annotations

import atexit
import itertools
import mmap
import os
import pickle
import socket
import stat
import struct
import threading
import weakref
from collections.abc import Generator
from typing import Any, Generic, TypeVar

import cloudpickle

__all__ = ["ObjectRef", "put"]

T = TypeVar("T")

SHM_DIR = "/dev/shm"
PREFIX = "actorrt-obj"
ALIGN = 64
# Header: magic, payload length, number of buffers; then each buffer's offset and length.
_HEADER = struct.Struct("<8sQQ")
_ENTRY = struct.Struct("<QQ")
_MAGIC = b"ACTOBJ01"

_counter = itertools.count(1)
_lock = threading.Lock()
_swept = False


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), ``None`` if it is gone:
    with the pid it names one process, even once the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[19].decode()


def _process_id() -> str:
    """This process, as the names it makes say: its pid and start time."""
    return f"{os.getpid()}-{_start_time(os.getpid())}"


_OWNER = _process_id()


class ObjectRef(Generic[T]):
    """A value stored once on this machine by ``actorrt.put``.

    Pass it in messages (to actors, to tasks) instead of the value; read the value with
    ``actorrt.get(ref)`` or ``await ref`` (at once: nothing is asked of anyone). Arrays come
    back read-only, backed by the shared segment. The object lives while a ref to it lives
    in any process of this machine. Refs compare equal when they name the same object.
    """

    __slots__ = ("__weakref__", "_held", "_host", "_name", "_size")

    def __init__(self, name: str, size: int, host: str) -> None:
        self._name = name
        self._size = size
        self._host = host
        self._held = name  # the segment's name this process holds (a borrower's: its pin)

    @property
    def object_id(self) -> str:
        """The object's name (its shared-memory segment)."""
        return self._name

    @property
    def size(self) -> int:
        """Bytes the object takes in shared memory."""
        return self._size

    def value(self) -> T:
        """Read the value (what ``actorrt.get(ref)`` does)."""
        if self._host != _HOST:
            raise RuntimeError(
                f"{self!r} was put on {self._host}, and this is {_HOST}: actorrt.put "
                "objects are read on the machine that stored them only, not fetched across "
                "the nodes of a cluster; send the value itself to an actor or task on another "
                "node, or place the reader on that machine"
            )
        path = os.path.join(SHM_DIR, self._held)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise LookupError(
                f"{self!r} was freed: no process held a ref to it when this one arrived "
                "(a ref kept in a file, or sent before its sender dropped it and died)"
            ) from None
        try:
            # /dev/shm is shared by every user: a segment freed here may be created again
            # by another one, with a pickle of theirs. Only one of ours is read.
            st = os.fstat(fd)
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise PermissionError(
                    f"{path} is not this user's own actorrt object (owner uid {st.st_uid}, "
                    f"mode {stat.S_IMODE(st.st_mode):o}): refusing to unpickle it"
                )
            mapping = mmap.mmap(fd, self._size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        view = memoryview(mapping)
        magic, payload_len, count = _HEADER.unpack_from(view, 0)
        if magic != _MAGIC:
            raise ValueError(f"{path} is not an actorrt object")
        offset = _HEADER.size
        buffers = []
        for _ in range(count):
            start, length = _ENTRY.unpack_from(view, offset)
            offset += _ENTRY.size
            buffers.append(view[start : start + length])
        payload = view[offset : offset + payload_len]
        value: T = pickle.loads(payload, buffers=buffers)
        return value

    def __await__(self) -> Generator[Any, None, T]:
        return self.value()
        yield  # pragma: no cover - makes this a generator: ``await ref`` returns at once

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ref_of, (self._name, self._size, self._host, _ticket(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectRef) and other._name == self._name

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f"<actorrt.ObjectRef {self._name} {self._size} bytes>"


_HOST = socket.gethostname()
# The refs alive in this process (put here, or pinned here), by object: a copy that arrives
# while one lives is that one, so this process holds one name per object.
_live: weakref.WeakValueDictionary[str, ObjectRef[Any]] = weakref.WeakValueDictionary()


def _ticket(ref: ObjectRef[Any]) -> str | None:
    """A new name of ``ref``'s segment for a pickled copy to take (``None`` if the segment
    is gone, or the ref is of another machine)."""
    if ref._host != _HOST:
        return None
    name = _new_name()
    try:
        os.link(os.path.join(SHM_DIR, ref._held), os.path.join(SHM_DIR, name))
    except OSError:  # freed already (reading says so), or /dev/shm refuses links
        return None
    return name


def _ref_of(name: str, size: int, host: str, ticket: str | None = None) -> ObjectRef[Any]:
    """A ref unpickled here: the one alive here already, or one pinned by its ticket."""
    if host != _HOST:
        return ObjectRef(name, size, host)
    live = _live.get(name)
    if live is not None:
        if ticket is not None:
            _remove(os.path.join(SHM_DIR, ticket))
        return live
    ref: ObjectRef[Any] = ObjectRef(name, size, host)
    pin = _new_name()
    if not _pinned(pin, ticket, name):
        return ref  # nothing left to pin: reading it raises LookupError saying so
    ref._held = pin
    _hold(ref, pin)
    return ref


def _pinned(pin: str, ticket: str | None, name: str) -> bool:
    """Make ``pin`` a name of the segment: the ticket renamed, else a link to its name."""
    if ticket is not None:
        try:
            os.rename(os.path.join(SHM_DIR, ticket), os.path.join(SHM_DIR, pin))
            return True
        except OSError:  # taken already (the same pickle read twice), or its sender is gone
            pass
    try:
        os.link(os.path.join(SHM_DIR, name), os.path.join(SHM_DIR, pin))
        return True
    except OSError:
        return False


def _new_name() -> str:
    return f"{PREFIX}-{_OWNER}-{next(_counter)}"


def _hold(ref: ObjectRef[Any], name: str) -> None:
    """``ref`` is this process's for its object: ``name`` goes when it is collected."""
    _live[ref._name] = ref
    weakref.finalize(ref, _remove_own, os.path.join(SHM_DIR, name), os.getpid())


def put(value: Any) -> ObjectRef[Any]:
    """Store ``value`` once on this machine and return a ref to pass around instead of it.

    The value is pickled (with cloudpickle, protocol 5) into shared memory: large buffers
    (numpy arrays, Arrow buffers) are copied in once and read by every local process without
    a copy of their own. It stays while a ref to it lives in any process of this machine
    (the one returned, or the copies sent to actors and tasks, also after this process has
    dropped its own), and is removed with the last. Needs no running runtime.

    Raises:
        TypeError: ``value`` is already an ``ObjectRef``, or cannot be pickled.
        OSError: shared memory is full (``/dev/shm``).
    """
    if isinstance(value, ObjectRef):
        raise TypeError(f"actorrt.put() takes a value, got a ref already: {value!r}")
    _sweep_once()
    buffers: list[pickle.PickleBuffer] = []
    try:
        payload = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception as exc:
        raise TypeError(f"actorrt.put() cannot pickle {type(value).__name__}: {exc}") from exc
    raws = [buffer.raw() for buffer in buffers]
    offset = _HEADER.size + _ENTRY.size * len(raws) + len(payload)
    entries = []
    for raw in raws:
        offset = -(-offset // ALIGN) * ALIGN
        entries.append((offset, raw.nbytes))
        offset += raw.nbytes
    size = max(offset, 1)
    name = _new_name()
    path = os.path.join(SHM_DIR, name)
    head = bytearray(_HEADER.pack(_MAGIC, len(payload), len(raws)))
    for entry in entries:
        head += _ENTRY.pack(*entry)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        # write() into the segment: twice as fast as copying through a mapping, which
        # faults every page in one by one.
        _write_at(fd, memoryview(head + payload), 0)
        for (start, _length), raw in zip(entries, raws, strict=True):
            _write_at(fd, raw, start)
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    ref: ObjectRef[Any] = ObjectRef(name, size, _HOST)
    _hold(ref, name)
    return ref


def _write_at(fd: int, data: memoryview, offset: int) -> None:
    data = data.cast("B")
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _remove_own(path: str, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, whose parent still holds the name
        _remove(path)


def _after_fork() -> None:
    """A forked child holds none of its parent's names, and makes its own."""
    global _OWNER, _swept
    _OWNER = _process_id()
    _live.clear()
    _swept = False


def _remove_names_at_exit() -> None:
    """At exit: every name this process made (its segments, its pins, and the tickets no
    one took)."""
    own = f"{PREFIX}-{_OWNER}-"
    if not _OWNER.startswith(f"{os.getpid()}-"):
        return
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith(own):
            _remove(os.path.join(SHM_DIR, name))


os.register_at_fork(after_in_child=_after_fork)
atexit.register(_remove_names_at_exit)


def _sweep_once() -> None:
    """Remove the names made by processes that are gone (once per process, at its first
    put)."""
    global _swept
    with _lock:
        if _swept:
            return
        _swept = True
    sweep()


def sweep() -> None:
    """Remove every name made by a process that is gone: a put's segment, a pin, a ticket
    (the runtime calls it once its worker processes have been reaped)."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        if not name.startswith(PREFIX + "-"):
            continue
        parts = name[len(PREFIX) + 1 :].split("-")
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        if _start_time(int(parts[0])) != parts[1]:
            try:
                os.unlink(os.path.join(SHM_DIR, name))
            except OSError:  # removed meanwhile, or another user's
                pass
