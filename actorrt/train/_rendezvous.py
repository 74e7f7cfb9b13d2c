"""Where one attempt's ranks meet: ``train.report`` and ``actorrt.train.collective``.

Rank 0's worker holds the attempt's ``Meetings`` (its actor answers on its event loop
while its thread runs the training function). The ``k``-th collective call of every
rank (a report, a barrier, a broadcast) is meeting ``k``: each rank's call waits until
every rank has arrived, then returns rank 0's value. Instead of leaving the others
waiting for ever (as Ray would), a meeting fails with an error naming the ranks when one
rank's function returns before reaching it, or when ranks make different calls there
(one reports while another waits at a barrier).
"""

from __future__ import annotations

import asyncio
from typing import Any


class Meetings:
    """The meetings of one attempt of ``world_size`` ranks (used on one event loop)."""

    def __init__(self, world_size: int) -> None:
        self._world = world_size
        self._arrived: dict[int, dict[int, Any]] = {}
        self._met: dict[int, asyncio.Future[Any]] = {}
        self._ended: dict[int, int] = {}  # rank -> meetings it reached before ending
        self._what: dict[int, str] = {}  # meeting -> the call that opened it

    def _meeting(self, number: int) -> asyncio.Future[Any]:
        if number not in self._met:
            self._met[number] = asyncio.get_running_loop().create_future()
        return self._met[number]

    async def meet(
        self, rank: int, number: int, value: Any, what: str, gather: bool = False
    ) -> Any:
        """Rank ``rank``'s ``number``-th collective call (``what`` names it); returns
        rank 0's value once every rank has arrived (with ``gather``, every rank's
        values in rank order)."""
        met = self._meeting(number)
        first = self._what.setdefault(number, what)
        if what != first and not met.done():
            met.set_exception(RuntimeError(
                f"rank {rank} called {what} where another rank called {first} (collective "
                f"call {number + 1} of this attempt): every rank must call train.report and "
                "train.collective functions the same number of times, in the same order"
            ))
        here = self._arrived.setdefault(number, {})
        here[rank] = value
        if len(here) == self._world and not met.done():
            met.set_result([here[r] for r in range(self._world)])
            del self._arrived[number]
        self._check(number)
        values = await asyncio.shield(met)
        return values if gather else values[0]

    def ended(self, rank: int, meetings: int) -> None:
        """Rank ``rank``'s training function returned after ``meetings`` calls."""
        self._ended[rank] = meetings
        for number in list(self._met):
            self._check(number)

    def _check(self, number: int) -> None:
        met = self._met[number]
        if met.done():
            return
        gone = sorted(r for r, reached in self._ended.items() if reached <= number)
        if gone:
            met.set_exception(RuntimeError(
                f"{self._what[number]} (collective call {number + 1} of this attempt) "
                f"waits for every rank, but rank(s) {gone} returned from the training "
                f"function after {self._ended[gone[0]]} such call(s): every rank must "
                "call train.report and train.collective functions the same number of "
                "times, in the same order"
            ))
