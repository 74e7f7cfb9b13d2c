"""The experiment folder: ``storage_path/name/<trial>/{params.json, result.json, ...}``.

Whole files (``params.json``) are written to a temporary name and renamed over the target
(``os.replace``), so a reader never sees half a file. Logs that grow (``result.json``, one
JSON object per line, and ``progress.csv``) are only appended to, never rewritten: the lines
are formatted on the event loop and written by one writer thread in batches, every
``FLUSH_S`` at most, each trial's pending lines in one write per file (the loop never waits
on the disk for a result). A killed driver loses at most the lines of the last ``FLUSH_S``,
readers skip a torn last line, and ``close`` writes everything before ``fit()`` returns.
``Tuner.restore`` cuts a resumed trial's logs back to the sizes they had when its
checkpoint was taken (:meth:`ExperimentStorage.truncate_results`), so results that the trial
reports again after resuming appear once.
"""

from __future__ import annotations

import array
import asyncio
import concurrent.futures
import contextlib
import csv
import errno
import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import cloudpickle

from ..._shared._storage_path import check_experiment_dir, ensure_experiment_dir

__all__ = [
    "ExperimentStorage",
    "flatten",
    "full_disk_hint",
    "read_results",
    "storage_error",
    "trim_torn_tail",
    "write_bytes_atomic",
    "write_json_atomic",
    "writing",
]

RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.csv"
# How long a reported result may wait in memory before the writer thread writes it: what a
# killed driver may lose (docs/tune.md, "What a crash may lose").
FLUSH_S = 0.05


# A write that fails so means the disk (or the user's quota on it) is full.
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def full_disk_hint(exc: BaseException) -> str:
    """What to say after an error that a full disk (or quota) caused; ``""`` otherwise."""
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return (
            " (the disk is full: free space on it, or give RunConfig(storage_path=...) on "
            "another disk)"
        )
    return ""


def storage_error(exc: OSError, path: str, doing: str) -> OSError:
    """``exc`` said again with the file and what was being done to it; a full disk is
    called that, with what to do."""
    message = f"tune could not {doing} {path}: {exc.strerror or exc}{full_disk_hint(exc)}"
    return OSError(exc.errno, message)


# ext2/3/4's "top of a directory hierarchy" inode flag (FS_TOPDIR_FL, `chattr +T`).
_TOPDIR_FLAG = 0x00020000
_GET_FLAGS, _SET_FLAGS = 0x80086601, 0x40086602  # FS_IOC_GETFLAGS, FS_IOC_SETFLAGS


def spread_subfolders(path: str) -> bool:
    """Mark ``path`` so that ext4 places each folder made in it in a block group of its own
    choosing, rather than next to ``path``; whether it was marked (``False`` on other file
    systems, which have no such flag, and on other systems).

    Without it, every trial folder's inodes are taken from the group of the experiment
    folder. Where the file system has no journal, finding a free inode there skips, one
    table read each, every inode freed in the last seconds to minutes (the kernel does
    not reuse them sooner): after a large folder in that group was deleted (an earlier
    experiment, old checkpoints), each file a trial creates cost 0.2-0.8 ms of CPU
    here, against 20-60 µs with the folders spread.
    """
    if sys.platform != "linux":
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _GET_FLAGS, flags, True)
        if not flags[0] & _TOPDIR_FLAG:
            flags[0] |= _TOPDIR_FLAG
            fcntl.ioctl(fd, _SET_FLAGS, flags, True)
        return True
    except OSError:  # tmpfs, XFS, a network file system: nothing to do
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def writing(path: str, doing: str) -> Iterator[None]:
    """Raise an ``OSError`` of the block as :func:`storage_error` says it."""
    try:
        yield
    except OSError as exc:
        raise storage_error(exc, path, doing) from exc


def write_json_atomic(path: str, data: Any, *, sort_keys: bool = True) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename."""
    text = json.dumps(data, indent=2, default=repr, sort_keys=sort_keys)
    _write_replacing(path, text.encode("utf-8"))


def _write_replacing(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file and rename it over ``path`` (no ``fsync``)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with writing(path, "write"):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            os.close(fd)
            _remove(tmp)
            raise
        os.close(fd)
        os.replace(tmp, path)


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, ``fsync`` and a rename."""
    tmp = f"{path}.tmp{os.getpid()}"
    with writing(path, "write"):
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            _remove(tmp)
            raise
        os.replace(tmp, path)


def _remove(path: str) -> None:
    """Remove a temporary file a failed write leaves (it holds space on a full disk)."""
    with contextlib.suppress(OSError):
        os.remove(path)


def trim_torn_tail(path: str) -> int:
    """Cut a line-oriented file back to its last newline: a line that a crash left half
    written is dropped, so the next append starts a line of its own. Return how many bytes
    were cut (0: the file ended in a whole line, or is missing)."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        f.seek(max(size - 1, 0))
        if f.read(1) == b"\n":
            return 0
        # Search backwards for the last newline, a block at a time.
        end = size
        while end > 0:
            start = max(end - 65536, 0)
            f.seek(start)
            block = f.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                f.truncate(start + cut + 1)
                return size - (start + cut + 1)
            end = start
        f.truncate(0)
        return size


def read_results(trial_dir: str) -> list[dict[str, Any]]:
    """The results in a trial's ``result.json``, in order; a torn last line is skipped."""
    try:
        with open(os.path.join(trial_dir, RESULT_FILE), encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return []
    results = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            if i >= len(lines) - 2:  # the last line, cut short by a crash
                break
            raise ValueError(
                f"{os.path.join(trial_dir, RESULT_FILE)}: line {i + 1} is not JSON: {line[:80]!r}"
            ) from None
    return results


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


class _Line:
    """Where a ``csv.writer`` puts the one row it formats (one writer for all rows)."""

    __slots__ = ("text",)  # for speed: one per trial, written at every result

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text = text


class _TrialFiles:
    """A trial's open result logs, unbuffered (the writer thread hands each batch to the
    system in one write), and their sizes once every line formatted so far is written."""

    __slots__ = (  # for speed: used at every result
        "csv", "csv_size", "header", "json", "json_size", "line", "writer",
    )

    def __init__(self, path: str) -> None:
        self.json: IO[bytes] = open(os.path.join(path, RESULT_FILE), "ab", buffering=0)  # noqa: SIM115
        csv_path = os.path.join(path, PROGRESS_FILE)
        self.csv: IO[bytes] = open(csv_path, "ab", buffering=0)  # noqa: SIM115
        # A resumed trial appends to the file it had: keep that file's columns.
        self.header: list[str] | None = _csv_header(csv_path) if self.csv.tell() else None
        self.json_size = self.json.tell()
        self.csv_size = self.csv.tell()
        self.line = _Line()
        self.writer = csv.writer(self.line, lineterminator="\n")

    def row(self, values: list[Any]) -> bytes:
        self.writer.writerow(values)
        return self.line.text.encode("utf-8")

    def close(self) -> None:
        self.json.close()
        self.csv.close()


class _ResultWriter:
    """The thread that writes the trials' result lines: what was queued during the last
    ``FLUSH_S``, one write per file of each trial, then the closes queued after those lines.
    The first error is kept for the loop to raise (:attr:`error`); later batches are
    still written (another file may still take them)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop
        self._cond = threading.Condition()
        self._lines: dict[_TrialFiles, tuple[list[bytes], list[bytes]]] = {}
        self._closes: list[tuple[_TrialFiles, Callable[[], None] | None]] = []
        self._written_callbacks: list[Callable[[], None]] = []  # for the loop to run
        self._queued = 0  # batches handed over so far
        self._written = 0  # batches written so far
        self._hurry = False
        self._stopping = False
        self.error: OSError | None = None
        self._thread = threading.Thread(
            target=self._run, name="actorrt-tune-results", daemon=True
        )
        self._thread.start()

    def add(self, files: _TrialFiles, json_line: bytes, csv_lines: list[bytes]) -> None:
        with self._cond:
            pending = self._lines.get(files)
            if pending is None:
                pending = self._lines[files] = ([], [])
                self._cond.notify()
            pending[0].append(json_line)
            pending[1].extend(csv_lines)

    def close_later(self, files: _TrialFiles, then: Callable[[], None] | None) -> None:
        """Close ``files`` after the lines queued for them (off the loop); then the loop
        runs ``then``."""
        with self._cond:
            self._closes.append((files, then))
            self._cond.notify()

    def take_callbacks(self) -> list[Callable[[], None]]:
        """The ``then`` callbacks of the closes done so far, for the caller to run."""
        with self._cond:
            done, self._written_callbacks = self._written_callbacks, []
        return done

    def flush(self) -> None:
        """Wait until everything queued so far is written (and the closes done)."""
        with self._cond:
            target = self._queued + 1
            self._hurry = True
            self._cond.notify()
            while self._written < target and self._thread.is_alive():
                self._cond.wait()

    def stop(self) -> None:
        self.flush()
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._lines or self._closes or self._hurry or self._stopping):
                    self._cond.wait()
                if self._stopping and not (self._lines or self._closes):
                    return
                # Let a batch gather (a burst of results becomes one write per file),
                # unless someone waits for it.
                deadline = time.monotonic() + FLUSH_S
                while not (self._hurry or self._stopping):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                lines, self._lines = self._lines, {}
                closes, self._closes = self._closes, []
                self._hurry = False
                self._queued += 1
                batch = self._queued
            for files, (json_lines, csv_lines) in lines.items():
                self._write(files.json, b"".join(json_lines))
                self._write(files.csv, b"".join(csv_lines))
            for files, _ in closes:
                with contextlib.suppress(OSError):
                    files.close()
            then = [callback for _, callback in closes if callback is not None]
            with self._cond:
                self._written = batch
                self._written_callbacks += then
                self._cond.notify_all()
            if then and self._loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: close() runs them
                    self._loop.call_soon_threadsafe(self.run_callbacks)

    def run_callbacks(self) -> None:
        for callback in self.take_callbacks():
            callback()

    def _write(self, file: IO[bytes], data: bytes) -> None:
        try:
            _write_all(file, data)
        except OSError as exc:
            if self.error is None:
                self.error = storage_error(exc, str(file.name), "append a result to")


class ExperimentStorage:
    """Writes one experiment's folder.

    A new trial's folder is set up on one of two threads of the storage's own
    (:meth:`new_trial_dir`): creating files is the costliest thing the driver does per trial
    on some filesystems, the event loop goes on meanwhile, and two threads let one trial's
    file creations overlap another's. Whatever touches a trial's folder afterwards waits for
    its set-up first (:meth:`ready`, or at once on the loop for the rare paths that need
    it), so the folder is complete before the trial's actor runs.
    """

    def __init__(self, storage_path: str, name: str) -> None:
        self.path = os.path.join(os.path.abspath(os.path.expanduser(storage_path)), name)
        # Only this user may read or change it: it holds pickles (params.pkl, tuner.pkl)
        # that a restore loads, so a link or a folder others made or can write is refused.
        ensure_experiment_dir(self.path)
        spread_subfolders(self.path)
        self._files: dict[str, _TrialFiles] = {}
        self._setups: dict[str, concurrent.futures.Future[_TrialFiles]] = {}
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._results: _ResultWriter | None = None
        self._closed_error: OSError | None = None  # the writer's error, kept past close

    @property
    def error(self) -> OSError | None:
        """The first error the writer thread met writing result lines, if any."""
        return self._results.error if self._results is not None else self._closed_error

    def new_trial_dir(self, dirname: str, config: Mapping[str, Any]) -> str:
        """The path of a new trial's folder, which a storage thread creates with its
        ``params.json``, ``params.pkl`` and open result logs; :meth:`ready` waits for it."""
        path = os.path.join(self.path, dirname)
        if path in self._setups:  # a name used twice (trial_dirname_creator): in turn
            self._claim(path)
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(2, "actorrt-tune-storage")
        self._setups[path] = self._writer.submit(self._set_up, dirname, dict(config))
        return path

    def _set_up(self, dirname: str, config: dict[str, Any]) -> _TrialFiles:
        path = self.trial_dir(dirname)
        self.write_params(path, config)
        with writing(path, "create the result logs in"):
            return _TrialFiles(path)

    async def ready(self, trial_dir: str) -> None:
        """Wait until the trial's folder is set up. Raises what setting it up raised."""
        setup = self._setups.get(trial_dir)
        if setup is not None:
            await asyncio.wrap_future(setup)
            self._claim(trial_dir)

    def _claim(self, trial_dir: str) -> None:
        """Take the result logs of the trial's set-up, waiting for it if it still runs."""
        setup = self._setups.pop(trial_dir, None)
        if setup is not None:
            self._files[trial_dir] = setup.result()

    def trial_dir(self, dirname: str) -> str:
        path = os.path.join(self.path, dirname)
        try:
            os.mkdir(path, 0o700)  # the common case: one new folder in the experiment's
        except FileExistsError:
            check_experiment_dir(path, "the trial folder")
        except FileNotFoundError:  # a dirname with folders in it
            ensure_experiment_dir(path, "the trial folder")
        return path

    def write_params(self, trial_dir: str, config: Mapping[str, Any]) -> None:
        """``params.json``, and ``params.pkl`` (exact, as Ray writes it) when the config
        pickles: a restore whose journal lost the trial takes its config from there."""
        # In the param space's order (not sorted): `actorrt results` shows the columns so.
        write_json_atomic(os.path.join(trial_dir, "params.json"), config, sort_keys=False)
        try:
            blob = cloudpickle.dumps(dict(config))
        except Exception:
            return  # a value that cannot be pickled (an actor ref): params.json must do
        _write_replacing(os.path.join(trial_dir, "params.pkl"), blob)

    def append_result(self, trial_dir: str, result: Mapping[str, Any]) -> None:
        """Queue one result's lines for the writer thread. Raises the error the writer met
        writing earlier lines (a full disk), once."""
        if self._results is None:
            self._results = _ResultWriter(_running_loop())
        elif self._results.error is not None:
            error, self._results.error = self._results.error, None
            raise error
        files = self._files.get(trial_dir)
        if files is None:
            self._claim(trial_dir)
            files = self._files.get(trial_dir)
        if files is None:
            with writing(trial_dir, "create the result logs in"):
                files = self._files[trial_dir] = _TrialFiles(trial_dir)
        line = (json.dumps(result, default=repr) + "\n").encode("utf-8")
        flat = flatten({k: v for k, v in result.items() if k != "config"})
        rows = []
        if files.header is None:
            files.header = list(flat)
            if files.csv_size == 0:
                rows.append(files.row(files.header))
        rows.append(files.row([flat.get(k, "") for k in files.header]))
        files.json_size += len(line)
        files.csv_size += sum(map(len, rows))
        self._results.add(files, line, rows)

    def sizes(self, trial_dir: str) -> tuple[int, int]:
        """The sizes in bytes of a trial's ``result.json`` and ``progress.csv``, with every
        line queued so far written first: where to cut them back to when the trial resumes
        from here (a checkpoint's journal line, synced next, must not point past what is
        in the files)."""
        self._claim(trial_dir)
        self.flush()
        files = self._files.get(trial_dir)
        if files is not None:
            return files.json_size, files.csv_size
        return (
            _size(os.path.join(trial_dir, RESULT_FILE)),
            _size(os.path.join(trial_dir, PROGRESS_FILE)),
        )

    def flush(self) -> None:
        """Wait until every result line queued so far is written and the trials closed so
        far are closed (the caller's thread waits: for restores and tests, not the loop)."""
        if self._results is not None:
            self._results.flush()
            self._results.run_callbacks()

    def truncate_results(self, trial_dir: str, result_bytes: int, progress_bytes: int) -> None:
        """Cut a trial's result logs back to the given sizes (``0``: remove them)."""
        self.close_trial(trial_dir)
        self.flush()
        for name, size in ((RESULT_FILE, result_bytes), (PROGRESS_FILE, progress_bytes)):
            path = os.path.join(trial_dir, name)
            if size <= 0:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            elif _size(path) > size:
                os.truncate(path, size)

    def close_trial(self, trial_dir: str, then: Callable[[], None] | None = None) -> None:
        """Close the trial's result logs once their queued lines are written; then run
        ``then`` on the loop (at once when nothing is queued): what must not reach the
        journal before the trial's results reach its files, its end."""
        self._claim(trial_dir)
        files = self._files.pop(trial_dir, None)
        if files is not None and self._results is not None:
            self._results.close_later(files, then)  # after its queued lines
            return
        if files is not None:
            files.close()
        if then is not None:
            then()

    def close(self) -> None:
        """Write every queued line and close every file (:attr:`error` says what failed)."""
        for trial_dir in list(self._setups):
            with contextlib.suppress(Exception):  # a failed set-up was reported already
                self._claim(trial_dir)
        if self._results is not None:
            self._results.stop()
            self._results.run_callbacks()  # the trial ends written last, in order
            self._closed_error, self._results = self._results.error, None
        for files in self._files.values():
            files.close()
        self._files.clear()
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The caller's running loop, where the writer's callbacks run (none: at ``flush``)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def _csv_header(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            row = next(csv.reader(f), None)
    except FileNotFoundError:
        return None
    return list(row) if row else None


def _write_all(file: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` to an unbuffered file (a raw write may take only part)."""
    view = memoryview(data)
    while view:
        view = view[file.write(view) or 0 :]
