"""actorrt.put: a value stored once in shared memory, read by local processes without a copy."""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import actorrt

SHM = Path("/dev/shm")
ROOT = Path(__file__).resolve().parent.parent


@actorrt.actor(num_cpus=1)
class Reader:
    def read(self, ref: actorrt.ObjectRef) -> dict:
        array = actorrt.get(ref)
        with open("/proc/self/maps") as f:  # address perms offset device inode path
            mapped = {int(line.split()[4]) for line in f if "/dev/shm/actorrt-obj-" in line}
        return {
            "sum": int(array[::1000].sum()),
            "shape": array.shape,
            "writeable": array.flags.writeable,
            "owns": array.flags.owndata,
            "mapped": mapped,
            "pid": os.getpid(),
        }


def test_a_100_mb_array_put_once_is_read_by_4_actors_without_copies(facade) -> None:
    array = np.arange(100 * 2**20 // 8, dtype=np.int64)
    ref = actorrt.put(array)
    assert ref.size >= array.nbytes
    inode = (SHM / ref.object_id).stat().st_ino
    readers = [actorrt.get(Reader.spawn()) for _ in range(4)]
    seen = actorrt.get([r.read(ref) for r in readers])
    assert len({s["pid"] for s in seen}) == 4
    for s in seen:
        assert s["sum"] == int(array[::1000].sum()) and s["shape"] == array.shape
        # Backed by the one shared segment, mapped read-only: no copy of its own.
        assert inode in s["mapped"] and not s["writeable"] and not s["owns"]
    here = actorrt.get(ref)
    assert (here == array).all() and not here.flags.writeable


async def test_plain_values_and_await(actorrt_runtime) -> None:
    value = {"a": [1, 2, 3], "b": b"x" * 1000, "c": (None, 1.5)}
    ref = actorrt.put(value)
    assert await ref == value
    assert ref == actorrt.ObjectRef(ref.object_id, ref.size, "any") and hash(ref)
    assert "bytes" in repr(ref)


def test_get_takes_refs_in_lists() -> None:
    refs = [actorrt.put(i) for i in range(3)]
    assert actorrt.get(refs) == [0, 1, 2]


def names_of(inode: int) -> list[str]:
    """The names /dev/shm holds for one segment (its put's, pins, tickets)."""
    found = []
    for entry in os.scandir(SHM):
        try:
            if entry.name.startswith("actorrt-obj-") and entry.inode() == inode:
                found.append(entry.name)
        except OSError:  # removed meanwhile
            pass
    return found


def test_a_pickled_copy_keeps_the_object_until_it_is_read_and_dropped() -> None:
    ref = actorrt.put(b"abc")
    inode = (SHM / ref.object_id).stat().st_ino
    copy = pickle.loads(pickle.dumps(ref))
    assert copy is ref  # back in the owner: the same ref, the same lifetime
    del copy
    assert names_of(inode) == [ref.object_id]  # its ticket was taken back
    sent = pickle.dumps(ref)  # on its way: its ticket holds the object
    del ref
    gc.collect()
    assert len(names_of(inode)) == 1
    elsewhere = pickle.loads(sent)
    assert actorrt.get(elsewhere) == b"abc"
    del elsewhere
    gc.collect()
    assert names_of(inode) == []  # the last ref went: so did the object
    with pytest.raises(LookupError, match="was freed"):
        actorrt.get(pickle.loads(sent))  # the same message read twice: its ticket is spent


@actorrt.actor(num_cpus=1)
class Holder:
    def keep(self, ref: actorrt.ObjectRef) -> int:
        self.ref = ref
        return os.getpid()

    def read(self) -> int:
        return len(actorrt.get(self.ref))

    def forget(self) -> None:
        del self.ref
        gc.collect()


def test_an_actor_holding_a_ref_keeps_the_object_after_the_owner_dropped_its_own(
    facade,
) -> None:
    holders = [actorrt.get(Holder.spawn()) for _ in range(2)]
    ref = actorrt.put(b"x" * 100_000)
    inode = (SHM / ref.object_id).stat().st_ino
    # Ray's habit: the put made inside the call, the owner's ref dropped at once.
    actorrt.get([h.keep(ref) for h in holders])
    del ref
    gc.collect()
    assert len(names_of(inode)) == 2  # one pin per holder
    assert actorrt.get([h.read() for h in holders]) == [100_000, 100_000]
    pid = actorrt.get(holders[0].keep(actorrt.put(b"y" * 10)))
    assert actorrt.get(holders[0].read()) == 10
    actorrt.get(holders[1].forget())
    assert names_of(inode) == []
    # A holder killed by a signal leaves its pin: removed once the runtime has reaped it.
    held = actorrt.get(holders[0].keep(actorrt.put(b"z" * 10)))
    assert held == pid
    gc.collect()
    os.kill(pid, 9)
    pinned = [n for n in os.listdir(SHM) if n.startswith(f"actorrt-obj-{pid}-")]
    assert pinned
    actorrt.shutdown()
    assert not [n for n in os.listdir(SHM) if n.startswith(f"actorrt-obj-{pid}-")]
    actorrt.init(num_cpus=4)  # for the fixture to shut down


def test_a_ticket_no_one_took_goes_when_its_sender_exits() -> None:
    code = (
        "import os, pickle, sys, actorrt\n"
        "ref = actorrt.put(b'x' * 4096)\n"
        "sent = pickle.dumps(ref)\n"
        "print(os.stat('/dev/shm/' + ref.object_id).st_ino, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert names_of(int(done.stdout)) == []


def test_segments_of_a_killed_owner_are_removed(tmp_path: Path) -> None:
    code = (
        "import os, signal, actorrt\n"
        "ref = actorrt.put(b'x' * 4096)\n"
        "print(ref.object_id, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert killed.returncode == -9
    name = killed.stdout.strip()
    assert (SHM / name).exists()  # left behind by the SIGKILL
    # Another process's first put removes what owners that are gone left.
    subprocess.run([sys.executable, "-c", "import actorrt; actorrt.put(1)"], check=True)
    assert not (SHM / name).exists()


def test_bad_values() -> None:
    ref = actorrt.put(1)
    with pytest.raises(TypeError, match="got a ref already"):
        actorrt.put(ref)
    with pytest.raises(TypeError, match="cannot pickle lock"):
        actorrt.put(threading.Lock())


def test_a_segment_another_user_could_have_written_is_never_unpickled() -> None:
    """/dev/shm is every user's: a freed name can be created again by someone else, and the
    reader would run their pickle. A segment writable by others, or owned by someone else,
    is refused."""
    ref = actorrt.put({"a": 1})
    path = SHM / ref.object_id
    assert actorrt.get(ref) == {"a": 1}
    os.chmod(path, 0o622)
    with pytest.raises(PermissionError, match="not this user's own actorrt object"):
        actorrt.get(ref)
    os.chmod(path, 0o600)
    if os.getuid() == 0:  # only root can give a file away
        os.chown(path, 65534, -1)
        with pytest.raises(PermissionError, match="owner uid 65534"):
            actorrt.get(ref)
        os.chown(path, 0, -1)
    assert actorrt.get(ref) == {"a": 1}


@pytest.mark.skipif(shutil.which("unshare") is None or os.getuid() != 0,
                    reason="needs unshare and root for a process with a hostname of its own")
def test_a_ref_read_on_another_machine_says_objects_are_not_fetched_across_nodes() -> None:
    # A process with another hostname (a UTS namespace: "another machine" to actorrt) is
    # given the ref as a message would carry it (pickled), and reads it.
    ref = actorrt.put([1, 2, 3])
    reader = (
        "import pickle, sys, actorrt\n"
        "ref = pickle.loads(sys.stdin.buffer.read())\n"
        "try:\n"
        "    actorrt.get(ref)\n"
        "except RuntimeError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        ["unshare", "--uts", "sh", "-c", f'hostname elsewhere && exec "{sys.executable}" -c "$0"',
         reader],
        input=pickle.dumps(ref), capture_output=True, timeout=60, cwd=ROOT,
    )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert f"was put on {socket.gethostname()}, and this is elsewhere" in out
    assert "not fetched across the nodes of a cluster" in out
