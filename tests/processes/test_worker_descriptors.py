"""A worker process holds no descriptor of its fork server or of its runtime beyond its own
output pipes: what a worker does to the descriptors it has cannot touch anyone else's."""

import os
import socket
import stat

import pytest

import actorrt


def open_files(pid: int) -> dict[int, tuple[int, int]]:
    """Process ``pid``'s descriptors that name an open pipe or socket: fd -> its identity.
    (Anonymous inodes, pidfds and epolls, share one inode, and files are not ours to
    compare.)"""
    found = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            info = os.stat(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        if stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):
            found[int(name)] = (info.st_dev, info.st_ino)
    return found


@actorrt.actor(process=True)
class Probe:
    def pid(self) -> int:
        return os.getpid()

    def shut_down_every_socket(self) -> int:
        """Shut down (both ways) every socket this process holds, as a careless library may."""
        count = 0
        for fd in open_files(os.getpid()):
            try:
                sock = socket.socket(fileno=os.dup(fd))
            except OSError:  # a pipe
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
                count += 1
            except OSError:
                pass
            finally:
                sock.close()
        return count


def shared_with(worker: int, other: int, own: set[int]) -> list[int]:
    """The descriptors of ``worker`` that ``other`` holds too, but for ``own`` (its stdout
    and stderr pipes, whose read ends its runtime holds)."""
    theirs = set(open_files(other).values())
    return [fd for fd, ident in open_files(worker).items() if ident in theirs and fd not in own]


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "plain"])
async def test_a_worker_holds_no_descriptor_of_its_fork_server_or_runtime(
    forked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not forked:
        monkeypatch.setenv("ACTORRT_FORKSERVER", "0")
    async with actorrt.Runtime(num_cpus=1) as rt:
        worker = await (await Probe.spawn()).pid()
        forks = (await rt.workers.pool()).forks
        assert (forks is not None) == forked
        stdio = {1, 2}
        assert shared_with(worker, os.getpid(), stdio) == []
        if forks is not None:
            assert forks.pid is not None
            assert shared_with(worker, forks.pid, stdio) == []


@pytest.mark.actorrt(num_cpus=1)
async def test_a_worker_that_shuts_down_its_sockets_leaves_the_fork_server_serving(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    careless, sibling = await Probe.spawn(), await Probe.spawn()
    sibling_pid = await sibling.pid()
    forks = (await actorrt_runtime.workers.pool()).forks
    assert forks is not None
    try:
        await careless.shut_down_every_socket()
    except actorrt.ActorDiedError:
        pass  # its own connection went with the rest: it ends, as it may
    await careless.wait_stopped()
    assert forks.lost_reason is None
    assert await sibling.pid() == sibling_pid  # the worker forked beside it lives on
    assert await (await Probe.spawn()).pid() not in (sibling_pid,)  # and forks go on
