"""A checkpoint is a directory: whatever files the training function wrote into it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._checkpoint_metadata import CheckpointMetadata


def local_filesystem(owner: str) -> Any:
    """``pyarrow.fs.LocalFileSystem()``: where runs and checkpoints live (Ray gives a
    ``pyarrow.fs.FileSystem`` with each path).

    Raises:
        ModuleNotFoundError: pyarrow is not installed (it is only needed for this).
    """
    try:
        import pyarrow.fs  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"{owner}.filesystem is a pyarrow.fs.FileSystem, as in Ray, and pyarrow is not "
            f"installed (pip install pyarrow). The files are on the local file system at "
            f"{owner}.path"
        ) from exc
    return pyarrow.fs.LocalFileSystem()


class Checkpoint(CheckpointMetadata):
    """A directory of files that a training function can resume from.

    Make one from a directory the training function wrote, and pass it to
    ``train.report(metrics, checkpoint=...)``: the files are copied into the run's folder
    before ``report`` returns, so the directory may be reused or deleted afterwards.
    ``train.get_checkpoint()`` and ``Result.checkpoint`` give back checkpoints whose
    ``path`` is that copy in the run's folder.

    Attributes:
        path: the directory, as an absolute path string.

    Example::

        with tempfile.TemporaryDirectory() as d:
            torch.save(model.state_dict(), os.path.join(d, "model.pt"))
            train.report({"loss": loss}, checkpoint=train.Checkpoint.from_directory(d))
    """

    __slots__ = ("path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(path))

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """A checkpoint of the existing directory ``path``.

        Raises:
            FileNotFoundError: ``path`` is not a directory.
        """
        if not os.path.isdir(path):
            raise FileNotFoundError(f"a checkpoint is a directory; {os.fspath(path)!r} is not one")
        return cls(path)

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (a new temporary directory if
        ``None``) and return that directory; existing files there are overwritten."""
        target = tempfile.mkdtemp(prefix="checkpoint-") if path is None else os.fspath(path)
        shutil.copytree(self.path, target, dirs_exist_ok=True)
        return os.path.abspath(target)

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint's own directory, to read from without copying.

        Do not modify it: it is the run's stored copy.
        """
        yield self.path

    @property
    def filesystem(self) -> Any:
        """``pyarrow.fs.LocalFileSystem()`` (checkpoints are local files; needs pyarrow)."""
        return local_filesystem("Checkpoint")

    def __fspath__(self) -> str:
        return self.path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint(path={self.path!r})"


def store(source: Checkpoint, run_dir: Path, index: int) -> Checkpoint:
    """Copy ``source`` into ``run_dir/checkpoint_<index>``; return that folder.

    Every rank's checkpoint of one report goes to the same folder, so the folder holds the
    union of their files (as Ray Train V2 merges per-rank checkpoint directories; a file
    two ranks both write is the last writer's). The files go to a hidden sibling first;
    the first rank to arrive renames it into place, so a reader never sees half of its
    files, and later ranks move theirs in file by file.
    """
    final = run_dir / checkpoint_name(index)
    if Path(source.path) == final:
        return Checkpoint(final)
    staging = run_dir / f".{checkpoint_name(index)}.tmp-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source.path, staging)
    try:
        os.replace(staging, final)  # absent (or empty): the whole folder at once
    except OSError:  # another rank's files are there already: merge ours in
        _merge(staging, final)
        shutil.rmtree(staging, ignore_errors=True)
    return Checkpoint(final)


CHECKPOINT_PREFIX = "checkpoint_"


def checkpoint_name(index: int) -> str:
    """The folder name of the checkpoint of report ``index``."""
    return f"{CHECKPOINT_PREFIX}{index:06d}"


def checkpoint_index(name: str) -> int | None:
    """The report index of a checkpoint folder name, or ``None`` for another name."""
    digits = name[len(CHECKPOINT_PREFIX):]
    if name.startswith(CHECKPOINT_PREFIX) and digits.isdigit():
        return int(digits)
    return None


def _merge(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        dest = target / entry.name
        if entry.is_dir() and not entry.is_symlink():
            _merge(entry, dest)
        else:
            os.replace(entry, dest)
