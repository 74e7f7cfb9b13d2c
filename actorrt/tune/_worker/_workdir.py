"""A trial's working directory: its own trial folder, as in Ray Tune.

Ray Tune runs each trial with the trial's folder as the process's working directory, so
relative writes of two trials never land on the same file, and sets
``TUNE_ORIG_WORKING_DIR`` to the directory the process had before (unless it is set
already). The environment
variable ``RAY_CHDIR_TO_TRIAL_DIR=0`` (read in the driver when ``fit()`` starts, and
passed to every trial) turns the change of directory off; ``TUNE_ORIG_WORKING_DIR`` is set
either way.

A worker process is pooled and reused for later actors, and the pool matches workers by the
working directory they were started in: so the directory and the variable are put back when
the trial's attempt ends, and the next trial that reuses the process gets its own folder.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["CHDIR_ENV", "ORIG_DIR_ENV", "chdir_enabled", "trial_working_dir"]

CHDIR_ENV = "RAY_CHDIR_TO_TRIAL_DIR"
ORIG_DIR_ENV = "TUNE_ORIG_WORKING_DIR"


def chdir_enabled() -> bool:
    """Whether trials change into their folders: ``RAY_CHDIR_TO_TRIAL_DIR`` unset or a
    non-zero integer (Ray reads it as ``bool(int(value))``).

    Raises:
        ValueError: the variable is set to something that is not an integer.
    """
    value = os.environ.get(CHDIR_ENV, "1").strip() or "1"
    try:
        return bool(int(value))
    except ValueError:
        raise ValueError(
            f"{CHDIR_ENV}={os.environ[CHDIR_ENV]!r} is not an integer; set it to 0 to keep "
            "trials in the original working directory, or 1 (the default) to run each "
            "trial in its own trial folder"
        ) from None


@contextlib.contextmanager
def trial_working_dir(trial_dir: str, chdir: bool) -> Iterator[None]:
    """Run the block in ``trial_dir`` (when ``chdir``) with ``TUNE_ORIG_WORKING_DIR`` set
    to the process's working directory; both are put back afterwards."""
    original = os.getcwd()
    saved = os.environ.get(ORIG_DIR_ENV)
    if saved is None:  # one the user set is kept, as Ray does
        os.environ[ORIG_DIR_ENV] = original
    saved_path = list(sys.path)
    try:
        if chdir:
            # Imports keep resolving as before: "" and relative entries meant the original
            # directory.
            sys.path[:] = [os.path.join(original, p) if not os.path.isabs(p) else p
                           for p in sys.path]
            os.makedirs(trial_dir, exist_ok=True)
            os.chdir(trial_dir)
        yield
    finally:
        os.chdir(original)
        if chdir:
            sys.path[:] = saved_path
        if saved is None:
            os.environ.pop(ORIG_DIR_ENV, None)
        else:
            os.environ[ORIG_DIR_ENV] = saved
