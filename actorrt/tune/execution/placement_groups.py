"""What a trial reserves: ``PlacementGroupFactory``, and :func:`to_factory`, which makes one
from what a user may give.

Every trial is one placement group (docs/tune.md): bundle 0 is the trial driver's own share
(it may be empty: the driver then reserves nothing), bundles 1..n are for the workers the
trial starts, which land there by capture. Normalisation follows Ray Tune: a missing or empty
spec is ``{"CPU": 1}``; otherwise only what is given (``{"gpu": 1}`` is one GPU and no CPU);
``cpu``/``CPU`` and ``gpu``/``GPU`` are the same resource (both, disagreeing: ``ValueError``);
``memory`` is bytes; every other key is a custom resource.

A data type at the bottom of tune: it imports only the pure ``actorrt.resources`` layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actorrt.resources import parse_bundles, parse_resources, parse_strategy

__all__ = ["DEFAULT_BUNDLE", "PlacementGroupFactory", "to_factory"]

DEFAULT_BUNDLE = {"CPU": 1.0}


class PlacementGroupFactory:
    """The bundles (and strategy) one trial reserves, atomically.

    Args:
        bundles: resource dicts; bundle 0 is the trial driver's, and may be empty.
        strategy: ``PACK`` (default), ``SPREAD``, ``STRICT_PACK`` or ``STRICT_SPREAD``.

    Raises:
        ValueError: no bundles, a bad amount, an all-zero bundle after the first, or an
            unknown strategy.
        TypeError: bundles that are not dicts of numbers.
    """

    def __init__(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK") -> None:
        if isinstance(bundles, Mapping):
            raise TypeError(
                f"PlacementGroupFactory takes a list of bundles (dicts), got one dict {bundles!r};"
                " wrap it in a list"
            )
        if not list(bundles):
            raise ValueError(
                "Cannot initialize a PlacementGroupFactory with zero bundles (give a list "
                "of resource dicts: bundle 0 the trial driver's, then its workers')."
            )
        parsed = parse_bundles(list(bundles), allow_empty_head=True)
        self._bundles = [b.to_dict() for b in parsed]
        self._strategy = str(parse_strategy(strategy))

    @property
    def bundles(self) -> list[dict[str, float]]:
        """The bundles, with canonical names (``CPU``, ``GPU``, ``memory``, custom), as
        Ray's: an empty head bundle (the driver reserving nothing) is left out, so these
        are the workers' bundles then (``head_bundle_is_empty`` says which)."""
        kept = self._bundles[1:] if self.head_bundle_is_empty else self._bundles
        return [dict(b) for b in kept]

    @property
    def group_bundles(self) -> list[dict[str, float]]:
        """Every bundle of the trial's placement group: bundle 0 is the driver's, also
        when it is empty, then the workers' (what the group reserves, in order)."""
        return [dict(b) for b in self._bundles]

    @property
    def strategy(self) -> str:
        """The placement strategy."""
        return self._strategy

    @property
    def head_bundle_is_empty(self) -> bool:
        """Whether the trial driver's own bundle reserves nothing."""
        return not self._bundles[0]

    @property
    def head_cpus(self) -> float:
        """The CPUs of the trial driver's own bundle (0 when it is empty), as Ray's."""
        return float(self._bundles[0].get("CPU", 0.0))

    @property
    def required_resources(self) -> dict[str, float]:
        """The total over every bundle."""
        total: dict[str, float] = {}
        for bundle in self._bundles:
            for key, value in bundle.items():
                total[key] = total.get(key, 0.0) + value
        return {k: round(v, 4) for k, v in total.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlacementGroupFactory):
            return NotImplemented
        return self._bundles == other._bundles and self._strategy == other._strategy

    def __hash__(self) -> int:
        return hash((tuple(tuple(sorted(b.items())) for b in self._bundles), self._strategy))

    def __repr__(self) -> str:
        return f"PlacementGroupFactory({self._bundles!r}, strategy={self._strategy!r})"


def _dict_to_factory(spec: Mapping[str, Any]) -> PlacementGroupFactory:
    if not spec:
        return PlacementGroupFactory([DEFAULT_BUNDLE])
    bundle = parse_resources(dict(spec)).to_dict()  # checks names, amounts, cpu vs CPU
    return PlacementGroupFactory([bundle])


def to_factory(spec: Any, *, where: str = "resources") -> PlacementGroupFactory:
    """Normalise a dict, a factory, or an object with ``as_placement_group_factory()``."""
    if spec is None:
        return PlacementGroupFactory([DEFAULT_BUNDLE])
    if isinstance(spec, PlacementGroupFactory):
        return spec
    if isinstance(spec, Mapping):
        return _dict_to_factory(spec)
    if hasattr(spec, "as_placement_group_factory"):
        made = spec.as_placement_group_factory()
        if isinstance(made, PlacementGroupFactory):
            return made
        # The whole group (an empty head kept) where the object says it, else bundles.
        bundles = getattr(made, "group_bundles", None) or getattr(made, "bundles", made)
        return PlacementGroupFactory(bundles, getattr(made, "strategy", "PACK"))
    raise ValueError(
        f"{where} must be a dict, a PlacementGroupFactory, an object with "
        f"as_placement_group_factory() (a ScalingConfig), or a callable config -> one of "
        f"those; got {type(spec).__name__}: {spec!r}"
    )
