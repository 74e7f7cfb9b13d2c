"""Jupyter notebooks: whether this thread runs a kernel's cells, and a cell output redrawn in place.

A Jupyter kernel (ipykernel) runs each cell on the main thread while its own event loop
runs there, so "a running event loop" does not mean "async code that must ``await``": a
cell that calls ``Tuner.fit()`` or ``actorrt.get()`` blocks, as under Ray, while the
runtime runs on its own thread. ``CellView`` is one output area of the calling cell that
later updates replace (IPython's ``display_id``), from any thread.
"""

from __future__ import annotations

import asyncio
import html
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CellView", "in_kernel", "must_await"]


def in_kernel() -> bool:
    """Whether the calling thread is the one a Jupyter kernel runs its cells on."""
    if "ipykernel" not in sys.modules or threading.current_thread() is not threading.main_thread():
        return False
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def must_await() -> bool:
    """Whether a blocking call made here would block a running event loop that is not a
    notebook cell's: such code must ``await`` the call's async form instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return not in_kernel()


class CellView:
    """An output area of the cell running now, replaced by each :meth:`show`.

    Made on the cell's thread (that is how the kernel knows which cell it belongs to);
    :meth:`show` may be called from any thread.
    """

    def __init__(self) -> None:
        import IPython.display  # present wherever a kernel runs

        shown: Any = IPython.display  # untyped: what is used of it is typed here
        self._html: Callable[[str], Any] = shown.HTML
        self._handle: Any = shown.display(self._html(""), display_id=True)

    def show(self, markup: str) -> None:
        """Replace the area's content with ``markup`` (HTML)."""
        self._handle.update(self._html(markup))

    @staticmethod
    def preformatted(text: str) -> str:
        """``text`` as HTML that keeps its lines and columns."""
        return f"<pre style='line-height:1.25'>{html.escape(text)}</pre>"
