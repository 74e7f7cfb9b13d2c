"""Where Tune experiments and Train runs are written: a local folder only."""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["check_local_storage_path"]

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
