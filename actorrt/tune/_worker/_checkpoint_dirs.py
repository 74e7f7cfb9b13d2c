"""A trial folder's checkpoints: the ``checkpoint_NNNNNN`` folders, and who owns an index.

A checkpoint is written whole into a temporary folder of its own writer
(``checkpoint_NNNNNN.tmp-<random>``, made by ``mkdtemp``: no other process, not even a lost
attempt of the same trial that still runs somewhere, writes into it), then renamed to its
final name. The rename never replaces a checkpoint that is there already: when the index is
taken (by what an attempt left before it died, or by a lost attempt that still writes), the
checkpoint takes the next free index instead. So a reported checkpoint is never
overwritten, and a checkpoint never holds files of two attempts.

The controller counts the checkpoints it recorded. At the start of each later attempt of a
trial (a retry after a crash, a resumed or restarted trial) it looks at the trial folder:
the attempt's first index is past every recorded checkpoint and every checkpoint folder
there, and what an earlier attempt left without reporting it (a temporary folder cut off
mid-copy, a checkpoint saved just before its process died, whose report never arrived) is
removed, so the retry writes where the lost attempt would have, as if it had never been.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Collection

__all__ = [
    "CHECKPOINT_DIR",
    "checkpoint_index",
    "copy_checkpoint",
    "next_checkpoint_index",
    "write_checkpoint",
]

#: A checkpoint folder's name (group 1: its index), or a temporary one's (group 2).
CHECKPOINT_DIR = re.compile(r"^checkpoint_(\d+)(\.tmp.*)?$")

# What a rename onto a folder that is there already fails with (Linux: ENOTEMPTY; some
# systems EEXIST), or onto a file that is there (ENOTDIR).
_TAKEN = {errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR}


def checkpoint_index(path: str) -> int | None:
    """The index of a final checkpoint folder from its name; ``None`` for any other."""
    match = CHECKPOINT_DIR.match(os.path.basename(path))
    return int(match.group(1)) if match is not None and not match.group(2) else None


def write_checkpoint(trial_dir: str, index: int, fill: Callable[[str], object]) -> tuple[str, int]:
    """Write a checkpoint into ``trial_dir``: ``fill`` gets an empty temporary folder of
    this writer's own, which is then renamed to ``checkpoint_<index>``, or to the first
    free index after it when that one is taken. Return the folder and its index.

    Raises:
        What ``fill`` or the file system raise; the temporary folder is removed then.
    """
    tmp = tempfile.mkdtemp(prefix=f"checkpoint_{index:06d}.tmp-", dir=trial_dir)
    try:
        fill(tmp)
        while True:
            dest = os.path.join(trial_dir, f"checkpoint_{index:06d}")
            try:
                # A rename never merges: onto a folder with files in it, it fails.
                os.rename(tmp, dest)
                return dest, index
            except OSError as exc:
                if exc.errno not in _TAKEN:
                    raise
                index += 1
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _link_or_copy(source: str, dest: str) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another filesystem, or links not allowed
        shutil.copy2(source, dest)


def copy_checkpoint(
    source: str, trial_dir: str, index: int, *, link: bool = False
) -> tuple[str, int]:
    """Copy the folder ``source`` as a checkpoint of ``trial_dir`` (:func:`write_checkpoint`);
    with ``link``, hard-link the files where the file system allows (checkpoint files are
    never modified in place)."""
    copy = _link_or_copy if link else shutil.copy2
    return write_checkpoint(
        trial_dir,
        index,
        lambda tmp: shutil.copytree(source, tmp, copy_function=copy, dirs_exist_ok=True),
    )


def next_checkpoint_index(
    trial_dir: str, recorded: int, *, reported: Collection[str] | None = None
) -> int:
    """The index the next attempt of a trial starts at: past ``recorded`` (the number the
    controller counted) and past every checkpoint folder in ``trial_dir``. Temporary
    folders are removed (a copy cut off). With ``reported`` (the paths of the checkpoints
    the controller recorded), a checkpoint folder at or past ``recorded`` that is not
    among them is removed as well: an earlier attempt saved it and died before reporting
    it, and its index goes to the next attempt."""
    count = recorded
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(trial_dir):
            match = CHECKPOINT_DIR.match(name)
            if match is None:
                continue
            path = os.path.join(trial_dir, name)
            index = int(match.group(1))
            unreported = reported is not None and index >= recorded and path not in reported
            if match.group(2) or unreported:
                shutil.rmtree(path, ignore_errors=True)
            else:
                count = max(count, index + 1)
    return count
