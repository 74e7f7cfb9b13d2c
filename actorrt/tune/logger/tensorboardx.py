"""The TensorBoard writer ``TBXLoggerCallback`` (Ray's ``ray.tune.logger.tensorboardx``).

CSV (``progress.csv``) and JSON lines (``result.json``) are written for every trial by the
experiment's storage itself; TensorBoard event files are written by ``TBXLoggerCallback``,
added on its own when ``tensorboardX`` is installed.

The TensorBoard writer encodes and writes events on a thread of its own (a fraction of a
millisecond per result, which should not stall the controller's event loop, where trials'
reports wait for their answers): hooks only queue what is to be written. It imports
``tensorboardX`` (which imports torch when that is installed: seconds, once per process)
before any trial runs, on a thread while the loop awaits it (``CallbackRunner.prepare``), so the
loop keeps serving and the experiment's time budget keeps counting; the writer thread starts
only after that import is complete. A module the loop imports meanwhile waits on Python's
per-module import lock until the thread has finished it.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import os
import queue
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._controller._storage import flatten, full_disk_hint
from ..callback import DISABLE_AUTO_LOGGERS_ENV, Callback, importable

if TYPE_CHECKING:
    from ..experiment.trial import Trial

from .logger import LoggerCallback

__all__ = ["TBXLoggerCallback", "default_callbacks", "hparams_of", "scalars"]

logger = logging.getLogger("actorrt.tune")

# Result fields that are not worth a TensorBoard curve (Ray leaves out the same ones).
_NOT_PLOTTED = frozenset(
    {"config", "pid", "timestamp", "time_total_s", "training_iteration", "done"}
)
_TAG_PREFIX = "ray/tune/"  # the tags Ray writes, so dashboards and scripts carry over
_END_WAIT_S = 30.0
_FLUSH_AFTER_S = 2.0  # flush (and fsync) files at most this long after their last write



def scalars(result: Mapping[str, Any]) -> dict[str, float]:
    """The values of ``result`` that make TensorBoard curves: numbers (bools as 0/1),
    nested dicts flattened to ``a/b``, NaN and Tune's bookkeeping fields left out."""
    flat = flatten({k: v for k, v in result.items() if k not in _NOT_PLOTTED})
    out: dict[str, float] = {}
    for key, value in flat.items():
        if isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
            out[key] = float(value)
    return out


def hparams_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config values TensorBoard's hyperparameter view can show (numbers, strings)."""
    flat = flatten(config)
    return {k: v for k, v in flat.items() if isinstance(v, bool | int | float | str)}


class TBXLoggerCallback(LoggerCallback):
    """Writes each trial's results as TensorBoard event files in its folder, through
    ``tensorboardX`` (Ray Tune's ``TBXLoggerCallback``).

    Every numeric result value becomes a scalar tagged ``tune/<name>`` (nested dicts as
    ``tune/a/b``) at step ``timesteps_total`` when reported, else ``training_iteration``;
    when a trial ends, its config and last values are written for TensorBoard's
    hyperparameter view. ``tensorboard --logdir <experiment folder>`` shows every trial.

    Tune adds one when ``tensorboardX`` is installed and ``RunConfig(callbacks)`` holds
    none; ``ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1`` (or Ray's
    ``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1``) turns that off.

    Files are written on a thread of the callback's own, and are complete when the
    experiment ends. An error writing them (a full disk) is raised from the next hook, so
    it is reported like any callback's failure, and the experiment goes on.

    Raises:
        ImportError: ``tensorboardX`` is not installed (``pip install 'actorrt[tune]'``).
    """

    def __init__(self) -> None:
        if not importable("tensorboardX"):
            raise ImportError(
                "TBXLoggerCallback writes TensorBoard files through tensorboardX, which is "
                "not installed: pip install 'actorrt[tune]'"
            )
        self._queue: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._writers: _EventWriters | None = None
        self._error: BaseException | None = None
        self._last: dict[str, dict[str, float]] = {}

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        if self._writers is None:
            self._writers = _EventWriters()  # not prepared off the loop: import it here

    def _prepare_off_loop(self) -> None:
        """Import tensorboardX (and torch), on a thread of ``CallbackRunner.prepare``."""
        if self._writers is None:
            self._writers = _EventWriters()

    def _put(self, item: tuple[Any, ...]) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(
                "TBXLoggerCallback could not write the TensorBoard event files "
                f"(events.out.tfevents.* in the trial folders): {error}{full_disk_hint(error)}"
            ) from error
        if self._thread is None:
            self.setup()
            self._thread = threading.Thread(
                target=self._write_loop, args=(self._writers,), name="actorrt-tune-tbx",
                daemon=True,
            )
            self._thread.start()
        self._queue.put(item)

    def log_trial_start(self, trial: Trial) -> None:
        self._put(("start", trial.trial_id, trial.path))

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        step = result.get("timesteps_total") or result.get("training_iteration") or 0
        values = scalars(result)
        self._last[trial.trial_id] = values
        self._put(("result", trial.trial_id, trial.path, int(step), values, time.time()))

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        last = self._last.pop(trial.trial_id, None)
        hparams = hparams_of(trial.config) if last else None
        self._put(("end", trial.trial_id, trial.path, hparams, last))

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        thread = self._thread
        if thread is None:
            return
        self._queue.put(None)
        thread.join(_END_WAIT_S)
        self._thread = None
        if thread.is_alive():
            logger.warning(
                "tune: the TensorBoard writer did not finish within %.0f s; its files may "
                "lack the last results", _END_WAIT_S,
            )
        elif self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"TBXLoggerCallback could not write: {error}") from error

    # ---------------------------------------------------------- the writer thread

    def _write_loop(self, writer: _EventWriters) -> None:
        dirty = False
        while True:
            try:
                item = self._queue.get(timeout=_FLUSH_AFTER_S if dirty else None)
            except queue.Empty:
                item = ()  # idle: flush what was written
            if item is None:
                break
            try:
                if item:
                    writer.handle(item)
                    dirty = True
                else:
                    writer.flush()
                    dirty = False
            except Exception as exc:
                self._error = exc
        try:
            writer.close()
        except Exception as exc:
            self._error = exc


@functools.cache
def _tensorboardx() -> tuple[Any, Any, Any, Any]:
    """What the writer needs of tensorboardX, imported once (seconds: it imports torch)."""
    # Everything the thread will need, imported now (hparams imports these inside).
    for module in ("tensorboardX.proto.api_pb2", "tensorboardX.proto.plugin_hparams_pb2"):
        importlib.import_module(module)
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.record_writer import RecordWriter
    from tensorboardX.summary import hparams

    return Event, Summary, RecordWriter, hparams


class _EventWriters:
    """The event files of the trials being written (writer thread only)."""

    def __init__(self) -> None:
        self.Event, self.Summary, self.RecordWriter, self.hparams = _tensorboardx()
        self.files: dict[str, Any] = {}
        self.hostname = socket.gethostname()

    def _file(self, trial_id: str, path: str) -> Any:
        record = self.files.get(trial_id)
        if record is None:
            name = f"events.out.tfevents.{time.time():.0f}.{self.hostname}"
            record = self.files[trial_id] = self.RecordWriter(os.path.join(path, name))
            self._write(record, self.Event(wall_time=time.time(), file_version="brain.Event:2"))
        return record

    def _write(self, record: Any, event: Any) -> None:
        record.write(event.SerializeToString())

    def handle(self, item: tuple[Any, ...]) -> None:
        kind, trial_id, path = item[0], item[1], item[2]
        if kind == "start":
            self._file(trial_id, path)
        elif kind == "result":
            step, values, wall_time = item[3], item[4], item[5]
            summary = self.Summary(value=[
                self.Summary.Value(tag=_TAG_PREFIX + key, simple_value=value)
                for key, value in values.items()
            ])
            self._write(
                self._file(trial_id, path),
                self.Event(wall_time=wall_time, step=step, summary=summary),
            )
        elif kind == "end":
            hparams, last = item[3], item[4]
            if hparams is not None and trial_id in self.files:
                metrics = {_TAG_PREFIX + k: v for k, v in last.items()}
                record = self.files[trial_id]
                for summary in self.hparams(hparams, metrics):
                    self._write(record, self.Event(wall_time=time.time(), summary=summary))
            record = self.files.pop(trial_id, None)
            if record is not None:
                record.close()

    def flush(self) -> None:
        for record in self.files.values():
            record.flush()

    def close(self) -> None:
        for record in self.files.values():
            record.close()
        self.files.clear()


def default_callbacks(given: Iterable[Callback]) -> list[Callback]:
    """The callbacks Tune adds on its own: the TensorBoard logger when ``tensorboardX`` is
    installed, unless one was given or an environment variable turns it off."""
    if any(os.environ.get(name, "") not in ("", "0") for name in DISABLE_AUTO_LOGGERS_ENV):
        return []
    if any(isinstance(cb, TBXLoggerCallback) for cb in given) or not importable("tensorboardX"):
        return []
    return [TBXLoggerCallback()]
