"""numpy arrays between real processes: every layout arrives intact, large ones go from
actor to actor directly, what a caller may change and when, and memory stays bounded."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from conftest import rss_mib, until_direct

import actorrt

pytestmark = pytest.mark.timeout(120)

BIG = 8 << 20  # above every threshold: out of band, a buffer of its own, kept for reuse


@actorrt.actor(process=True, num_cpus=0.01)
class Store:
    def __init__(self) -> None:
        self.kept: list[np.ndarray] = []

    def echo(self, value: Any) -> Any:
        return value

    def layout(self, array: np.ndarray) -> tuple[str, tuple[int, ...], bool, bool]:
        return array.dtype.str, array.shape, bool(array.flags.f_contiguous), bool(
            array.flags.writeable
        )

    def keep(self, array: np.ndarray) -> int:
        self.kept.append(array)
        return len(self.kept)

    def sums(self) -> list[int]:
        return [int(array.sum()) for array in self.kept]

    def fresh(self, nbytes: int, value: int) -> np.ndarray:
        return np.full(nbytes, value, dtype=np.uint8)

    def total(self, array: np.ndarray) -> int:
        return int(array.sum())

    def rss(self) -> float:
        return rss_mib()


@actorrt.actor(process=True, num_cpus=0.01)
class Sender:
    async def send(self, store: Any, nbytes: int, value: int) -> int:
        array = np.full(nbytes, value, dtype=np.uint8)
        total: int = await store.total(array)
        return total

    async def fetch(self, store: Any, nbytes: int, value: int) -> int:
        array = await store.fresh(nbytes, value)
        return int(array.sum())

    def pid(self) -> int:
        return os.getpid()


def layouts(n: int) -> list[np.ndarray]:
    """Arrays of ``n`` elements or so in every layout the wire has a rule for."""
    c = np.arange(n, dtype=np.float64).reshape(-1, 16)
    read_only = np.arange(n, dtype=np.int32)
    read_only.flags.writeable = False
    return [
        c,
        np.asfortranarray(c),
        c[:, ::3],  # strided: neither C nor Fortran
        c.T,  # Fortran by transposing
        read_only,
        np.arange(n, dtype=">i4"),  # big-endian
        (np.arange(n) % 2).astype(bool),
        np.arange(n, dtype=np.complex64),
        np.arange(n).astype("M8[s]"),
        np.zeros((0, 7), dtype=np.float32),
        np.full((), 2.5),  # zero-dimensional
    ]


@pytest.mark.parametrize("n", [64, BIG // 8], ids=["inline", "large"])
async def test_arrays_of_every_layout_round_trip(actorrt_runtime: actorrt.Runtime, n: int) -> None:
    store = await Store.spawn()
    for array in layouts(n):
        back = await store.echo(array)
        assert back.dtype == array.dtype and back.shape == array.shape, array.dtype
        np.testing.assert_array_equal(back, array)
        assert back.flags.writeable  # a received array is the receiver's own
        dtype, shape, fortran, writeable = await store.layout(array)
        assert (dtype, shape, writeable) == (array.dtype.str, array.shape, True)
        if array.flags.f_contiguous and not array.flags.c_contiguous:
            assert fortran and back.flags.f_contiguous  # sent in its own order, not copied to C


async def test_an_asks_array_may_change_once_answered_and_a_tells_at_once(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    store = await Store.spawn()
    array = np.ones(BIG, dtype=np.uint8)
    assert await store.keep(array) == 1
    array[:] = 2  # answered: the actor holds bytes of its own
    store.keep.tell(array)
    array[:] = 3  # at once: a tell goes as the array was when it was sent
    assert await store.sums() == [BIG, 2 * BIG]


async def test_large_arrays_go_from_actor_to_actor_directly(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    store, sender = await Store.spawn(), await Sender.spawn()
    assert await store.rss() > 0 and await sender.pid() != os.getpid()
    await until_direct(actorrt_runtime, lambda: sender.send(store, 1 << 10, 1))
    before = actorrt_runtime.relayed()["calls"]
    for value in (1, 2, 3):
        assert await sender.send(store, BIG, value) == value * BIG
        assert await sender.fetch(store, BIG, value) == value * BIG
    assert actorrt_runtime.relayed()["calls"] == before  # none through the driver


async def test_memory_stays_bounded_over_many_large_calls(actorrt_runtime: actorrt.Runtime) -> None:
    store = await Store.spawn()
    nbytes, calls = 16 << 20, 30  # 480 MiB each way in all
    array = np.ones(nbytes, dtype=np.uint8)
    for value in (1, 2):  # warm: both sides hold their kept buffers
        assert await store.total(array) == nbytes
        assert int((await store.fresh(nbytes, value)).sum()) == value * nbytes
    driver, worker = rss_mib(), await store.rss()
    for i in range(calls):
        assert await store.total(array) == nbytes
        assert int((await store.fresh(nbytes, i % 200)).sum()) == (i % 200) * nbytes
    driver_grew, worker_grew = rss_mib() - driver, await store.rss() - worker
    # A leaked buffer per call would be 30 x 16 MiB; at most a buffer or two more is kept.
    assert driver_grew < 2.5 * 16, f"the driver grew by {driver_grew:.0f} MiB"
    assert worker_grew < 2.5 * 16, f"the worker grew by {worker_grew:.0f} MiB"
