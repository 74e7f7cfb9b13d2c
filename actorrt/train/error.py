"""What ``fit()`` raises when training fails (Ray Train V2's exception types).

- ``TrainingFailedError``: the base; catch it to catch either kind below. A
  ``RuntimeError``, and a branch of ``actorrt.ActorrtError``, the root of the package's
  one exception tree.
- ``WorkerGroupError``: workers failed more often than ``FailureConfig`` allows;
  ``worker_failures`` maps each failed rank of the last attempt to its exception (whose
  ``remote_traceback`` holds the traceback text from the worker).
- ``ControllerError``: the coordinating side itself failed (not a worker);
  ``controller_failure`` is its exception.

Each failed rank's traceback is logged once by the coordinator when its attempt fails
(``[Rank r]`` first), so the exception's own message stays one line per distinct error.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping

import actorrt


class TrainingFailedError(RuntimeError, actorrt.ActorrtError):
    """Raised by ``fit()`` when training fails: a ``WorkerGroupError`` or a
    ``ControllerError``.

    A ``RuntimeError``, as Ray's is, and an ``actorrt.ActorrtError``: catching the root
    of actorrt's exception tree catches it too."""


class WorkerGroupError(TrainingFailedError):
    """Workers of the gang failed, and ``FailureConfig`` allows no more restarts.

    Args:
        error_message: what failed, one line per distinct error with the ranks that hit it.
        worker_failures: each failed rank of the last attempt and its exception.
    """

    def __init__(self, error_message: str, worker_failures: Mapping[int, BaseException]) -> None:
        super().__init__("Training failed due to worker errors:\n" + error_message)
        self._error_message = error_message
        self.worker_failures: dict[int, BaseException] = dict(worker_failures)

    def __reduce__(self) -> tuple[type, tuple[str, dict[int, BaseException]]]:
        return (type(self), (self._error_message, self.worker_failures))


class ControllerError(TrainingFailedError):
    """The coordinator failed while running the gang (not a worker).

    Args:
        controller_failure: the coordinator's exception.
    """

    def __init__(self, controller_failure: BaseException) -> None:
        super().__init__(
            "Training failed due to controller error:\n"
            f"{type(controller_failure).__name__}: {controller_failure}"
        )
        self.controller_failure = controller_failure

    def __reduce__(self) -> tuple[type, tuple[BaseException]]:
        return (type(self), (self.controller_failure,))


def summary(failures: Mapping[int, BaseException]) -> str:
    """One line per distinct error, naming the ranks that raised it:
    ``[Rank 0, 2] ValueError: bad batch``."""
    groups: dict[str, list[int]] = {}
    for rank in sorted(failures):
        error = failures[rank]
        line = f"{type(error).__name__}: {error}".splitlines()[0] if str(error) else (
            type(error).__name__
        )
        groups.setdefault(line, []).append(rank)
    return "\n".join(
        f"[Rank {', '.join(map(str, ranks))}] {line}" for line, ranks in groups.items()
    )


def worker_traceback(error: BaseException) -> str:
    """The worker-side traceback of ``error`` (the remote one when it came from a worker
    process), else its local one."""
    remote = getattr(error, "remote_traceback", None)
    if isinstance(remote, str) and remote.strip():
        # Relayed through another process, the text nests the original under a note:
        # the innermost one is the worker's own.
        return _user_frames(remote.rsplit(_NOTE, 1)[-1].rstrip())
    return "".join(traceback.format_exception_only(error)).rstrip()


_NOTE = "Remote traceback:\n"  # how actorrt's wire notes a remote traceback
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # actorrt/
_PLUMBING = (_PACKAGE + os.sep, os.path.join("concurrent", "futures") + os.sep)


def _user_frames(text: str) -> str:
    """A traceback's text without the frames of the runtime that called the training
    function (actorrt's own files, the thread pool): the user's frames stay."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.startswith('  File "'):
            path = line[len('  File "'):].split('"', 1)[0]
            skipping = any(part in path for part in _PLUMBING)
        elif not line.startswith("    "):
            skipping = False  # the header, the exception line, chained-cause text
        if not skipping:
            out.append(line)
    if not any(line.startswith('  File "') for line in out):  # nothing of the user's
        out = [line for line in out if not line.startswith("Traceback (most recent")]
    return "\n".join(out)


def tracebacks(failures: Mapping[int, BaseException]) -> str:
    """Every failed rank's traceback, each line prefixed with ``[Rank r]``."""
    blocks = []
    for rank in sorted(failures):
        text = worker_traceback(failures[rank])
        blocks.append("\n".join(f"[Rank {rank}] {line}" for line in text.splitlines()))
    return "\n".join(blocks)
