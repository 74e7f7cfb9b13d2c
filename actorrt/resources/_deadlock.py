"""Deadlock detection: the reduction of docs/broker.md, in slices, and the choice of a victim.

The reduction starts from every node's and every reserved bundle's capacity minus what the
*blocked* holders hold (a holder that is not blocked is assumed to end and give everything
back; reservations only order the queue). It then lets a blocked holder *finish*, giving back
what it holds, once every wait edge it has is satisfiable: a request edge whose request the
real placement logic would grant from what is free in the reduction (or that is no longer
waiting, or waits in a group whose holder finished: it fails, unblocking its waiters), a holder
edge whose holder finished. What cannot finish is deadlocked. There are no false positives
under the model.

Cost: near-linear. Each blocked holder is captured once, each holder edge is followed once,
and requests are tested once per *shape and place* per round (every request of one shape in
one queue is granted or not alike), a round being a batch of finishes that freed something.

The check runs in slices (:data:`SLICE` units of work each, a unit being one holder, edge or
grant looked at) so the loop that drives the broker keeps serving between them. The state may
change between slices; every captured holder carries the version it had, and a result is
acted on only if every deadlocked holder is still exactly as captured (same edges, same
grants). That suffices: a set whose members kept their edges and grants is still deadlocked,
whatever the others did (they can only hold more, never free what the set waits for beyond
what the reduction already gave back).

The victim:

- an **ask cycle** among deadlocked actors that each serve one message at a time (``serial``
  edges): the newest ask in the cycle fails, whatever anyone holds;
- else the newest waiting request a deadlocked holder waits on whose failure lets the reduction
  progress (once its waiters end, some other deadlocked holder can finish, or none is left);
  if none does, the newest. A deadlock made only of asks through actors that may serve other
  messages meanwhile is not proven and is not reported.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Hashable, Iterator, Mapping, Sequence

from ._deadlock_sim import Key, Log, Sim, free_total, request_key
from ._deadlock_text import (
    MAX_LISTED,
    ask_cycle_message,
    describe_holdings,
    describe_request,
    resource_message,
)
from ._pool import ResourcePool
from ._state import WAITING, Grant, Group, Holder, Request

__all__ = [
    "SLICE", "AskCycle", "Deadlock", "Found", "Stale", "check", "describe_holdings",
    "describe_request",
]  # fmt: skip

SLICE = 2500  # units of work per slice (a few milliseconds of CPU at most)


class Deadlock:
    """A proven resource deadlock: the request to fail and the message that explains it."""

    def __init__(self, victim: Request, message: str, holders: tuple[Hashable, ...]) -> None:
        self.victim = victim
        self.message = message
        self.holders = holders


class AskCycle:
    """A proven cycle of asks: ``waiter``'s ask to ``target`` fails with ``message``."""

    def __init__(
        self, waiter: Hashable, target: Hashable, message: str, cycle: tuple[Hashable, ...]
    ) -> None:
        self.waiter = waiter
        self.target = target
        self.message = message
        self.cycle = cycle


class Stale:
    """The state changed under a finding before it could be acted on: check again."""


Found = Deadlock | AskCycle | Stale


class _State:
    """The reduction's records, kept flat: integers in a few lists, indexed by the captured
    holder's number. The check must not hand the garbage collector tens of thousands of new
    containers at 10,000 waiters (a full collection would stall the loop far longer than the
    check itself)."""

    def __init__(self) -> None:
        self.ids: list[Hashable] = []
        self.index: dict[Hashable, int] = {}
        self.holder: list[Holder] = []
        self.version: list[int] = []
        self.grants: list[Grant] = []  # every captured grant, holder after holder
        self.grant_end: list[int] = []  # holder i's grants: grants[grant_end[i-1]:grant_end[i]]
        self.count: list[int] = []  # unsatisfied edges
        # Reverse holder edges (target -> its blocked askers) as linked lists of edge numbers.
        self.head: list[int] = []
        self.next: list[int] = []
        self.source: list[int] = []
        # shape-and-place -> (a request of it, its waiters, one entry per edge)
        self.keys: dict[Key, tuple[Request, list[int]]] = {}

    def held(self, i: int) -> list[Grant]:
        return self.grants[self.grant_end[i - 1] if i else 0 : self.grant_end[i]]

    def askers(self, i: int) -> list[int]:
        out = []
        e = self.head[i]
        while e >= 0:
            out.append(self.source[e])
            e = self.next[e]
        return out


def check(
    holders: Mapping[Hashable, Holder],
    groups: Mapping[Hashable, Group],
    requests: Mapping[Hashable, Request],
    empty: Sequence[ResourcePool],
    order: Sequence[int],
) -> Generator[None, None, Found | None]:
    """The check, as a generator: each ``next()`` does one slice; its return value is the
    finding (already validated against the state of the moment it returns), or ``None``."""
    work = 0
    st = _State()
    # -- capture the blocked holders (in slices) ---------------------------------------------
    for h in list(holders.values()):
        work += 1
        if work >= SLICE:
            work = 0
            yield
        if not (h.edges_holder or h.edges_request) or holders.get(h.hid) is not h:
            continue
        st.index[h.hid] = len(st.ids)
        st.ids.append(h.hid)
        st.holder.append(h)
        st.version.append(h.version)
        if h.grants:
            st.grants.extend(h.grants.values())
            work += len(h.grants)
        st.grant_end.append(len(st.grants))
        work += len(h.edges_holder) + len(h.edges_request)
    n = len(st.ids)
    if not n:
        return None
    # -- edges, and the starting state: capacity minus what blocked holders hold --------------
    sim = Sim(empty, order)
    index = st.index
    st.head = [-1] * n
    st.count = [0] * n
    for i in range(n):
        h = st.holder[i]
        edges = 0
        for t in h.edges_holder:
            j = index.get(t)
            if j is not None:
                st.next.append(st.head[j])
                st.head[j] = len(st.source)
                st.source.append(i)
                edges += 1
        for rid in h.edges_request:
            req = requests.get(rid)
            if req is None or req.status != WAITING:
                continue
            if req.group is not None:
                sim.group(req.group, groups, index)
            key = request_key(req)
            entry = st.keys.get(key)
            if entry is None:
                st.keys[key] = (req, [i])
            else:
                entry[1].append(i)
            edges += 1
        st.count[i] = edges
        work += 1 + edges
        if work >= SLICE:
            work = 0
            yield
    for grant in st.grants:
        sim.hold(grant)
        work += 1
        if work >= SLICE:
            work = 0
            yield
    # -- the reduction -----------------------------------------------------------------------
    count = st.count
    finished = bytearray(n)
    ready: deque[int] = deque()
    for i in range(n):
        if count[i] == 0:
            ready.append(i)
        work += 1
        if work >= SLICE:
            work = 0
            yield
    while True:
        while ready:
            i = ready.popleft()
            finished[i] = 1
            for grant in st.held(i):
                sim.release(grant)
            e = st.head[i]
            while e >= 0:
                w = st.source[e]
                count[w] -= 1
                if count[w] == 0:
                    ready.append(w)
                e = st.next[e]
                work += 1
            work += 1
            if work >= SLICE:
                work = 0
                yield
        for key in _retest(sim, st.keys):
            for w in st.keys.pop(key)[1]:
                count[w] -= 1
                if count[w] == 0:
                    ready.append(w)
            work += 1
        sim.cluster_dirty = False
        sim.dirty_groups.clear()
        if not ready:
            break
    stuck = []
    for i in range(n):
        if not finished[i]:
            stuck.append(i)
        work += 1
        if work >= SLICE:
            work = 0
            yield
    if not stuck:
        return None
    found: AskCycle | Request | None = yield from _cycle(stuck, finished, st)
    if found is None:
        found = yield from _victim(stuck, finished, st, sim, requests)
    if found is None:
        return None
    # -- act only on what still holds -------------------------------------------------------
    for i in stuck:
        h = st.holder[i]
        if holders.get(h.hid) is not h or h.version != st.version[i]:
            return Stale()
    if isinstance(found, Request):
        if found.status != WAITING:
            return Stale()
        return Deadlock(found, _message(found, stuck, finished, st, requests, sim), tuple(
            st.ids[i] for i in stuck
        ))
    return found


def _retest(sim: Sim, keys: Mapping[Key, tuple[Request, list[int]]]) -> list[Key]:
    """Keys whose requests became grantable, testing only those where something was freed."""
    out = []
    dirty = sim.dirty_groups
    for key, (req, _) in keys.items():
        gid = key[0]
        if gid is None:
            if sim.cluster_dirty and sim.grantable(req):
                out.append(key)
        elif gid in dirty and sim.grantable(req):
            out.append(key)
    return out


def _cycle(
    stuck: list[int], finished: bytearray, st: _State
) -> Generator[None, None, AskCycle | None]:
    """A cycle of asks among deadlocked holders that serve one message at a time.

    Peel off every holder with no ask edge into the rest (askers of a peeled holder lose an
    edge); whatever remains has an edge into the remainder, so walking edges from any of it
    meets a cycle. Linear, with integers only.
    """
    index = st.index
    n = len(st.ids)
    # 0: not in the ask graph; 1: in it; 2: peeled off
    state = bytearray(n)
    for i in stuck:
        if st.holder[i].serial and st.holder[i].edges_holder:
            state[i] = 1
    outdeg = [0] * n
    peel: deque[int] = deque()
    work = 0
    for i in stuck:
        if state[i] != 1:
            continue
        d = 0
        for t in st.holder[i].edges_holder:
            j = index.get(t)
            if j is not None and state[j] == 1:
                d += 1
        outdeg[i] = d
        if d == 0:
            peel.append(i)
        work += 1 + d
        if work >= SLICE:
            work = 0
            yield
    while peel:
        j = peel.popleft()
        state[j] = 2
        e = st.head[j]
        while e >= 0:
            w = st.source[e]
            if state[w] == 1:
                outdeg[w] -= 1
                if outdeg[w] == 0:
                    peel.append(w)
            e = st.next[e]
            work += 1
        if work >= SLICE:
            work = 0
            yield
    start = next((i for i in stuck if state[i] == 1), None)
    if start is None:
        return None
    seen: dict[int, int] = {}
    path: list[int] = []
    i = start
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        for t in st.holder[i].edges_holder:
            j = index.get(t)
            if j is not None and state[j] == 1:
                i = j
                break
        work += 1
        if work >= SLICE:
            work = 0
            yield
    cycle = tuple(st.ids[k] for k in path[seen[i] :])
    # The newest ask in the cycle is the one that closed it.
    size = len(cycle)
    newest, newest_seq = 0, -1
    for k in range(size):
        seq = st.holder[index[cycle[k]]].edges_holder.get(cycle[(k + 1) % size], 0)
        if seq > newest_seq:
            newest, newest_seq = k, seq
        work += 1
        if work >= SLICE:
            work = 0
            yield
    waiter, target = cycle[newest], cycle[(newest + 1) % size]
    return AskCycle(waiter, target, ask_cycle_message(cycle, waiter, target), cycle)


def _victim(
    stuck: list[int],
    finished: bytearray,
    st: _State,
    sim: Sim,
    requests: Mapping[Hashable, Request],
) -> Generator[None, None, Request | None]:
    keys = st.keys
    waiting: dict[Hashable, Request] = {}
    work = 0
    for i in stuck:
        for rid in st.holder[i].edges_request:
            req = requests.get(rid)
            if req is not None and req.status == WAITING and request_key(req) in keys:
                waiting[rid] = req  # still unsatisfiable
            work += 1
        if work >= SLICE:
            work = 0
            yield
    if not waiting:
        return None
    newest = max(waiting.values(), key=_seq)
    index = st.index
    for req in _newest_first(newest, waiting):
        waiters = []
        for hid in req.waiters:
            k = index.get(hid)
            if k is not None and not finished[k]:
                waiters.append(k)
        if len(waiters) == len(stuck) or _helps(waiters, finished, st, sim):
            return req
        work += len(waiters) + len(keys)
        if work >= SLICE:
            work = 0
            yield
    return newest


def _seq(req: Request) -> int:
    return req.seq


def _newest_first(newest: Request, waiting: Mapping[Hashable, Request]) -> Iterator[Request]:
    """The newest request, then (only if it is not chosen) all of them newest first."""
    yield newest
    yield from sorted(
        (r for r in waiting.values() if r is not newest), key=_seq, reverse=True
    )


def _helps(waiters: list[int], finished: bytearray, st: _State, sim: Sim) -> bool:
    """Whether ending ``waiters`` lets some other deadlocked holder finish at once (then the
    whole reduction progresses: it is monotone)."""
    gone = set(waiters)
    relief: dict[int, int] = {}
    for i in waiters:
        for w in st.askers(i):
            if not finished[w] and w not in gone:
                relief[w] = relief.get(w, 0) + 1
    count = st.count
    if any(n >= count[w] for w, n in relief.items()):
        return True
    log = Log()
    sim.cluster_dirty = False
    sim.dirty_groups.clear()
    for i in waiters:
        for grant in st.held(i):
            sim.release(grant, log)
    try:
        for key in _retest(sim, st.keys):
            for w in st.keys[key][1]:
                if w not in gone:
                    n = relief[w] = relief.get(w, 0) + 1
                    if n >= count[w]:
                        return True
    finally:
        sim.undo(log)
    return False


def _stuck(st: _State, finished: bytearray, hid: Hashable) -> bool:
    i = st.index.get(hid)
    return i is not None and not finished[i]


def _message(
    victim: Request,
    stuck: list[int],
    finished: bytearray,
    st: _State,
    requests: Mapping[Hashable, Request],
    sim: Sim,
) -> str:
    members = {st.ids[i]: st.holder[i] for i in stuck[: 8 * MAX_LISTED]}
    waiters = sorted((hid for hid in victim.waiters if _stuck(st, finished, hid)), key=repr)
    main = waiters[0] if waiters else victim.holder
    k = st.index.get(main)
    listed = sorted((hid for hid in members if hid != main), key=repr)[:MAX_LISTED]
    rest_count = len(stuck) - 1 if _stuck(st, finished, main) else len(stuck)
    return resource_message(
        victim, main, st.holder[k] if k is not None else None,
        [(hid, members[hid]) for hid in listed], rest_count - len(listed), requests,
        free_total(sim),
    )  # fmt: skip
