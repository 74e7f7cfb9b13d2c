"""A helper the Tune examples share: it measures how many trials run at once.

Each trial gets a ref to one ``Meter`` actor through ``param_space`` (values that are not
search domains reach the trials as they are) and calls ``enter`` when its work starts and
``leave`` when it ends. ``enter`` holds a trial until ``hold`` trials are inside, or until
every trial that is left is inside, or ``patience_s`` passes: so trials that *can* run
together do overlap, however slowly their worker processes start on a busy machine. The
meter only counts what the broker let run; it cannot make more trials run at once.
"""

from __future__ import annotations

import asyncio

import actorrt


@actorrt.actor(max_concurrency=1000)
class Meter:
    """Counts the trials inside; remembers the peak and how many waited at that moment."""

    def __init__(self, hold: int, total: int, patience_s: float = 30.0) -> None:
        self.hold = hold
        self.total = total
        self.patience_s = patience_s
        self.inside = 0
        self.left = 0
        self.peak = 0
        self.waiting_at_peak = 0
        self.changed = asyncio.Condition()

    def _enough(self) -> bool:
        return self.inside >= min(self.hold, self.total - self.left)

    async def enter(self) -> int:
        """A trial starts its work. Returns how many trials are inside when it goes on."""
        async with self.changed:
            self.inside += 1
            if self.inside > self.peak:
                self.peak = self.inside
                # This inline actor runs in the driver, where the broker's queue is visible.
                self.waiting_at_peak = len(actorrt.pending_requests())
            self.changed.notify_all()
            try:
                await asyncio.wait_for(self.changed.wait_for(self._enough), self.patience_s)
            except TimeoutError:
                pass  # fewer trials can run at once than `hold`: the peak will say so
            return self.inside

    async def leave(self) -> None:
        """A trial has finished its work."""
        async with self.changed:
            self.inside -= 1
            self.left += 1
            self.changed.notify_all()

    def report(self) -> tuple[int, int]:
        """(the most trials inside at once, how many trials waited for resources then)."""
        return self.peak, self.waiting_at_peak
