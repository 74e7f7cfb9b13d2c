"""Where Tune experiments and Train runs are written: a local folder only, and one that
only this user can change.

An experiment folder holds pickles (``tuner.pkl``, ``params.pkl``, ``searcher_state.pkl``,
configs in the journal) that ``Tuner.restore`` loads, and loading a pickle runs code. So an
experiment folder, and every trial folder in it, must be a real directory (not a link)
owned by this user and writable by no one else; one that is not is refused before anything
in it is read, with a ``PermissionError`` naming it. New ones are made with mode 0700.
"""

from __future__ import annotations

import os
import re
from typing import Any, BinaryIO

from .._owned import check_owned_dir, ensure_owned_dir, open_owned_file

__all__ = [
    "check_experiment_dir",
    "check_local_storage_path",
    "ensure_experiment_dir",
    "open_experiment_file",
]

_ADVICE = (
    "another user could replace its pickles, which a restore would load and so run as you; "
    "use a folder of your own (restore only folders you trust)"
)

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_local_storage_path(storage_path: Any, what: str = "storage_path") -> Any:
    """Refuse a ``storage_path`` (or another experiment path, named by ``what``) that is a
    URI (``s3://``, ``gs://``, ``hdfs://``, ...): Ray would use cloud storage there;
    actorrt uses the local disk only, and would otherwise make a local folder named after
    the URI. ``file://`` names a local folder, as in Ray. Other types are left to the
    caller's own checks.

    Returns:
        ``storage_path``, with a ``file://`` prefix removed.

    Raises:
        ValueError: ``storage_path`` is a URI.
    """
    if not isinstance(storage_path, str | os.PathLike):
        return storage_path
    path = os.fspath(storage_path)
    if isinstance(path, str) and _URI.match(path) and not path.startswith("file://"):
        raise ValueError(
            f"{what}={path!r}: actorrt writes experiments to a local folder only "
            "(cloud and remote storage are out of scope on one machine; see "
            "docs/porting.md). Give a local folder, and copy it afterwards if needed."
        )
    if isinstance(path, str) and path.startswith("file://"):
        return path.removeprefix("file://")
    return storage_path


def ensure_experiment_dir(path: str, what: str = "the experiment folder") -> str:
    """Make an experiment (or trial) folder with mode 0700 if it is missing; refuse one
    that is a link, another user's, or writable by others (see the module docstring).

    Raises:
        PermissionError: the folder is not this user's alone to change.
    """
    return ensure_owned_dir(path, what, _ADVICE)


def check_experiment_dir(path: str, what: str = "the experiment folder") -> None:
    """Refuse an existing experiment (or trial) folder that this user alone cannot trust.

    Raises:
        FileNotFoundError: it does not exist.
        PermissionError: it is a link, another user's, or writable by others.
    """
    check_owned_dir(path, what, _ADVICE)


def open_experiment_file(path: str, what: str) -> BinaryIO:
    """Open a file of an experiment folder to read (a pickle, the journal), refusing a
    link, another user's file or one others may write, checked on the opened file.

    Raises:
        FileNotFoundError: it does not exist.
        PermissionError: it is not this user's alone.
    """
    return open_owned_file(path, what, _ADVICE)
