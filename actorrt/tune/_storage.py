"""The experiment folder: ``storage_path/name/<trial>/{params.json, result.json, ...}``.

Whole files (``params.json``) are written to a temporary name and renamed over the target
(``os.replace``), so a reader never sees half a file. Logs that grow (``result.json``, one
JSON object per line, and ``progress.csv``) are appended one whole line per write and flushed,
never rewritten: a crash loses at most the line being written.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Mapping
from typing import IO, Any

__all__ = ["ExperimentStorage", "copy_dir_atomic", "flatten", "write_json_atomic"]


def write_json_atomic(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=repr, sort_keys=True)
    os.replace(tmp, path)


def _link_or_copy(source: str, dest: str) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another filesystem, or links not allowed
        shutil.copy2(source, dest)


def copy_dir_atomic(source: str, dest: str, *, link: bool = False) -> None:
    """Copy a directory to ``dest`` through a temporary name and a rename; with ``link``,
    hard-link the files where the filesystem allows (for files never modified in place)."""
    tmp = f"{dest}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, copy_function=_link_or_copy if link else shutil.copy2)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level with ``/``-joined keys (``config/lr``)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


class _TrialFiles:
    def __init__(self, path: str) -> None:
        self.json: IO[str] = open(os.path.join(path, "result.json"), "a", encoding="utf-8")  # noqa: SIM115
        self.csv: IO[str] = open(os.path.join(path, "progress.csv"), "a", encoding="utf-8")  # noqa: SIM115
        self.header: list[str] | None = None

    def close(self) -> None:
        self.json.close()
        self.csv.close()


class ExperimentStorage:
    """Writes one experiment's folder."""

    def __init__(self, storage_path: str, name: str) -> None:
        self.path = os.path.join(os.path.abspath(os.path.expanduser(storage_path)), name)
        os.makedirs(self.path, exist_ok=True)
        self._files: dict[str, _TrialFiles] = {}

    def trial_dir(self, dirname: str) -> str:
        path = os.path.join(self.path, dirname)
        os.makedirs(path, exist_ok=True)
        return path

    def write_params(self, trial_dir: str, config: Mapping[str, Any]) -> None:
        write_json_atomic(os.path.join(trial_dir, "params.json"), config)

    def append_result(self, trial_dir: str, result: Mapping[str, Any]) -> None:
        files = self._files.get(trial_dir)
        if files is None:
            files = self._files[trial_dir] = _TrialFiles(trial_dir)
        files.json.write(json.dumps(result, default=repr) + "\n")
        files.json.flush()
        flat = flatten({k: v for k, v in result.items() if k != "config"})
        if files.header is None:
            files.header = list(flat)
            if files.csv.tell() == 0:
                files.csv.write(_csv_line(files.header))
        files.csv.write(_csv_line([flat.get(k, "") for k in files.header]))
        files.csv.flush()

    def close_trial(self, trial_dir: str) -> None:
        files = self._files.pop(trial_dir, None)
        if files is not None:
            files.close()

    def close(self) -> None:
        for files in self._files.values():
            files.close()
        self._files.clear()


def _csv_line(values: list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue()
