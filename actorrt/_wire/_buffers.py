"""Memory for large frames: the buffer one is received into, and the snapshot of a buffer
that a message must send as it was when it was sent.

* **Receiving.** A frame above 64 KiB is read straight into a buffer of its own
  (:func:`receive_buffer`), which backs the arrays decoded from it. A ``bytearray`` would be
  zero-filled and then faulted in 4 KiB at a time as the frame arrives (about 60 ms for
  100 MB); numpy's allocation (where numpy is loaded) or an anonymous private mapping asks
  the kernel for huge pages instead. Above :data:`RECYCLE_ABOVE` the process also keeps its
  latest :data:`KEEP` such buffers, and the next large frame that fits goes into one of them
  once nothing refers to it any more (no array decoded from it is alive): memory already
  faulted in, no fault at all. Two, because the previous call's arguments may still be
  held while the next call's frame arrives. So a process holds at most two buffers beyond
  what its values hold, of at most :data:`RECYCLE_UP_TO` bytes each.
* **Snapshots.** An ask's arrays are sent from their own memory; a tell's or a reply's
  writable ones are copied first (:func:`snapshot`), into a buffer kept and reused the same
  way once the transport has written it.

Which buffer is free is read from its reference count: the list that keeps it and the
caller's name are its only references when no memoryview, array or transport holds it.
"""

from __future__ import annotations

import mmap
import sys
from typing import Any, Final

__all__ = ["KEEP", "RECYCLE_ABOVE", "RECYCLE_UP_TO", "receive_buffer", "snapshot"]

RECYCLE_ABOVE: Final = 1 << 20  # buffers at least this large are kept for the next frame
RECYCLE_UP_TO: Final = 256 << 20  # and at most this large

KEEP: Final = 2  # buffers of each kind kept: the last call's may still be in use

# The latest buffers of each kind, newest last, kept for reuse. Only the loop threads of
# this process touch them, each step (pop, append, insert) atomic.
_received: list[Any] = []
_snapshots: list[Any] = []


def _reusable(kept: list[Any], nbytes: int) -> Any:
    """A kept buffer that nothing else refers to and that fits ``nbytes`` (not more than
    twice as large: a small frame would pin a large buffer), taken out of ``kept``; else
    ``None``."""
    for _ in range(len(kept)):
        try:
            buf = kept.pop(0)
        except IndexError:
            return None
        # Two references when it is free: ``buf`` here and getrefcount's argument.
        if sys.getrefcount(buf) == 2 and nbytes <= len(buf) <= 2 * nbytes:
            return buf
        kept.append(buf)  # in use (or not this size): kept, as the newest
    return None


def _fresh(nbytes: int) -> Any:
    """A writable buffer of ``nbytes`` that the kernel fills with huge pages where it can."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # loaded already: a process that handles arrays has it
        return numpy.empty(nbytes, dtype=numpy.uint8)
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):  # Linux
        buf.madvise(mmap.MADV_HUGEPAGE)
    return buf


def _kept(kept: list[Any], nbytes: int) -> memoryview:
    """A buffer of exactly ``nbytes``: a kept one when one is free and fits, else a fresh
    one, kept in place of the oldest."""
    buf = _reusable(kept, nbytes)
    if buf is None:
        buf = _fresh(nbytes)
        del kept[: max(0, len(kept) - KEEP + 1)]
    kept.append(buf)
    return memoryview(buf)[:nbytes]


def receive_buffer(nbytes: int) -> Any:
    """A writable buffer of ``nbytes`` for one large frame (see the module)."""
    if RECYCLE_ABOVE <= nbytes <= RECYCLE_UP_TO:
        return _kept(_received, nbytes)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        return numpy.empty(nbytes, dtype=numpy.uint8)
    return bytearray(nbytes) if nbytes < RECYCLE_ABOVE else _fresh(nbytes)


def snapshot(buffers: list[Any]) -> list[Any]:
    """``buffers`` (out-of-band buffers from :meth:`~actorrt._wire._codec.Codec.pack`, each
    a flat memoryview of bytes) with each writable one replaced by a copy, for a message
    that must go as it was when it was sent though its bytes are written later (a tell, a
    reply). An ask's are sent from the arrays' own memory, which must not change until the
    ask is answered (``docs/wire.md``)."""
    if all(buf.readonly for buf in buffers):
        return buffers
    copies = []
    for buf in buffers:
        if not buf.readonly:
            nbytes = buf.nbytes
            if RECYCLE_ABOVE <= nbytes <= RECYCLE_UP_TO:
                copy = _kept(_snapshots, nbytes)
            else:
                copy = memoryview(_fresh(nbytes))
            copy[:] = buf if buf.format == "B" else buf.cast("B")
            buf = copy.toreadonly()
        copies.append(buf)
    return copies
