"""Search-space primitives: the domains a ``param_space`` value can be drawn from.

Each sampling function (``uniform``, ``choice``, ...) returns a :class:`Domain`; a domain is
resolved into a plain value once per trial by :mod:`actorrt.tune.search.variant_generator`, with one
``random.Random`` per experiment so a seed reproduces the whole sweep. ``grid_search`` is not a
domain: it returns Ray's marker dict ``{"grid_search": [...]}``, which the variant generator
expands into one trial per value (per sample).

Bounds follow Ray Tune: ``randint`` excludes ``upper``, ``qrandint`` includes it; quantized
values are multiples of ``q`` inside ``[lower, upper]`` (Ray refuses float bounds that are
not multiples of ``q``; here they are accepted).
"""

from __future__ import annotations

import abc
import inspect
import math
import random
import warnings
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
    "qlograndint",
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
    """Something a config value is sampled from, once per trial (Ray Tune's ``Domain``)."""

    @abc.abstractmethod
    def _draw(self, rng: random.Random) -> Any:
        """Draw one value with ``rng`` (what the variant generator calls)."""

    def sample(
        self, config: Any = None, size: int = 1, random_state: Any = None
    ) -> Any:
        """Draw values, as Ray's ``Domain.sample``: one value when ``size == 1``, else a list.

        Args:
            config: the config so far (used by ``sample_from`` domains only). A
                ``random.Random`` here is taken as ``random_state``.
            size: how many values.
            random_state: ``None`` (the ``random`` module's state), an int seed, a
                ``random.Random``, or a numpy ``Generator``/``RandomState``.
        """
        if isinstance(config, random.Random) and random_state is None:
            config, random_state = None, config
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int, got {size!r}")
        rng = _rng(random_state)
        values = [self._draw_with(config, rng) for _ in range(size)]
        return values[0] if size == 1 else values

    def _draw_with(self, config: Any, rng: random.Random) -> Any:
        return self._draw(rng)

    def is_grid(self) -> bool:
        """False: a grid is ``tune.grid_search``'s marker, not a domain."""
        return False

    def is_function(self) -> bool:
        """Whether this is a ``sample_from`` domain."""
        return False

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` could have been drawn from this domain."""
        return True

    @property
    def domain_str(self) -> str:
        """The domain as text (Ray's ``domain_str``)."""
        return repr(self)


def _rng(random_state: Any) -> random.Random:
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

    def _draw(self, rng: random.Random) -> float:
        if self.log_base is None:
            value = rng.uniform(self.lower, self.upper)
        else:
            lo, hi = math.log(self.lower), math.log(self.upper)
            value = math.exp(rng.uniform(lo, hi))
        if self.q is not None:
            value = _quantize(value, self.lower, self.upper, self.q)
        return value

    def uniform(self) -> Float:
        """This range, sampled uniformly (Ray's ``Float.uniform()``)."""
        return Float(self.lower, self.upper, q=self.q)

    def loguniform(self, base: float | None = None) -> Float:
        """This range, sampled log-uniformly (``base`` is deprecated, as in Ray)."""
        _warn_for_base(base)
        return Float(self.lower, self.upper, log_base=10, q=self.q)

    def quantized(self, q: float) -> Float:
        """This domain with values rounded to multiples of ``q``."""
        return Float(self.lower, self.upper, log_base=self.log_base, q=q)

    def is_valid(self, value: Any) -> bool:
        return isinstance(value, int | float) and self.lower <= value <= self.upper

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"

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

    def _draw(self, rng: random.Random) -> float:
        value = rng.gauss(self.mean, self.sd)
        if self.q is not None:
            value = round(value / self.q) * self.q
        return value

    def quantized(self, q: float) -> Normal:
        """This distribution with values rounded to multiples of ``q``."""
        return Normal(self.mean, self.sd, q=q)

    def is_valid(self, value: Any) -> bool:
        return isinstance(value, int | float)

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

    def _draw(self, rng: random.Random) -> int:
        if self.log:
            value = int(math.exp(rng.uniform(math.log(self.lower), math.log(self.upper))))
            value = min(max(value, self.lower), self.upper - 1)
        else:
            value = rng.randrange(self.lower, self.upper)
        if self.q is not None:
            value = int(_quantize(value, self.lower, self.upper - 1, self.q))
        return value

    def uniform(self) -> Integer:
        """This range, sampled uniformly (Ray's ``Integer.uniform()``)."""
        return Integer(self.lower, self.upper, q=self.q)

    def loguniform(self, base: float | None = None) -> Integer:
        """This range, sampled log-uniformly (``base`` is deprecated, as in Ray)."""
        _warn_for_base(base)
        return Integer(self.lower, self.upper, log=True, q=self.q)

    def quantized(self, q: int) -> Integer:
        """This domain with values that are multiples of ``q``."""
        return Integer(self.lower, self.upper, log=self.log, q=q)

    def is_valid(self, value: Any) -> bool:
        # Ray's rule: both bounds included (randint's upper too); qrandint's upper, which
        # is stored here as upper + 1, is the last valid value.
        upper = self.upper - 1 if self.q is not None else self.upper
        return isinstance(value, int) and self.lower <= value <= upper

    @property
    def domain_str(self) -> str:
        upper = self.upper - 1 if self.q is not None else self.upper
        return f"({self.lower}, {upper})"

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

    def _draw(self, rng: random.Random) -> Any:
        return self.categories[rng.randrange(len(self.categories))]

    def uniform(self) -> Categorical:
        """Each value equally likely (what it already is; Ray's ``Categorical.uniform()``)."""
        return self

    def grid(self) -> dict[str, list[Any]]:
        """Every value in turn (Ray's ``Categorical.grid()``): ``grid_search(categories)``."""
        return grid_search(self.categories)

    def is_valid(self, value: Any) -> bool:
        return value in self.categories

    @property
    def domain_str(self) -> str:
        return str(self.categories)

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, index: int) -> Any:
        return self.categories[index]

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

    def _draw(self, rng: random.Random) -> Any:
        raise TypeError("a sample_from() domain is resolved with the config; see resolve()")

    def _draw_with(self, config: Any, rng: random.Random) -> Any:
        try:
            inspect.signature(self.func).bind({})
        except TypeError:
            return self.func()  # takes no config
        except ValueError:
            pass  # no signature to read: pass the config
        return self.func(dict(config or {}))

    @property
    def domain_str(self) -> str:
        return f"{self.func}()"

    def is_function(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"sample_from({getattr(self.func, '__name__', self.func)!r})"


def uniform(lower: float, upper: float) -> Float:
    """A float drawn uniformly from ``[lower, upper)``."""
    return Float(lower, upper)


def quniform(lower: float, upper: float, q: float) -> Float:
    """A uniform float rounded to a multiple of ``q`` within ``[lower, upper]``."""
    return Float(lower, upper, q=q)


def _warn_for_base(base: float | None) -> None:
    if base is not None:
        warnings.warn(
            "the base argument is deprecated (as in Ray): it does not change the "
            "distribution; remove it",
            DeprecationWarning,
            stacklevel=3,
        )


def loguniform(lower: float, upper: float, base: float | None = None) -> Float:
    """A float whose logarithm is uniform in ``[log(lower), log(upper))``; ``lower > 0``.
    ``base`` is deprecated, as in Ray (it does not change the distribution)."""
    _warn_for_base(base)
    return Float(lower, upper, log_base=10)


def qloguniform(
    lower: float, upper: float, q: float, base: float | None = None
) -> Float:
    """A log-uniform float rounded to a multiple of ``q`` within ``[lower, upper]``;
    ``base`` is deprecated, as in Ray."""
    _warn_for_base(base)
    return Float(lower, upper, log_base=10, q=q)


def randint(lower: int, upper: int) -> Integer:
    """An int drawn uniformly from ``[lower, upper)`` (``upper`` excluded, as in Ray)."""
    return Integer(lower, upper)


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """A multiple of ``q`` drawn uniformly from ``[lower, upper]`` (``upper`` included)."""
    return Integer(lower, upper + 1, q=q)


def lograndint(lower: int, upper: int, base: float | None = None) -> Integer:
    """An int whose logarithm is uniform, from ``[lower, upper)``; ``lower > 0``.
    ``base`` is deprecated, as in Ray (it does not change the distribution)."""
    _warn_for_base(base)
    return Integer(lower, upper, log=True)


def qlograndint(lower: int, upper: int, q: int, base: float | None = None) -> Integer:
    """A multiple of ``q`` whose logarithm is uniform, from ``[lower, upper]`` (``upper``
    included, as in Ray); ``lower > 0``. ``base`` is deprecated, as in Ray."""
    _warn_for_base(base)
    return Integer(lower, upper + 1, log=True, q=q)


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
