"""cloudpickle that keeps where code came from.

cloudpickle (3.1 and later) names the file of every function it pickles by value
``<dynamic-code>``, so a traceback from a worker process shows no path and no source line
for the user's own functions (those defined in ``__main__`` or a notebook). This pickler
keeps each code object's real ``co_filename``: a worker on the same machine, or with the
same files, shows the user's file and line, as a traceback in the driver would.
"""

from __future__ import annotations

import io
import types
from collections import ChainMap
from typing import Any

import cloudpickle

__all__ = ["Pickler", "dumps"]

_DYNAMIC = "<dynamic-code>"
_code_reduce = getattr(getattr(cloudpickle, "cloudpickle", None), "_code_reduce", None)


def _code_with_filename(code: types.CodeType) -> tuple[Any, tuple[Any, ...]]:
    """cloudpickle's reduction of ``code``, with its own file name put back."""
    assert _code_reduce is not None
    rebuild, args = _code_reduce(code)
    return rebuild, tuple(code.co_filename if arg == _DYNAMIC else arg for arg in args)


class Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    """``cloudpickle.Pickler`` whose code objects keep their file names."""

    if _code_reduce is not None:  # a cloudpickle without it keeps its own behaviour
        dispatch_table = ChainMap(
            {types.CodeType: _code_with_filename}, cloudpickle.Pickler.dispatch_table
        )


def dumps(obj: Any, protocol: int | None = None) -> bytes:
    """``cloudpickle.dumps`` with code objects' file names kept."""
    file = io.BytesIO()
    Pickler(file, protocol=protocol).dump(obj)
    return file.getvalue()
