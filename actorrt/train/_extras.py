"""The optional library a Train integration drives: imported, or an error naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` for ``what``, or raise an ``ImportError`` saying which extra of
    actorrt installs it (``pip install 'actorrt[extra]'``)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{what} needs {module}, which is not installed here ({exc}): "
            f"pip install 'actorrt[{extra}]'"
        ) from exc
