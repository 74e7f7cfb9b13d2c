"""A trial folder's files, read in bounded pieces (call these in a thread, off the loop).

``result.json`` is read incrementally: each call parses only the lines appended since the
last one (the parsed rows are kept, at most :data:`MAX_ROWS` per trial). Logs and error
files are read a bounded chunk at a time. Nothing here follows links out of the folder or
unpickles anything.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

__all__ = [
    "ERROR_FILE",
    "LOG_FILE",
    "MAX_LOG_CHUNK",
    "MAX_ROWS",
    "RESULT_FILE",
    "checkpoints",
    "read_error",
    "read_history",
    "read_log",
]

RESULT_FILE = "result.json"  # one JSON object per result (the experiment folder's format)
LOG_FILE = "output.log"  # the trial process's stdout and stderr
ERROR_FILE = "error.txt"  # the traceback of a trial that failed
MAX_ROWS = 10_000  # results kept per trial (the newest)
MAX_LOG_CHUNK = 64 << 10  # bytes of a log per request
MAX_ERROR = 256 << 10  # bytes of an error file
_MAX_READ = 8 << 20  # bytes of result.json parsed per call


class _History:
    __slots__ = ("offset", "rows", "size_seen")

    def __init__(self) -> None:
        self.offset = 0
        self.rows: list[dict[str, Any]] = []
        self.size_seen = -1


_cache: dict[str, _History] = {}  # by path, oldest first; at most _MAX_CACHED
_MAX_CACHED = 4096
_lock = threading.Lock()


def read_history(trial_dir: str) -> list[dict[str, Any]]:
    """The trial's results so far (the newest :data:`MAX_ROWS`); a torn last line waits
    for the next call."""
    path = os.path.join(trial_dir, RESULT_FILE)
    with _lock:
        hist = _cache.pop(path, None) or _History()
        _cache[path] = hist  # the newest now
        while len(_cache) > _MAX_CACHED:
            del _cache[next(iter(_cache))]
        try:
            size = os.path.getsize(path)
        except OSError:
            return []
        if size < hist.offset:  # rewritten (a restored experiment trims its torn tail)
            hist.offset, hist.rows = 0, []
        if size != hist.size_seen:
            hist.size_seen = size
            _parse_new(path, hist)
        return list(hist.rows)


def _parse_new(path: str, hist: _History) -> None:
    with open(path, "rb") as f:
        f.seek(hist.offset)
        data = f.read(_MAX_READ)
    end = data.rfind(b"\n")
    if end < 0:
        return
    for line in data[: end + 1].splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line that is not JSON is left out, as a torn one
        if isinstance(row, dict):
            hist.rows.append(row)
    hist.offset += end + 1
    if len(hist.rows) > MAX_ROWS:
        del hist.rows[: len(hist.rows) - MAX_ROWS]


def read_log(trial_dir: str, offset: int) -> dict[str, Any]:
    """Up to :data:`MAX_LOG_CHUNK` bytes of the trial's log from ``offset`` (negative: that
    many bytes before its end): ``{"text", "offset" (where the text starts), "next"
    (where the next call starts), "size"}``."""
    path = os.path.join(trial_dir, LOG_FILE)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size + offset) if offset < 0 else min(offset, size)
            f.seek(start)
            data = f.read(MAX_LOG_CHUNK)
    except FileNotFoundError:
        return {"text": "", "offset": 0, "next": 0, "size": 0}
    return {
        "text": data.decode("utf-8", "replace"),
        "offset": start,
        "next": start + len(data),
        "size": size,
    }


def read_error(trial_dir: str) -> str | None:
    """The trial's error file (its first :data:`MAX_ERROR` bytes), or ``None``."""
    try:
        with open(os.path.join(trial_dir, ERROR_FILE), "rb") as f:
            return f.read(MAX_ERROR).decode("utf-8", "replace")
    except FileNotFoundError:
        return None


def checkpoints(trial_dir: str) -> list[str]:
    """The names of the trial's checkpoint folders, in order."""
    try:
        names = os.listdir(trial_dir)
    except OSError:
        return []
    return sorted(n for n in names if n.startswith("checkpoint_"))
