"""The experiment folder is marked so that ext4 spreads its trial folders over the disk.

Where the file system has no journal, ext4 does not reuse an inode for minutes after it was
freed, and finding a free one next to a folder whose neighbourhood was just emptied (an
earlier experiment deleted, old checkpoints) walks past every such inode: each file a trial
creates then costs the driver up to a millisecond. Marked, each trial folder goes where the
kernel finds room of its own choosing.
"""

from __future__ import annotations

import array
import fcntl
import os
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune._controller._storage import spread_subfolders

TOPDIR = 0x00020000  # FS_TOPDIR_FL, `chattr +T`


def flags_of(path: str) -> int | None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, 0x80086601, flags, True)  # FS_IOC_GETFLAGS
        return int(flags[0])
    except OSError:
        return None
    finally:
        os.close(fd)


def train(config: dict[str, Any]) -> None:
    tune.report({"x": config["x"]})


@pytest.mark.actorrt(num_cpus=2)
async def test_the_experiment_folder_spreads_its_trial_folders(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    if flags_of(str(tmp_path)) is None:
        pytest.skip(f"{tmp_path}'s file system has no inode flags (not ext2/3/4)")
    grid = await tune.Tuner(
        train,
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="spread", verbose=0),
    ).fit_async()
    assert not grid.errors and len(grid) == 3
    experiment = str(tmp_path / "spread")
    flags = flags_of(experiment)
    assert flags is not None and flags & TOPDIR, f"{experiment}: flags {flags}"
    # Only the experiment folder: the trial folders keep their files next to them.
    assert all(not (flags_of(r.path) or 0) & TOPDIR for r in grid)


def test_a_file_system_without_the_flag_is_no_error() -> None:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    folder = os.path.join("/dev/shm", f"actorrt-spread-{os.getpid()}")
    os.mkdir(folder, 0o700)
    try:
        # tmpfs has no such flag: no error, and the answer says what happened.
        assert spread_subfolders(folder) == bool((flags_of(folder) or 0) & TOPDIR)
    finally:
        os.rmdir(folder)
    assert spread_subfolders(os.path.join(folder, "gone")) is False
