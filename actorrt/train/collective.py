"""Collective calls across the ranks of a training run (Ray Train's ``ray.train.collective``).

``barrier()`` waits until every rank has called it; ``broadcast_from_rank_zero(data)``
also hands every rank rank 0's ``data`` (small: at most 1,000 bytes pickled, as in Ray).
They work in any trainer's workers (no torch process group needed), and every rank must
make the same collective calls in the same order. Where Ray would wait for ever for a
rank that returned from the training function without making the call, the waiting
ranks' call raises ``RuntimeError`` naming that rank.

Example::

    from actorrt.train.collective import barrier, broadcast_from_rank_zero

    def train_func():
        if train.get_context().get_world_rank() == 0:
            download_data()
        barrier()                      # the others wait for the download
        run_id = broadcast_from_rank_zero(make_id() if rank == 0 else None)
"""

from __future__ import annotations

import pickle
from typing import TypeVar

from .context import current_session

__all__ = ["barrier", "broadcast_from_rank_zero"]

T = TypeVar("T")

MAX_BROADCAST_BYTES = 1000  # Ray's limit: this is for small values (flags, names, ids)


def _meet(what: str, value: bytes | None) -> bytes | None:
    session = current_session(f"collective.{what}")
    shared: bytes | None = session.meet(f"train.collective.{what}()", value)
    return shared


def barrier() -> None:
    """Wait until every rank of the run has called ``barrier()``.

    Raises:
        RuntimeError: called outside a training function, or a rank returned from the
            training function without reaching this call.
    """
    _meet("barrier", None)


def broadcast_from_rank_zero(data: T) -> T:
    """Every rank's call returns rank 0's ``data``; a barrier as well.

    Args:
        data: a small picklable value (at most 1,000 bytes pickled, as in Ray); what
            ranks other than 0 pass is ignored.

    Raises:
        ValueError: rank 0's ``data`` pickles to more than 1,000 bytes.
        RuntimeError: called outside a training function, or a rank returned from the
            training function without reaching this call.
        pickle.PicklingError, TypeError: ``data`` cannot be pickled.
    """
    session = current_session("collective.broadcast_from_rank_zero")
    payload = None
    if session.context.get_world_rank() == 0:
        payload = pickle.dumps(data)
        if len(payload) > MAX_BROADCAST_BYTES:
            raise ValueError(
                f"broadcast_from_rank_zero takes data of at most {MAX_BROADCAST_BYTES} "
                f"bytes pickled, as Ray's does; this is {len(payload)} bytes. Write larger "
                "data to a file in a shared folder and broadcast its path"
            )
    result = _meet("broadcast_from_rank_zero", payload)
    assert result is not None
    value: T = pickle.loads(result)
    return value
