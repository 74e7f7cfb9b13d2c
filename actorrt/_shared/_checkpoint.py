"""``Checkpoint``: a directory of files that a trial or a training run can resume from.

One class for both libraries, as in Ray (where ``ray.tune.Checkpoint`` is
``ray.train.Checkpoint``): ``actorrt.tune.Checkpoint``, ``actorrt.train.Checkpoint`` and
``actorrt.air.Checkpoint`` are this class, so a checkpoint reported by a Tune trainable
and one reported by a Train worker are the same kind of object, and ``isinstance`` checks
written against either name hold for both.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any, SupportsIndex

import actorrt

from ._checkpoint_metadata import CheckpointMetadata

__all__ = ["Checkpoint", "NotACheckpointDirectoryError", "local_filesystem"]


class NotACheckpointDirectoryError(actorrt.ActorrtError, FileNotFoundError, ValueError):
    """``Checkpoint.from_directory`` was given a path that is not a directory.

    A ``FileNotFoundError`` (what ``train.Checkpoint`` raised) and a ``ValueError`` (what
    ``tune.Checkpoint`` raised before the two became one class), so code catching either
    keeps working; and an ``actorrt.ActorrtError``, as everything the package raises.
    """


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
            f"installed: pip install 'actorrt[train]' (or pip install pyarrow). The files "
            f"are on the local file system at "
            f"{owner}.path"
        ) from exc
    return pyarrow.fs.LocalFileSystem()


class Checkpoint(CheckpointMetadata):
    """A directory of files that a trial or a training function can resume from (Ray's
    ``Checkpoint``, local storage only).

    Make one from a directory your code wrote, and pass it to
    ``tune.report(metrics, checkpoint=...)`` or ``train.report(metrics, checkpoint=...)``:
    the files are copied into the trial's or the run's folder (``checkpoint_000003``)
    before ``report`` returns, so the directory may be reused or deleted afterwards.
    ``tune.get_checkpoint()``, ``train.get_checkpoint()`` and ``Result.checkpoint`` give
    back checkpoints whose ``path`` is that stored copy.

    Attributes:
        path: the directory, as an absolute path string.

    Example::

        with tempfile.TemporaryDirectory() as d:
            torch.save(model.state_dict(), os.path.join(d, "model.pt"))
            train.report({"loss": loss}, checkpoint=train.Checkpoint.from_directory(d))
    """

    __slots__ = ("path",)  # checkpoints are made per report: no per-instance dict

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(path))

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """A checkpoint of the existing directory ``path``.

        Raises:
            NotACheckpointDirectoryError: ``path`` is not a directory (a
                ``FileNotFoundError`` and a ``ValueError``).
        """
        if not os.path.isdir(path):
            raise NotACheckpointDirectoryError(
                f"a checkpoint is a directory; {os.fspath(path)!r} is not one"
            )
        return cls(path)

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (a new temporary directory if
        ``None``) and return that directory; existing files there are overwritten."""
        target = tempfile.mkdtemp(prefix="checkpoint_") if path is None else os.fspath(path)
        shutil.copytree(self.path, target, dirs_exist_ok=True)
        return os.path.abspath(target)

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint's own directory, to read from without copying.

        Do not modify it: it is the trial's or the run's stored copy.
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
        # Ray's form, which names the filesystem (a checkpoint here is a local folder).
        return f"Checkpoint(filesystem=local, path={self.path})"

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        # Pickled through this module's function, not through the class's public name:
        # unpickling a checkpoint in a Tune trial's process must not import actorrt.train.
        if type(self) is Checkpoint:
            return (_checkpoint_at, (self.path,))
        return super().__reduce_ex__(protocol)  # a user's subclass: its own state too


def _checkpoint_at(path: str) -> Checkpoint:
    """Rebuild a pickled checkpoint (``path`` is already absolute)."""
    return Checkpoint(path)


# The class's public home, as in Ray (``ray.train.Checkpoint``); ``actorrt.tune`` and
# ``actorrt.air`` export the same class.
Checkpoint.__module__ = "actorrt.train"
