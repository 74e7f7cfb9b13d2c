"""Search-space primitives: the domains a ``param_space`` value can be drawn from.

Each sampling function (``uniform``, ``choice``, ...) returns a :class:`Domain`; a domain is
resolved into a plain value once per trial by :mod:`actorrt.tune._variants`, with one
``random.Random`` per experiment so a seed reproduces the whole sweep. ``grid_search`` is not a
domain: it returns Ray's marker dict ``{"grid_search": [...]}``, which the variant generator
expands into one trial per value (per sample).

Bounds follow Ray Tune: ``randint`` excludes ``upper``, ``qrandint`` includes it; quantized
values are multiples of ``q`` and, unlike Ray's, never fall outside ``[lower, upper]``.
"""

from __future__ import annotations

import abc
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "choice",
    "grid_search",
    "lograndint",
    "loguniform",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
]


class Domain(abc.ABC):
    """Something a config value is sampled from, once per trial."""

    @abc.abstractmethod
    def sample(self, rng: random.Random) -> Any:
        """Draw one value with ``rng``."""


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _check_q(q: float | None) -> float | None:
    if q is None:
        return None
    q = _number("q", q)
    if q <= 0:
        raise ValueError(f"q (the quantum) must be positive, got {q!r}")
    return q


def _quantize(value: float, lower: float, upper: float, q: float) -> float:
    """The multiple of ``q`` nearest ``value`` that lies in ``[lower, upper]``."""
    low_k, high_k = math.ceil(lower / q - 1e-9), math.floor(upper / q + 1e-9)
    if low_k > high_k:
        raise ValueError(f"no multiple of q={q} lies in [{lower}, {upper}]")
    k = min(max(round(value / q), low_k), high_k)
    return k * q


class Float(Domain):
    """A float from ``[lower, upper)``: uniform, log-uniform, or normal; optionally quantized."""

    def __init__(
        self,
        lower: float,
        upper: float,
        *,
        log_base: float | None = None,
        q: float | None = None,
    ) -> None:
        self.lower, self.upper = _number("lower", lower), _number("upper", upper)
        if self.lower >= self.upper:
            raise ValueError(f"lower must be below upper, got lower={lower!r}, upper={upper!r}")
        if log_base is not None and self.lower <= 0:
            raise ValueError(f"a log-uniform domain needs lower > 0, got lower={lower!r}")
        self.log_base = log_base
        self.q = _check_q(q)

    def sample(self, rng: random.Random) -> float:
        if self.log_base is None:
            value = rng.uniform(self.lower, self.upper)
        else:
            lo, hi = math.log(self.lower), math.log(self.upper)
            value = math.exp(rng.uniform(lo, hi))
        if self.q is not None:
            value = _quantize(value, self.lower, self.upper, self.q)
        return value

    def __repr__(self) -> str:
        kind = "loguniform" if self.log_base is not None else "uniform"
        q = f", q={self.q}" if self.q is not None else ""
        return f"{kind}({self.lower}, {self.upper}{q})"


class Normal(Domain):
    """A float from a normal distribution, optionally quantized."""

    def __init__(self, mean: float, sd: float, q: float | None = None) -> None:
        self.mean, self.sd = _number("mean", mean), _number("sd", sd)
        if self.sd <= 0:
            raise ValueError(f"sd must be positive, got {sd!r}")
        self.q = _check_q(q)

    def sample(self, rng: random.Random) -> float:
        value = rng.gauss(self.mean, self.sd)
        if self.q is not None:
            value = round(value / self.q) * self.q
        return value

    def __repr__(self) -> str:
        return f"randn({self.mean}, {self.sd})"


class Integer(Domain):
    """An int from ``[lower, upper)`` (uniform or log-uniform), optionally a multiple of ``q``."""

    def __init__(self, lower: int, upper: int, *, log: bool = False, q: int | None = None) -> None:
        for name, value in (("lower", lower), ("upper", upper)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if lower >= upper:
            raise ValueError(f"lower must be below upper, got lower={lower!r}, upper={upper!r}")
        if log and lower <= 0:
            raise ValueError(f"a log-uniform integer domain needs lower > 0, got {lower!r}")
        if q is not None and (isinstance(q, bool) or not isinstance(q, int) or q <= 0):
            raise ValueError(f"q must be a positive int, got {q!r}")
        self.lower, self.upper, self.log, self.q = lower, upper, log, q

    def sample(self, rng: random.Random) -> int:
        if self.log:
            value = int(math.exp(rng.uniform(math.log(self.lower), math.log(self.upper))))
            value = min(max(value, self.lower), self.upper - 1)
        else:
            value = rng.randrange(self.lower, self.upper)
        if self.q is not None:
            value = int(_quantize(value, self.lower, self.upper - 1, self.q))
        return value

    def __repr__(self) -> str:
        return f"randint({self.lower}, {self.upper})"


class Categorical(Domain):
    """One of a list of values, each equally likely."""

    def __init__(self, categories: Sequence[Any]) -> None:
        if isinstance(categories, str | bytes) or not isinstance(categories, Sequence):
            raise ValueError(f"choice() takes a list of values, got {categories!r}")
        if not categories:
            raise ValueError("choice() needs at least one value, got []")
        self.categories = list(categories)

    def sample(self, rng: random.Random) -> Any:
        return self.categories[rng.randrange(len(self.categories))]

    def __repr__(self) -> str:
        return f"choice({self.categories!r})"


class Function(Domain):
    """A value computed by ``func(config)`` after every other domain of the config is
    resolved, so a value may depend on others: ``sample_from(lambda config: config["lr"] *
    10)`` (or ``config.lr``), as in Ray 2.60. The older ``lambda spec: spec.config.lr``
    works too, and a function of no argument is called without one.
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise ValueError(f"sample_from() takes a callable, got {func!r}")
        self.func = func

    def sample(self, rng: random.Random) -> Any:
        raise TypeError("a sample_from() domain is resolved with the config; see resolve()")

    def __repr__(self) -> str:
        return f"sample_from({getattr(self.func, '__name__', self.func)!r})"


def uniform(lower: float, upper: float) -> Float:
    """A float drawn uniformly from ``[lower, upper)``."""
    return Float(lower, upper)


def quniform(lower: float, upper: float, q: float) -> Float:
    """A uniform float rounded to a multiple of ``q`` within ``[lower, upper]``."""
    return Float(lower, upper, q=q)


def loguniform(lower: float, upper: float, base: float = 10) -> Float:
    """A float whose logarithm is uniform in ``[log(lower), log(upper))``; ``lower > 0``."""
    return Float(lower, upper, log_base=base)


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Float:
    """A log-uniform float rounded to a multiple of ``q`` within ``[lower, upper]``."""
    return Float(lower, upper, log_base=base, q=q)


def randint(lower: int, upper: int) -> Integer:
    """An int drawn uniformly from ``[lower, upper)`` (``upper`` excluded, as in Ray)."""
    return Integer(lower, upper)


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """A multiple of ``q`` drawn uniformly from ``[lower, upper]`` (``upper`` included)."""
    return Integer(lower, upper + 1, q=q)


def lograndint(lower: int, upper: int) -> Integer:
    """An int whose logarithm is uniform, from ``[lower, upper)``; ``lower > 0``."""
    return Integer(lower, upper, log=True)


def randn(mean: float = 0.0, sd: float = 1.0) -> Normal:
    """A float from the normal distribution ``N(mean, sd)``."""
    return Normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Normal:
    """A normal float rounded to a multiple of ``q``."""
    return Normal(mean, sd, q=q)


def choice(categories: Sequence[Any]) -> Categorical:
    """One of ``categories``, each equally likely."""
    return Categorical(categories)


def sample_from(func: Callable[..., Any]) -> Function:
    """A value computed per trial by ``func(config)`` from the config drawn so far (the
    older ``lambda spec: spec.config.x`` works too)."""
    return Function(func)


def grid_search(values: Sequence[Any]) -> dict[str, list[Any]]:
    """Every value in turn: one trial per value (per sample), Ray's ``{"grid_search": [...]}``."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise ValueError(f"grid_search() takes a list of values, got {values!r}")
    if not values:
        raise ValueError("grid_search() needs at least one value, got []")
    return {"grid_search": list(values)}
