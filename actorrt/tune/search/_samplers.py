"""Samplers: how a search-space domain draws its values (Ray Tune's ``Sampler`` classes).

A domain (``Float``, ``Integer``, ...) says which values are allowed; its sampler says how
one is drawn: ``Uniform``, ``LogUniform``, ``Normal``, ``Quantized`` (another sampler's
value rounded to a multiple of ``q``), or ``Grid`` (every value in turn, expanded by the
variant generator, never drawn). A domain holds at most one sampler, set once through
``Domain.set_sampler`` (``Quantized`` wraps the one it replaces), as in Ray.
"""

from __future__ import annotations

import copy
import math
import random
import warnings
from typing import Any

from ..._shared._deprecation import RayDeprecationWarning

__all__ = [
    "BaseSampler",
    "Grid",
    "LogUniform",
    "Normal",
    "Quantized",
    "Sampler",
    "Uniform",
]

MISSING: Any = object()  # a deprecated argument left out


def warn_for_base() -> None:
    """Ray's deprecation warning for the ``base`` argument of the log-uniform domains."""
    warnings.warn(
        "The `base` argument is deprecated: remove it, it does not change the distribution",
        RayDeprecationWarning,
        stacklevel=3,
    )


class Sampler:
    """How a domain's values are drawn; ``sample`` draws with this sampler."""

    def sample(
        self,
        domain: Any,
        config: Any = None,
        size: int = 1,
        random_state: Any = None,
    ) -> Any:
        """Draw from ``domain`` with this sampler (``Domain.sample``'s arguments)."""
        drawn = copy.copy(domain)
        drawn.sampler = self
        return drawn.sample(config, size=size, random_state=random_state)

    def __str__(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class BaseSampler(Sampler):
    """The sampler of a ``sample_from`` domain: it calls the function."""

    def __str__(self) -> str:
        return "Base"


class Uniform(Sampler):
    """Every value of the range equally likely."""


class LogUniform(Sampler):
    """The value's logarithm uniform over the range (``base`` is deprecated, as in Ray)."""

    def __init__(self, base: object = MISSING) -> None:
        if base is not MISSING:
            warn_for_base()


class Normal(Sampler):
    """A value from the normal distribution ``N(mean, sd)``; ``sd`` must be positive."""

    def __init__(self, mean: float = 0.0, sd: float = 0.0) -> None:
        for name, value in (("mean", mean), ("sd", sd)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"Normal {name} must be a number, got {value!r}")
        if not sd > 0:
            raise ValueError(
                f"SD has to be strictly greater than 0 (sd must be positive), got {sd!r}"
            )
        self.mean, self.sd = float(mean), float(sd)

    def __repr__(self) -> str:
        return f"Normal(mean={self.mean}, sd={self.sd})"


class Grid(Sampler):
    """Every value in turn: the variant generator expands it, like ``grid_search``."""

    def sample(
        self, domain: Any, config: Any = None, size: int = 1, random_state: Any = None
    ) -> Any:
        raise RuntimeError(
            "a grid domain is not sampled: Tune runs one trial per value "
            "(do not call `sample()` on grid)"
        )


class Quantized(Sampler):
    """``sampler``'s value rounded to the nearest multiple of ``q`` inside the domain."""

    def __init__(self, sampler: Sampler, q: float) -> None:
        if not isinstance(sampler, Sampler):
            raise ValueError(f"Quantized() expects a sampler instance, got {sampler!r}")
        if isinstance(q, bool) or not isinstance(q, int | float) or not math.isfinite(q) or q <= 0:
            raise ValueError(f"q (the quantum) must be a positive number, got {q!r}")
        self.sampler, self.q = sampler, q

    def get_sampler(self) -> Sampler:
        """The sampler whose values are rounded."""
        return self.sampler

    def __str__(self) -> str:
        return f"Quantized({self.sampler}, q={self.q})"

    def __repr__(self) -> str:
        return f"Quantized({self.sampler!r}, q={self.q})"


def base_sampler(sampler: Sampler) -> Sampler:
    """The sampler under any ``Quantized`` wrapper."""
    while isinstance(sampler, Quantized):
        sampler = sampler.get_sampler()
    return sampler


def quantum(sampler: Sampler) -> float | None:
    """The ``q`` of a ``Quantized`` sampler, else None."""
    return sampler.q if isinstance(sampler, Quantized) else None


def as_rng(random_state: Any) -> random.Random:
    """A ``random.Random`` for ``Domain.sample``'s ``random_state``."""
    if random_state is None:
        return random._inst  # the module-level generator
    if isinstance(random_state, random.Random):
        return random_state
    if isinstance(random_state, int) and not isinstance(random_state, bool):
        return random.Random(random_state)
    integers = getattr(random_state, "integers", None) or getattr(random_state, "randint", None)
    if callable(integers):  # numpy Generator / RandomState: seed ours from it
        return random.Random(int(integers(0, 2**31 - 1)))
    raise ValueError(
        "random_state must be None, an int seed, a random.Random or a numpy "
        f"Generator/RandomState, got {random_state!r}"
    )
