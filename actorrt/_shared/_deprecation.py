"""Ray's deprecation warning category, ``RayDeprecationWarning`` (a ``DeprecationWarning``,
public at ``actorrt.util.annotations`` as Ray's is at ``ray.util.annotations``), and the
one way Tune and Train warn with it.

As Ray does, importing this shows each such warning once per module that triggers it
(Python hides ``DeprecationWarning`` outside ``__main__`` by default), unless the program
set its own warning options (``-W``, ``PYTHONWARNINGS``).
"""

from __future__ import annotations

import os
import sys
import warnings

# Ray's switch for its Train V2 migration warnings ("0" turns them off; on by default).
MIGRATION_WARNINGS_ENV = "RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS"


class RayDeprecationWarning(DeprecationWarning):
    """A spelling Ray deprecates (and actorrt still accepts): filter it as Ray's."""


if not sys.warnoptions:
    warnings.filterwarnings("module", category=RayDeprecationWarning)


def migration_warnings_enabled() -> bool:
    """Whether the Train V2 migration warnings are shown (``RAY_TRAIN_ENABLE_V2_MIGRATION_
    WARNINGS``, as in Ray: ``"0"`` hides them)."""
    return os.environ.get(MIGRATION_WARNINGS_ENV, "1").strip() != "0"


def warn_migration(message: str, *, stacklevel: int = 2) -> None:
    """:func:`warn_deprecated` for a Train V2 migration warning: shown unless
    ``RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS=0``."""
    if migration_warnings_enabled():
        warnings.warn(message, RayDeprecationWarning, stacklevel=stacklevel + 1)


def warn_deprecated(message: str, *, stacklevel: int = 2) -> None:
    """Warn ``message`` as a ``RayDeprecationWarning`` at the caller's caller (with the
    default ``stacklevel``: the user's line that called the function warning)."""
    warnings.warn(message, RayDeprecationWarning, stacklevel=stacklevel + 1)


def check_local_dir(local_dir: object) -> None:
    """``RunConfig(local_dir=...)``, which Ray removed and refuses as this does.

    Raises:
        DeprecationWarning: ``local_dir`` is given (Ray raises this too).
    """
    if local_dir is not None:
        raise DeprecationWarning(
            "The `RunConfig(local_dir)` argument is deprecated. You should set the "
            f"`RunConfig(storage_path)` instead (got local_dir={local_dir!r}; "
            "storage_path is where experiments are written, a local folder here)"
        )
