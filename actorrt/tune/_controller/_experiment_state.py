"""The experiment's own state, kept for ``Tuner.restore``: a header, a journal, a searcher file.

Three files in the experiment folder, next to the trial folders:

- ``tuner.pkl``, the **header**, written once when a new experiment starts (to a temporary
  name, then renamed): the trainable's name, the id tag of its trials, and the
  ``param_space``, ``TuneConfig`` and ``RunConfig`` as they were given (cloudpickle, each
  on its own, so that one that cannot be pickled does not lose the others). A value inside
  ``param_space`` that cannot be pickled (an actor ref) is stored as a placeholder, to be
  given again with ``Tuner.restore(..., param_space=...)``.
- ``experiment_state.jsonl``, the **journal**: one JSON object per line, appended and
  flushed as things happen (so a killed process loses none), never rewritten. A checkpoint's
  line is ``fsync``-ed before the controller goes on (it may delete an older checkpoint
  next); a trial's end is ``fsync``-ed by a helper thread right after, off the controller's
  loop, so that a machine crash loses at most the lines of the last moment. ``trial`` (a
  trial was created: id, name, folder, config, resources), ``checkpoint`` (a checkpoint was
  recorded, with the sizes of the trial's result logs at that moment), ``config`` (a
  scheduler changed a trial's config),
  ``end`` (a trial finished or errored), and ``start`` (with the metric and mode) /
  ``finished`` / ``interrupted`` for each run of ``fit()``. Every line carries ``t``, the
  experiment's running time in seconds over all its runs. A crash can leave the last line
  half written: readers skip it, and a restored run cuts it off before appending.
- ``searcher_state.pkl``: the searcher's ``get_state()``, written atomically when a trial is
  created or ends and the state changed, with the journal's line count at that moment.

The process running the experiment holds an exclusive ``flock`` on the journal, so a second
process cannot run or restore the same experiment at the same time; the lock goes with the
process, however it ends.

Everything else a restore needs is in the trial folders already (``result.json``,
checkpoints, ``params.pkl``); a trial folder the journal lost is recovered from them
(:mod:`._recover`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import json
import os
import time
from collections.abc import Mapping
from typing import IO, Any

import cloudpickle

from ..._shared._storage_path import open_experiment_file
from ._storage import trim_torn_tail, write_bytes_atomic, writing
from ._syncer import Syncer

__all__ = [
    "HEADER_FILE",
    "JOURNAL_FILE",
    "SEARCHER_FILE",
    "Header",
    "Journal",
    "JournalCheckpoint",
    "TrialRecord",
    "Unsaved",
    "check_not_running",
    "dumps_b64",
    "flat_keys",
    "fold_journal",
    "loads_b64",
    "make_header",
    "pickle_leniently",
    "read_header",
    "read_journal",
    "read_searcher_state",
    "write_header",
    "write_searcher_state",
]

HEADER_FILE = "tuner.pkl"
JOURNAL_FILE = "experiment_state.jsonl"
SEARCHER_FILE = "searcher_state.pkl"
FORMAT = "actorrt.tune.experiment/1"


class Unsaved:
    """Stands in for a value that could not be pickled (an actor ref, an open file).

    Attributes:
        where: the value's path in its dict (``"data/ref"``).
        why: the pickling error.
    """

    def __init__(self, where: str, why: str) -> None:
        self.where = where
        self.why = why

    def __repr__(self) -> str:
        return f"<unsaved value at {self.where!r}: {self.why}>"


def _placeholders(value: Any, where: str) -> Any:
    """``value`` with every part that does not pickle replaced by an :class:`Unsaved`."""
    try:
        cloudpickle.dumps(value)
        return value
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
    if isinstance(value, dict):
        return {k: _placeholders(v, f"{where}/{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_placeholders(v, f"{where}/{i}" if where else str(i)) for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    return Unsaved(where, why)


def pickle_leniently(value: Any) -> bytes:
    """cloudpickle ``value``; parts of dicts and lists that cannot be pickled are stored as
    :class:`Unsaved` placeholders instead of failing the whole."""
    try:
        return bytes(cloudpickle.dumps(value))
    except Exception:
        return bytes(cloudpickle.dumps(_placeholders(value, "")))


def dumps_b64(value: Any) -> str:
    """``value`` pickled leniently, as base64 text for a JSON line."""
    return base64.b64encode(pickle_leniently(value)).decode("ascii")


def loads_b64(text: str) -> Any:
    """The value :func:`dumps_b64` stored."""
    return cloudpickle.loads(base64.b64decode(text))


# ---------------------------------------------------------------------- the header


@dataclasses.dataclass
class Header:
    """What ``tuner.pkl`` holds. The configs stay pickled until a restore asks for them, so
    that reading a header never runs user code."""

    trainable_name: str
    tag: str
    param_space: bytes | None
    param_keys: list[str]
    tune_config: bytes | None
    run_config: bytes | None
    unsaved: dict[str, str]  # piece -> why it could not be saved
    created: float


def flat_keys(space: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The ``/``-joined paths of a param space's leaves (a grid marker is a leaf)."""
    keys: list[str] = []
    for key, value in space.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and not (len(value) == 1 and "grid_search" in value):
            keys.extend(flat_keys(value, f"{name}/"))
        else:
            keys.append(name)
    return keys


def _try_pickle(value: Any, piece: str, unsaved: dict[str, str]) -> bytes | None:
    try:
        return bytes(cloudpickle.dumps(value))
    except Exception as exc:
        unsaved[piece] = f"{type(exc).__name__}: {exc}"
        return None


def make_header(
    trainable_name: str,
    tag: str,
    param_space: dict[str, Any],
    tune_config: Any,
    run_config: Any,
) -> Header:
    """Pickle the experiment's definition now (before the controller changes the searcher
    and scheduler it holds)."""
    unsaved: dict[str, str] = {}
    run_blob = _try_pickle(run_config, "run_config", unsaved)
    if run_blob is None and getattr(run_config, "callbacks", None):
        # Callbacks often hold what does not pickle (open files, clients): keep the rest.
        run_blob = _try_pickle(
            dataclasses.replace(run_config, callbacks=None), "run_config (without callbacks)",
            unsaved,
        )
        if run_blob is not None:
            unsaved["callbacks"] = unsaved.pop("run_config")
    return Header(
        trainable_name=trainable_name,
        tag=tag,
        param_space=pickle_leniently(param_space),
        param_keys=flat_keys(param_space),
        tune_config=_try_pickle(tune_config, "tune_config", unsaved),
        run_config=run_blob,
        unsaved=unsaved,
        created=time.time(),
    )


def write_header(experiment_path: str, header: Header) -> None:
    """Write ``tuner.pkl`` atomically."""
    data = {"format": FORMAT, **dataclasses.asdict(header)}
    write_bytes_atomic(os.path.join(experiment_path, HEADER_FILE), cloudpickle.dumps(data))


def read_header(experiment_path: str) -> Header:
    """Read ``tuner.pkl``.

    Raises:
        ValueError: the file is not a header this version wrote.
        PermissionError: it is a link, another user's, or writable by others.
    """
    path = os.path.join(experiment_path, HEADER_FILE)
    try:
        f = open_experiment_file(path, "the experiment header")
    except PermissionError:
        raise  # not this user's alone: never unpickled
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({type(exc).__name__}: {exc})") from exc
    with f:
        try:
            data = cloudpickle.load(f)
        except Exception as exc:
            raise ValueError(f"{path} cannot be read ({type(exc).__name__}: {exc})") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path} is not an actorrt experiment header ({FORMAT}): found {found!r}")
    fields = {f.name for f in dataclasses.fields(Header)}
    return Header(**{k: v for k, v in data.items() if k in fields})


# ---------------------------------------------------------------------- the journal


class Journal:
    """The append-only event log of an experiment (see the module docstring).

    Args:
        experiment_path: the experiment folder.
        fresh: start a new journal (a new experiment); else append to the existing one,
            after cutting off a torn last line.
        elapsed: the experiment's running time before this run (a restore's).
        lines: how many lines the journal already holds.
    """

    def __init__(
        self, experiment_path: str, *, fresh: bool, elapsed: float = 0.0, lines: int = 0
    ) -> None:
        self.path = os.path.join(experiment_path, JOURNAL_FILE)
        # Opened without truncating, and locked, before anything is changed.
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        try:
            _lock(self._file, experiment_path)
        except BaseException:
            self._file.close()
            raise
        if fresh:
            self._file.truncate(0)
        else:
            trim_torn_tail(self.path)
        self._base = elapsed
        self._started = time.monotonic()
        self.lines = 0 if fresh else lines
        self._syncer = Syncer(self._file.fileno())

    def elapsed(self) -> float:
        """The experiment's running time, over every run, in seconds."""
        return self._base + time.monotonic() - self._started

    def append(
        self, event: str, *, durable: bool = False, durable_soon: bool = False, **fields: Any
    ) -> None:
        """Write one event as one line and flush it (a killed process loses none). With
        ``durable``, also ``fsync`` it now, so that a machine crash cannot take it back
        (checkpoints: an older one may be deleted next); with ``durable_soon``, a helper
        thread ``fsync``-s it right after, off the caller's loop (trial ends)."""
        if self._file is None:
            return
        line = {"event": event, "t": round(self.elapsed(), 3), **fields}
        with writing(self.path, "append to the journal"):
            self._file.write(json.dumps(line, default=repr) + "\n")
            self._file.flush()
            if durable:
                os.fsync(self._file.fileno())
        if durable_soon and not durable:
            self._syncer.request()
        self.lines += 1

    def close(self) -> None:
        if self._file is not None:
            self._syncer.close()  # no fsync of this descriptor is left running
            with contextlib.suppress(OSError):
                os.fsync(self._file.fileno())
            self._file.close()
            self._file = None


def _lock(file: IO[str], experiment_path: str) -> None:
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RuntimeError(
            f"the experiment in {experiment_path!r} is running in another process (it holds "
            f"the lock on {JOURNAL_FILE}); wait for it to end, or stop it, before running or "
            "restoring this experiment"
        ) from None


def check_not_running(experiment_path: str) -> None:
    """Raise ``RuntimeError`` when another process runs the experiment now."""
    path = os.path.join(experiment_path, JOURNAL_FILE)
    if not os.path.exists(path):
        return
    with open(path, "a", encoding="utf-8") as f:
        _lock(f, experiment_path)  # released when the file closes


def read_journal(experiment_path: str) -> list[dict[str, Any]]:
    """Every event of the journal, in order. A torn last line is skipped.

    Raises:
        ValueError: a line other than the last is not UTF-8 text or not a JSON object.
    """
    path = os.path.join(experiment_path, JOURNAL_FILE)
    with open_experiment_file(path, "the experiment journal") as f:
        raw_lines = f.read().split(b"\n")
    events: list[dict[str, Any]] = []
    last = max((i for i, raw in enumerate(raw_lines) if raw.strip()), default=-1)
    for i, raw in enumerate(raw_lines):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
            event = json.loads(line)
        except UnicodeDecodeError as exc:
            if i == last:
                break  # cut short by a crash, inside a character
            raise ValueError(
                f"{path}: line {i + 1} is not UTF-8 text (byte {raw[exc.start]:#04x} at "
                f"column {exc.start + 1}): the journal is damaged; restore a copy of it, or "
                "remove it and tuner.pkl to start the experiment over"
            ) from None
        except json.JSONDecodeError:
            if i == last:
                break  # cut short by a crash
            raise ValueError(f"{path}: line {i + 1} is not JSON: {line[:80]!r}") from None
        if not isinstance(event, dict) or "event" not in event:
            raise ValueError(f"{path}: line {i + 1} is not a journal event: {line[:80]!r}")
        events.append(event)
    return events


@dataclasses.dataclass
class JournalCheckpoint:
    """A checkpoint the journal recorded, and where the trial's logs ended then."""

    dirname: str
    score: float
    iteration: int
    time_total_s: float
    result_bytes: int
    progress_bytes: int


@dataclasses.dataclass
class TrialRecord:
    """One trial, as the journal tells it."""

    trial_id: str
    trial_name: str
    dirname: str
    config: dict[str, Any]
    status: str | None = None  # TERMINATED, ERROR, or None: not finished
    error: str | None = None  # the pickled exception (base64), when it could be pickled
    error_type: str = ""
    error_text: str = ""
    checkpoints: list[JournalCheckpoint] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class JournalState:
    """The journal folded: the trials in creation order, the running time, the line count,
    and the trials that ended at each line (for the searcher's replay)."""

    trials: list[TrialRecord]
    elapsed: float
    lines: int
    ends: list[tuple[int, str]]  # (line number, trial id)


def fold_journal(events: list[dict[str, Any]]) -> JournalState:
    """Replay the journal's events into one record per trial."""
    trials: dict[str, TrialRecord] = {}
    ends: list[tuple[int, str]] = []
    elapsed = 0.0
    for line, event in enumerate(events, start=1):
        elapsed = max(elapsed, float(event.get("t", 0.0)))
        kind = event["event"]
        if kind == "trial":
            trials[event["id"]] = TrialRecord(
                trial_id=event["id"],
                trial_name=event["name"],
                dirname=event["dir"],
                config=loads_b64(event["config"]),
            )
            continue
        record = trials.get(event.get("id", ""))
        if record is None:
            continue  # an experiment-level event (start, finished, interrupted)
        if kind == "checkpoint":
            record.checkpoints.append(
                JournalCheckpoint(
                    dirname=event["dir"],
                    score=float(event["score"]),
                    iteration=int(event["iteration"]),
                    time_total_s=float(event["time_total_s"]),
                    result_bytes=int(event["result_bytes"]),
                    progress_bytes=int(event["progress_bytes"]),
                )
            )
        elif kind == "config":
            record.config = loads_b64(event["config"])
        elif kind == "end":
            record.status = event["status"]
            record.error = event.get("error")
            record.error_type = event.get("error_type", "")
            record.error_text = event.get("error_text", "")
            ends.append((line, record.trial_id))
    return JournalState(list(trials.values()), elapsed, len(events), ends)


# ---------------------------------------------------------------------- the searcher


def write_searcher_state(experiment_path: str, state: bytes, journal_lines: int) -> None:
    """Write the searcher's pickled state, tagged with the journal's line count."""
    blob = cloudpickle.dumps({"journal_lines": journal_lines, "state": state})
    write_bytes_atomic(os.path.join(experiment_path, SEARCHER_FILE), blob)


def read_searcher_state(experiment_path: str) -> tuple[bytes, int] | None:
    """The searcher's pickled state and the journal line count it is current to, or
    ``None`` when none was saved."""
    path = os.path.join(experiment_path, SEARCHER_FILE)
    try:
        f = open_experiment_file(path, "the searcher state")
    except FileNotFoundError:
        return None
    with f:
        try:
            data = cloudpickle.load(f)
        except Exception as exc:
            raise ValueError(f"{path} cannot be read ({type(exc).__name__}: {exc})") from exc
    return bytes(data["state"]), int(data["journal_lines"])
