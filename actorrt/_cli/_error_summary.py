"""A trial's error, as its traceback text tells it: what ``actorrt results`` prints.

The text is what Tune writes to a trial's ``error.txt`` (and to its journal): the exception
with its traceback, chained causes first, as ``traceback.format_exception`` writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ErrorSummary", "summarise_error"]

_CONFIG_ERRORS = ("ResourceDeadlockError", "InfeasibleResourceError")
_CONFIG_ERROR_LINE = re.compile(
    r"^(?:[\w.]+\.)?(" + "|".join(_CONFIG_ERRORS) + r"): (.*)$", re.MULTILINE
)


@dataclass
class ErrorSummary:
    """A trial's error, from its ``error.txt``.

    Attributes:
        kind: the exception's type name (``ValueError``).
        headline: the exception line (``ValueError: lr must be positive``).
        more: the message's next lines (at most two).
        fix: for a ``ResourceDeadlockError`` or ``InfeasibleResourceError`` (also when it
            caused the final error), what the message says to do.
        config_error: whether it is one of those (retrying cannot help).
        source: the file the full traceback is in (set by the reader).
    """

    kind: str
    headline: str
    more: list[str] = field(default_factory=list)
    fix: str | None = None
    config_error: bool = False
    source: str = ""


def summarise_error(text: str) -> ErrorSummary:
    """The exception line of a formatted traceback, the lines after it, and the fix of a
    resource configuration error found anywhere in it (a chained cause included)."""
    lines = text.rstrip().splitlines()
    start = 0
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            start = i + 1
    body = lines[start:]
    # Frames and source lines are indented; the exception line is the first that is not.
    at = next((i for i, line in enumerate(body) if line and not line[0].isspace()), None)
    if at is None:
        headline, more = (lines[0] if lines else "(empty error.txt)"), lines[1:3]
    else:
        headline = body[at]
        more = [line for line in body[at + 1 : at + 3] if line.strip()]
    kind = headline.split(":", 1)[0].rsplit(".", 1)[-1].strip() if ":" in headline else "?"
    error = ErrorSummary(kind=kind, headline=headline, more=more)
    found = _CONFIG_ERROR_LINE.search(text)
    if found is not None:
        error.config_error = True
        message = found.group(2)
        if "To fix:" in message:
            error.fix = message[message.index("To fix:") + len("To fix:") :].strip()
        elif "Ask for less" in message:
            error.fix = message[message.index("Ask for less") :].strip()
    return error
