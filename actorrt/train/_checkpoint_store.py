"""Where a run keeps its checkpoints: ``checkpoint_<index>`` folders in the run's folder,
one per report, holding every rank's files of that report."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from .._shared._checkpoint import Checkpoint


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
