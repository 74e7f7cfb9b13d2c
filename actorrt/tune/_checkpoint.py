"""``Checkpoint``: a directory of files that a trial can be restored from."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from .._checkpoint_metadata import CheckpointMetadata

__all__ = ["Checkpoint"]


class Checkpoint(CheckpointMetadata):
    """A checkpoint is a directory (Ray's ``Checkpoint``, local storage only).

    When a trial reports ``tune.report(metrics, checkpoint=Checkpoint.from_directory(d))``,
    the directory's files are copied into the trial's folder (``checkpoint_000003``); the
    trial may delete ``d`` afterwards. ``tune.get_checkpoint()`` and ``Result.checkpoint``
    return the persisted copy.

    Attributes:
        path: the directory.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """A checkpoint of the files in ``path`` (which must be a directory)."""
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise ValueError(f"Checkpoint.from_directory: {path!r} is not a directory")
        return cls(path)

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the files to ``path`` (default: a new temporary directory); return it."""
        target = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="checkpoint_")
        shutil.copytree(self.path, target, dirs_exist_ok=True)
        return target

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint's directory, to read in a ``with`` block (no copy is made)."""
        yield self.path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint(path={self.path!r})"
