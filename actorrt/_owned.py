"""Folders that only this user can change: one check for every folder actorrt trusts.

A folder actorrt reads back and acts on (the runtime discovery directory, whose entries
hold a status socket's secret; a Tune experiment folder, whose ``tuner.pkl`` and
``params.pkl`` are unpickled by ``Tuner.restore``) must be a real directory, not a link,
owned by this user, and writable by no one else. Otherwise another local user could plant
it (a link to a folder of theirs, a folder they made first in a shared ``/tmp``) or replace
a file in it, and what this user's process reads from it would be theirs. Such a folder is
refused with a ``PermissionError`` that names it and says what to do.

The check looks at the folder itself (``lstat``: a link is not followed), not at the
folders above it: a storage path that is itself a link to a folder of the user's is fine.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

__all__ = ["check_owned_dir", "ensure_owned_dir", "open_owned_file", "owned_problem"]

#: Mode bits a trusted folder must not have: written by group or others, or (``private``)
#: used by them at all.
_WRITABLE_BY_OTHERS = 0o022
_USABLE_BY_OTHERS = 0o077


def owned_problem(st: os.stat_result, *, private: bool = False, folder: bool = True) -> str | None:
    """What makes a folder (or, without ``folder``, a regular file) with this ``lstat``
    untrusted, in words; ``None`` when nothing.

    Args:
        st: its ``os.lstat`` (or the ``fstat`` of a file opened without following links).
        private: also refuse one that group or others may read.
        folder: it must be a directory; else a regular file.
    """
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (a link is refused: another user may have planted it)"
    if folder and not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if not folder and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    mode = stat.S_IMODE(st.st_mode)
    if private and mode & _USABLE_BY_OTHERS:
        return f"has mode {mode:#o}; it must be 0700, usable by you only (chmod 700 it)"
    if mode & _WRITABLE_BY_OTHERS:
        return (
            f"has mode {mode:#o}: other users may write it; it must not be writable by "
            "group or others (check its files are yours, then chmod go-w it)"
        )
    return None


def check_owned_dir(path: str, what: str, advice: str, *, private: bool = False) -> None:
    """Refuse ``path`` unless it is a directory that only this user can change.

    Args:
        path: the folder.
        what: how the message names it (``"the Tune experiment folder"``).
        advice: what to do instead, appended to the message.
        private: also refuse a folder that group or others may read or enter.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        PermissionError: it is a link or not a directory, belongs to another user, or
            others may write it (with ``private``: use it at all).
    """
    problem = owned_problem(os.lstat(path), private=private)
    if problem is not None:
        raise PermissionError(f"{what} {path!r} {problem}; {advice}")


def open_owned_file(path: str, what: str, advice: str) -> BinaryIO:
    """Open ``path`` for reading, refusing a link, another user's file or one that others
    may write: checked on the opened file itself, so it cannot be swapped in between.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        PermissionError: it is a link (``O_NOFOLLOW``), not a regular file, another
            user's, or writable by group or others.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise PermissionError(
            f"{what} {path!r} is a symbolic link (a link is refused: another user may have "
            f"planted it); {advice}"
        ) from None
    problem = owned_problem(os.fstat(fd), folder=False)
    if problem is not None:
        os.close(fd)
        raise PermissionError(f"{what} {path!r} {problem}; {advice}")
    return os.fdopen(fd, "rb")


def ensure_owned_dir(path: str, what: str, advice: str, *, private: bool = False) -> str:
    """Create ``path`` with mode 0700 if needed (and each missing folder above it with
    0755: ``os.makedirs`` would give those ``0777`` less the umask, writable by everyone
    under umask 0), then :func:`check_owned_dir` it; return ``path``."""
    missing = []
    folder = path
    while not os.path.lexists(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for i, folder in enumerate(reversed(missing)):
        try:
            os.mkdir(folder, 0o700 if i == len(missing) - 1 else 0o755)
        except FileExistsError:
            pass  # made meanwhile: the folder itself is checked below like any other
    check_owned_dir(path, what, advice, private=private)
    return path
