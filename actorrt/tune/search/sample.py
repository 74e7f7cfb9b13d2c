"""Search-space primitives: the domains a ``param_space`` value can be drawn from.

Each sampling function (``uniform``, ``choice``, ...) returns a :class:`Domain` holding a
sampler (:mod:`actorrt.tune.search._samplers`: ``Uniform``, ``LogUniform``, ``Normal``,
``Quantized``, ``Grid``), as Ray Tune builds them: ``tune.quniform(0, 1, 0.25)`` is
``Float(0, 1).uniform().quantized(0.25)``. A domain is resolved into a plain value once per
trial by :mod:`actorrt.tune.search.variant_generator`, with one ``random.Random`` per
experiment so a seed reproduces the whole sweep. ``grid_search`` is not a domain: it
returns Ray's marker dict ``{"grid_search": [...]}``; ``Categorical(...).grid()`` is the
domain form of the same; the variant generator expands both into one trial per value.

Bounds follow Ray Tune: ``randint`` excludes ``upper``; a quantized int is drawn from the
range of the multiples of ``q`` and rounded to one, so ``qrandint``'s ``upper`` comes out
when it is a multiple of ``q > 1`` (with ``q == 1`` Ray's draw excludes it); quantized
values are multiples of ``q`` inside the bounds, and a float range whose bounds are not
multiples of ``q`` is refused, as in Ray.
"""

from __future__ import annotations

import copy
import inspect
import math
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

from ._samplers import (
    MISSING,
    BaseSampler,
    Grid,
    LogUniform,
    Normal,
    Quantized,
    Sampler,
    Uniform,
    as_rng,
    base_sampler,
    quantum,
    warn_for_base,
)

__all__ = [
    "BaseSampler",
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Grid",
    "Integer",
    "LogUniform",
    "Normal",
    "Quantized",
    "Sampler",
    "Uniform",
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


class Domain:
    """Something a config value is sampled from, once per trial (Ray Tune's ``Domain``).

    A domain holds the allowed values (a range, a list) and at most one :class:`Sampler`
    (``sampler``; None until one is chosen, then ``default_sampler_cls()`` is used).
    """

    sampler: Sampler | None = None
    default_sampler_cls: type[Sampler] = Uniform

    def cast(self, value: Any) -> Any:
        """``value`` as this domain's type."""
        return value

    def set_sampler(self, sampler: Sampler, allow_override: bool = False) -> None:
        """Choose how values are drawn; a second sampler needs ``allow_override=True``.

        Raises:
            ValueError: ``sampler`` is not a Sampler, or one is set already.
        """
        if not isinstance(sampler, Sampler):
            raise ValueError(f"set_sampler() takes a Sampler instance, got {sampler!r}")
        if self.sampler is not None and not allow_override:
            raise ValueError(
                "You can only choose one sampler for parameter domains. Existing sampler "
                f"for parameter {type(self).__name__}: {self.sampler}. Tried to add {sampler}"
            )
        self.sampler = sampler

    def get_sampler(self) -> Sampler:
        """The sampler set, else a new ``default_sampler_cls()``."""
        return self.sampler if self.sampler is not None else self.default_sampler_cls()

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
        if isinstance(self.sampler, Grid):
            self.sampler.sample(self)  # raises: a grid is expanded, not drawn
        rng = as_rng(random_state)
        if isinstance(config, list):  # Ray: one config per value
            values = [self._draw_with(c, rng) for c in config[:size]]
        else:
            values = [self._draw_with(config, rng) for _ in range(size)]
        return values[0] if size == 1 else values

    def _draw(self, rng: random.Random) -> Any:
        """Draw one value with ``rng`` (what the variant generator calls)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be drawn from")

    def _draw_with(self, config: Any, rng: random.Random) -> Any:
        return self._draw(rng)

    def is_grid(self) -> bool:
        """Whether every value is tried in turn (a ``Grid`` sampler, as ``.grid()`` sets)."""
        return isinstance(self.sampler, Grid)

    def is_function(self) -> bool:
        """Whether this is a ``sample_from`` domain."""
        return False

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` could have been drawn from this domain."""
        return True

    @property
    def domain_str(self) -> str:
        """The domain as text (Ray's ``domain_str``)."""
        return "(unknown)"


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _check_q(q: float) -> float:
    if isinstance(q, bool) or not isinstance(q, int | float) or not math.isfinite(q) or q <= 0:
        raise ValueError(f"q (the quantum) must be a positive number, got {q!r}")
    return q


def _quantize(value: float, lower: float, upper: float, q: float) -> float:
    """The multiple of ``q`` nearest ``value`` that lies in ``[lower, upper]``."""
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return round(value / q) * q
    low_k, high_k = math.ceil(lower / q - 1e-9), math.floor(upper / q + 1e-9)
    if low_k > high_k:
        raise ValueError(f"no multiple of q={q} lies in [{lower}, {upper}]")
    k = min(max(round(value / q), low_k), high_k)
    return k * q


def _multiples_range(lower: int, upper: int, q: int) -> tuple[int, int]:
    """Ray's range for a quantized int draw: ``[ceil(lower/q)*q, floor(upper/q)*q)``.

    Raises:
        ValueError: the range is empty (fewer than two multiples of ``q`` in
            ``[lower, upper]``), where Ray fails when it samples.
    """
    low, high = -(-lower // q) * q, (upper // q) * q
    if low >= high:
        raise ValueError(
            f"Integer({lower}, {upper}).quantized({q}) has no room: Ray draws from "
            f"[{low}, {high}) (the multiples of q={q} in the bounds) and rounds to a "
            "multiple, so the bounds must hold at least two multiples of q"
        )
    return low, high


def _check_divisible(lower: float, upper: float, q: float) -> None:
    for name, bound in (("lower", lower), ("upper", upper)):
        if math.isfinite(bound) and not math.isclose(bound / q, round(bound / q)):
            raise ValueError(
                f"Your {name} variable bound {bound} is not divisible by quantization "
                f"factor {q}: give bounds that are multiples of q"
            )


def _log_bounds_error(lower: float, upper: float) -> ValueError:
    return ValueError(
        f"LogUniform requires a lower bound greater than 0 (lower > 0) and a finite upper "
        f"bound, got "
        f"lower={lower}, upper={upper}. Did you pass a variable that has been "
        "log-transformed? If so, pass the non-transformed value instead."
    )


class Float(Domain):
    """A float from ``[lower, upper]`` (``None`` is unbounded): drawn uniformly (the
    default), log-uniformly, or from a normal distribution; optionally quantized."""

    def __init__(
        self,
        lower: float | None,
        upper: float | None,
        *,
        log_base: float | None = None,
        q: float | None = None,
    ) -> None:
        self.lower = -math.inf if lower is None else _number("lower", lower)
        self.upper = math.inf if upper is None else _number("upper", upper)
        if self.lower >= self.upper:
            raise ValueError(f"lower must be below upper, got lower={lower!r}, upper={upper!r}")
        if log_base is not None:
            self._set_log()
        if q is not None:
            self._set_quantized(q)

    def cast(self, value: Any) -> float:
        return float(value)

    @property
    def log_base(self) -> float | None:
        """10 when values are drawn log-uniformly, else None."""
        return 10 if isinstance(base_sampler(self.get_sampler()), LogUniform) else None

    @property
    def q(self) -> float | None:
        """The quantum of a quantized domain, else None."""
        return quantum(self.get_sampler())

    @property
    def mean(self) -> float:
        """The mean of a normally sampled domain."""
        return self._normal().mean

    @property
    def sd(self) -> float:
        """The standard deviation of a normally sampled domain."""
        return self._normal().sd

    def _normal(self) -> Normal:
        sampler = base_sampler(self.get_sampler())
        if not isinstance(sampler, Normal):
            raise AttributeError(f"{self!r} is not normally sampled: it has no mean or sd")
        return sampler

    def _draw(self, rng: random.Random) -> float:
        sampler = base_sampler(self.get_sampler())
        if isinstance(sampler, Normal):
            value = rng.gauss(sampler.mean, sampler.sd)
        elif not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ValueError(f"{self!r} is unbounded: give bounds, or sample with .normal()")
        elif isinstance(sampler, LogUniform):
            value = math.exp(rng.uniform(math.log(self.lower), math.log(self.upper)))
        else:
            value = rng.uniform(self.lower, self.upper)
        q = self.q
        return float(_quantize(value, self.lower, self.upper, q)) if q is not None else value

    def _copy_with(self, sampler: Sampler, allow_override: bool = False) -> Float:
        new = copy.copy(self)
        new.set_sampler(sampler, allow_override=allow_override)
        return new

    def uniform(self) -> Float:
        """This range, drawn uniformly (Ray's ``Float.uniform()``); needs both bounds."""
        for name, bound in (("lower", self.lower), ("upper", self.upper)):
            if not math.isfinite(bound):
                raise ValueError(
                    f"Uniform requires a {name} bound. Make sure to set the `{name}` "
                    "parameter of `Float()`."
                )
        return self._copy_with(Uniform())

    def _set_log(self) -> None:
        if not (self.lower > 0 and math.isfinite(self.upper)):
            raise _log_bounds_error(self.lower, self.upper)
        self.set_sampler(LogUniform())

    def loguniform(self, base: object = MISSING) -> Float:
        """This range, drawn log-uniformly; ``lower > 0`` (``base`` is deprecated, as in Ray)."""
        if base is not MISSING:
            warn_for_base()
        new = copy.copy(self)
        new._set_log()
        return new

    def normal(self, mean: float = 0.0, sd: float = 1.0) -> Float:
        """Values from ``N(mean, sd)`` (Ray's ``Float.normal()``; for ``Float(None, None)``)."""
        return self._copy_with(Normal(mean, sd))

    def _set_quantized(self, q: float) -> None:
        q = _check_q(q)
        _check_divisible(self.lower, self.upper, q)
        self.set_sampler(Quantized(self.get_sampler(), q), allow_override=True)

    def quantized(self, q: float) -> Float:
        """This domain with values rounded to multiples of ``q`` (bounds must be multiples)."""
        new = copy.copy(self)
        new._set_quantized(q)
        return new

    def is_valid(self, value: Any) -> bool:
        return isinstance(value, int | float) and self.lower <= value <= self.upper

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"

    def __repr__(self) -> str:
        sampler = base_sampler(self.get_sampler())
        q = f", q={self.q}" if self.q is not None else ""
        if isinstance(sampler, Normal):
            return f"randn({sampler.mean}, {sampler.sd}{q})"
        kind = "loguniform" if isinstance(sampler, LogUniform) else "uniform"
        return f"{kind}({self.lower}, {self.upper}{q})"


def is_normal(domain: Domain) -> TypeGuard[Float]:
    """Whether ``domain`` is drawn from a normal distribution (``tune.randn``)."""
    return isinstance(domain, Float) and isinstance(base_sampler(domain.get_sampler()), Normal)


class Integer(Domain):
    """An int from ``[lower, upper)`` (uniform or log-uniform), optionally a multiple of ``q``.

    Quantized as in Ray: with ``q > 1`` an int is drawn from ``[ceil(lower/q)*q,
    floor(upper/q)*q)`` and rounded to the nearest multiple of ``q``, so ``upper`` itself
    comes out when it is a multiple of ``q`` (``qrandint``'s "upper included"); with
    ``q == 1`` the draw is the unquantized one, from ``[lower, upper)``.
    """

    def __init__(self, lower: int, upper: int, *, log: bool = False, q: int | None = None) -> None:
        for name, value in (("lower", lower), ("upper", upper)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if lower >= upper:
            raise ValueError(f"lower must be below upper, got lower={lower!r}, upper={upper!r}")
        self.lower, self.upper = lower, upper
        if log:
            self._set_log()
        if q is not None:
            self._set_quantized(q)

    def cast(self, value: Any) -> int:
        return int(value)

    @property
    def log(self) -> bool:
        """Whether values are drawn log-uniformly."""
        return isinstance(base_sampler(self.get_sampler()), LogUniform)

    @property
    def q(self) -> int | None:
        """The quantum of a quantized domain, else None."""
        q = quantum(self.get_sampler())
        return None if q is None else int(q)

    def _draw(self, rng: random.Random) -> int:
        q = self.q
        lower, upper = self.lower, self.upper
        if q is not None and q != 1:
            lower, upper = _multiples_range(lower, upper, q)
        if self.log:
            value = math.floor(math.exp(rng.uniform(math.log(lower), math.log(upper))))
            value = min(max(value, lower), upper - 1)
        else:
            value = rng.randrange(lower, upper)
        if q is not None and q != 1:
            value = round(value / q) * q
        return int(value)

    def uniform(self) -> Integer:
        """This range, drawn uniformly (Ray's ``Integer.uniform()``)."""
        new = copy.copy(self)
        new.set_sampler(Uniform())
        return new

    def _set_log(self) -> None:
        if self.lower <= 0:
            raise _log_bounds_error(self.lower, self.upper)
        self.set_sampler(LogUniform())

    def loguniform(self, base: object = MISSING) -> Integer:
        """This range, drawn log-uniformly; ``lower > 0`` (``base`` is deprecated, as in Ray)."""
        if base is not MISSING:
            warn_for_base()
        new = copy.copy(self)
        new._set_log()
        return new

    def _set_quantized(self, q: int) -> None:
        if isinstance(q, bool) or not isinstance(q, int) or q <= 0:
            raise ValueError(f"q must be a positive int, got {q!r}")
        if q != 1:
            _multiples_range(self.lower, self.upper, q)  # raises if there is no room
        self.set_sampler(Quantized(self.get_sampler(), q), allow_override=True)

    def quantized(self, q: int) -> Integer:
        """This domain with values that are multiples of ``q`` in ``[lower, upper]``
        (``upper`` comes out when it is a multiple of ``q`` and ``q > 1``, as in Ray)."""
        new = copy.copy(self)
        new._set_quantized(q)
        return new

    def is_valid(self, value: Any) -> bool:
        # Ray's rule: both bounds included (randint's upper too).
        return isinstance(value, int) and self.lower <= value <= self.upper

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"

    def __repr__(self) -> str:
        return f"randint({self.lower}, {self.upper})"


class Categorical(Domain):
    """One of a list of values, each equally likely (or every one in turn, ``.grid()``)."""

    def __init__(self, categories: Sequence[Any]) -> None:
        if isinstance(categories, str | bytes) or not isinstance(categories, Sequence):
            raise ValueError(f"choice() takes a list of values, got {categories!r}")
        if not categories:
            raise ValueError("choice() needs at least one value, got []")
        self.categories = list(categories)

    def _draw(self, rng: random.Random) -> Any:
        return self.categories[rng.randrange(len(self.categories))]

    def uniform(self) -> Categorical:
        """A copy drawn with each value equally likely (Ray's ``Categorical.uniform()``)."""
        new = copy.copy(self)
        new.set_sampler(Uniform())
        return new

    def grid(self) -> Categorical:
        """A copy that tries every value in turn (Ray's ``Categorical.grid()``), as
        ``grid_search(categories)`` does."""
        new = copy.copy(self)
        new.set_sampler(Grid())
        return new

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


class _AttrDict(dict[str, Any]):
    """A dict that also reads its keys as attributes (``config.lr``), as in Ray."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return _AttrDict(value) if isinstance(value, dict) else value


class SampleConfig(_AttrDict):
    """What a ``sample_from`` function receives: the config being built, as in Ray 2.60
    (``lambda config: config["lr"] * 10`` or ``config.lr``). The older spelling
    ``lambda spec: spec.config.lr`` works too: ``.config`` is the config itself, unless
    the config has a key ``"config"`` of its own (then that key's value)."""

    def __getattr__(self, name: str) -> Any:
        if name == "config" and "config" not in self:
            return self
        return super().__getattr__(name)


class Function(Domain):
    """A value computed by ``func(config)`` after every other domain of the config is
    resolved, so a value may depend on others: ``sample_from(lambda config: config["lr"] *
    10)`` (or ``config.lr``), as in Ray 2.60. The older ``lambda spec: spec.config.lr``
    works too, and a function of no argument is called without one.

    Raises:
        ValueError: ``func`` is not callable, or takes neither zero nor one argument.
    """

    default_sampler_cls = BaseSampler

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise ValueError(f"sample_from() takes a callable, got {func!r}")
        self.pass_config = _takes_config(func)
        self.func = func

    def _draw(self, rng: random.Random) -> Any:
        return self._draw_with(None, rng)

    def _draw_with(self, config: Any, rng: random.Random) -> Any:
        if not self.pass_config:
            return self.func()
        return self.func(SampleConfig(dict(config or {})))

    @property
    def domain_str(self) -> str:
        return f"{self.func}()"

    def is_function(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"sample_from({getattr(self.func, '__name__', self.func)!r})"


def _takes_config(func: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(func)
    except ValueError:
        return True  # no signature to read (a builtin): pass the config
    try:
        signature.bind({})
        return True
    except TypeError:
        pass
    try:
        signature.bind()
    except TypeError:
        raise ValueError(
            f"The function passed to sample_from() ({func!r}) must be callable with either "
            "0 or 1 parameters (the config)"
        ) from None
    return False


def uniform(lower: float, upper: float) -> Float:
    """A float drawn uniformly from ``[lower, upper)``: ``Float(lower, upper).uniform()``."""
    return Float(lower, upper).uniform()


def quniform(lower: float, upper: float, q: float) -> Float:
    """A uniform float rounded to a multiple of ``q`` within ``[lower, upper]`` (both
    bounds multiples of ``q``, as Ray requires)."""
    return Float(lower, upper).uniform().quantized(q)


def loguniform(lower: float, upper: float, base: object = MISSING) -> Float:
    """A float whose logarithm is uniform in ``[log(lower), log(upper))``; ``lower > 0``.
    ``base`` is deprecated, as in Ray (it does not change the distribution)."""
    if base is not MISSING:
        warn_for_base()
    return Float(lower, upper).loguniform()


def qloguniform(lower: float, upper: float, q: float, base: object = MISSING) -> Float:
    """A log-uniform float rounded to a multiple of ``q`` within ``[lower, upper]``;
    ``base`` is deprecated, as in Ray."""
    if base is not MISSING:
        warn_for_base()
    return Float(lower, upper).loguniform().quantized(q)


def randint(lower: int, upper: int) -> Integer:
    """An int drawn uniformly from ``[lower, upper)`` (``upper`` excluded, as in Ray)."""
    return Integer(lower, upper).uniform()


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """A multiple of ``q`` from ``[lower, upper]``, as Ray draws it: uniformly from the
    multiples' range, rounded to a multiple, so ``upper`` comes out when it is a multiple
    of ``q > 1``; with the default ``q=1`` the draw is ``randint``'s (``upper``
    excluded), as in Ray. The domain keeps ``upper`` as given."""
    return Integer(lower, upper).uniform().quantized(q)


def lograndint(lower: int, upper: int, base: object = MISSING) -> Integer:
    """An int whose logarithm is uniform, from ``[lower, upper)``; ``lower > 0``.
    ``base`` is deprecated, as in Ray (it does not change the distribution)."""
    if base is not MISSING:
        warn_for_base()
    return Integer(lower, upper).loguniform()


def qlograndint(lower: int, upper: int, q: int, base: object = MISSING) -> Integer:
    """A multiple of ``q`` whose logarithm is uniform, from ``[lower, upper]`` (``upper``
    included, as in Ray); ``lower > 0``. ``base`` is deprecated, as in Ray."""
    if base is not MISSING:
        warn_for_base()
    return Integer(lower, upper).loguniform().quantized(q)


def randn(mean: float = 0.0, sd: float = 1.0) -> Float:
    """A float from the normal distribution ``N(mean, sd)``: ``Float(None, None).normal()``."""
    return Float(None, None).normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Float:
    """A normal float rounded to a multiple of ``q``."""
    return Float(None, None).normal(mean, sd).quantized(q)


def choice(categories: Sequence[Any]) -> Categorical:
    """One of ``categories``, each equally likely: ``Categorical(categories).uniform()``."""
    return Categorical(categories).uniform()


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
